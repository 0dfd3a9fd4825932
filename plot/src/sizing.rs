//! The sizing sweep's picture: on the left, each epoch's lowest AU
//! against the storage's read bandwidth, a line per rank count, with the
//! AU bar; on the right, the longest save against the write bandwidth, a
//! line per rank count. Bandwidth runs on a log scale: sweeps span
//! decades.

use plotters::coord::combinators::IntoLogRange;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::canvas::{DrawResult, Figure, FONT};
use super::legend::{self, Entry, Swatch};

/// One rank count's plans: (bandwidth GiB/s, value) in the order planned.
pub struct SizingLine {
    pub name: String,
    pub au: Vec<(f64, f64)>,
    pub save_s: Vec<(f64, f64)>,
}

pub struct SizingFigure {
    pub title: String,
    pub lines: Vec<SizingLine>,
    /// The AU bar (percent).
    pub bar: f64,
}

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 460;

/// A line's colour, in the order the lines come.
fn colour(i: usize) -> RGBColor {
    const COLOURS: [RGBColor; 6] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(255, 127, 14),
        RGBColor(23, 190, 207),
    ];
    COLOURS[i % COLOURS.len()]
}

/// The bandwidths' span on a log axis, a little wider than the points.
fn x_range(points: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = points
        .filter(|x| *x > 0.0 && x.is_finite())
        .fold((f64::MAX, 0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    if hi <= 0.0 {
        return (0.1, 10.0);
    }
    (lo / 1.5, hi * 1.5)
}

impl SizingFigure {
    fn panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        (x_desc, y_desc): (&str, &str),
        points: &dyn Fn(&SizingLine) -> &[(f64, f64)],
        bar: Option<f64>,
    ) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let (x0, x1) = x_range(
            self.lines
                .iter()
                .flat_map(|l| points(l).iter().map(|p| p.0)),
        );
        let ymax = self
            .lines
            .iter()
            .flat_map(|l| points(l).iter().map(|p| p.1))
            .chain(bar)
            .fold(0f64, f64::max)
            .max(1e-3)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d((x0..x1).log_scale(), 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()?;
        if let Some(bar) = bar {
            chart.draw_series(LineSeries::new(
                [(x0, bar), (x1, bar)],
                BLACK.mix(0.5).stroke_width(1),
            ))?;
        }
        for (i, line) in self.lines.iter().enumerate() {
            let c = colour(i);
            let mut pts: Vec<(f64, f64)> = points(line)
                .iter()
                .copied()
                .filter(|p| p.0 > 0.0 && p.0.is_finite())
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?;
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
        }
        Ok(())
    }
}

impl Figure for SizingFigure {
    fn size(&self) -> (u32, u32) {
        (WIDTH, HEIGHT)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let (main, side) = legend::frame(root, WIDTH, &self.title)?;
        let (left, right) = main.split_horizontally((WIDTH - legend::WIDTH) / 2);
        self.panel(
            &left,
            ("read bandwidth (GiB/s)", "lowest epoch AU (%)"),
            &|l| &l.au,
            Some(self.bar),
        )?;
        self.panel(
            &right,
            ("write bandwidth (GiB/s)", "longest save (s)"),
            &|l| &l.save_s,
            None,
        )?;
        let mut entries: Vec<Entry> = self
            .lines
            .iter()
            .enumerate()
            .map(|(i, l)| Entry {
                swatch: Swatch::Line(colour(i)),
                name: l.name.clone(),
            })
            .collect();
        entries.push(Entry {
            swatch: Swatch::Line(RGBColor(128, 128, 128)),
            name: format!("AU bar {:.0} %", self.bar),
        });
        legend::draw(&side, 40, &entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_draws_a_line_per_rank_count_and_the_bar() {
        let dir = std::env::temp_dir().join(format!("iorepro-sizing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("sweep.svg");
        let fig = SizingFigure {
            title: "sizing".into(),
            bar: 90.0,
            lines: vec![
                SizingLine {
                    name: "64 ranks".into(),
                    au: vec![(10.0, 95.0), (50.0, 99.0)],
                    save_s: vec![(10.0, 4.0), (50.0, 1.0)],
                },
                SizingLine {
                    name: "512 ranks".into(),
                    au: vec![(10.0, 40.0), (50.0, 91.0)],
                    save_s: vec![(10.0, 9.0), (50.0, 2.5)],
                },
            ],
        };
        super::super::canvas::render(&fig, &out).unwrap();
        let svg = std::fs::read_to_string(&out).unwrap();
        for text in [
            "64 ranks",
            "512 ranks",
            "AU bar 90 %",
            "lowest epoch AU (%)",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert!(svg.matches("<circle").count() >= 8, "a mark per plan");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
