//! The timeline figure: read and write GiB/s over time with the phases
//! shaded and named. Names sit in a band above the data, in rows, so they
//! never overlap each other or the curves; the legend has its own strip to
//! the right. Given a second trace (a replay's `--record-ops` log), the two
//! are drawn one above the other on one time axis, each from its own first
//! call, so a capture and its replay line up phase by phase.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::canvas::{text_size, DrawResult, Figure, FONT};
use super::labels::{place, Wanted};
use super::legend::{self, Entry, Swatch};
use iorepro_analysis::overview::Overview;
use iorepro_analysis::phases::PhaseKind;

/// Windows per series: about one per 1.5 pixels of the chart, few enough
/// that a short burst still reads as a bar rather than a spike.
pub const PLOT_WINDOWS: usize = 600;
const WIDTH: u32 = 1200;
const PANEL_HEIGHT: u32 = 420;
const TITLE_HEIGHT: u32 = 40;
/// Rows of phase names above each chart, and their height in pixels.
pub const LABEL_ROWS: usize = 3;
pub const LABEL_ROW_PX: i32 = 17;
/// Height of a panel's name line.
const NAME_PX: i32 = 20;
/// Point size of phase names.
pub const LABEL_PT: f64 = 12.0;
use iorepro_format::units::GIB;

const READ_COLOR: RGBColor = RGBColor(20, 80, 200);
const WRITE_COLOR: RGBColor = RGBColor(200, 30, 30);

pub fn shade(kind: PhaseKind) -> RGBColor {
    match kind {
        PhaseKind::Load => RGBColor(255, 170, 60),
        PhaseKind::Read => RGBColor(120, 170, 230),
        PhaseKind::Checkpoint => RGBColor(230, 80, 80),
        PhaseKind::Metadata => RGBColor(150, 110, 200),
        PhaseKind::Idle => RGBColor(170, 170, 170),
    }
}

/// Which names matter most when there is not room for all.
fn priority(kind: PhaseKind) -> u8 {
    match kind {
        PhaseKind::Checkpoint => 0,
        PhaseKind::Load => 1,
        PhaseKind::Metadata => 2,
        PhaseKind::Idle => 3,
        PhaseKind::Read => 4,
    }
}

/// One chart of the figure: a trace's overview under a name.
pub struct Panel<'a> {
    pub name: String,
    pub overview: &'a Overview,
}

/// Bandwidth over time, phases shaded; one panel per trace.
pub struct TimelineFigure<'a> {
    pub title: String,
    pub panels: Vec<Panel<'a>>,
}

impl Figure for TimelineFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (
            WIDTH,
            TITLE_HEIGHT + PANEL_HEIGHT * self.panels.len().max(1) as u32,
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let (main, side) = legend::frame(root, WIDTH, &self.title)?;
        // One time axis for every panel.
        let duration = self
            .panels
            .iter()
            .map(|p| p.overview.duration_s)
            .fold(0.0, f64::max);
        // One rate scale too, so a replay's spike compares with the capture's.
        let ymax = self
            .panels
            .iter()
            .map(|p| peak_rate(p.overview))
            .fold(0.0, f64::max)
            .max(1e-6)
            * 1.1;
        let mut legend_top = None;
        for (panel, area) in self
            .panels
            .iter()
            .zip(main.split_evenly((self.panels.len(), 1)))
        {
            let top = draw_panel(root, &area, panel, duration, ymax)?;
            legend_top.get_or_insert(top);
        }
        let mut entries = vec![
            Entry {
                swatch: Swatch::Line(READ_COLOR),
                name: "read GiB/s".into(),
            },
            Entry {
                swatch: Swatch::Line(WRITE_COLOR),
                name: "write GiB/s".into(),
            },
        ];
        for kind in PhaseKind::ALL {
            if self
                .panels
                .iter()
                .any(|p| p.overview.phases.iter().any(|ph| ph.kind == kind))
            {
                entries.push(Entry {
                    swatch: Swatch::Area(shade(kind).mix(0.4)),
                    name: format!("{} phase", kind.as_str()),
                });
            }
        }
        let (_, side_top) = side.get_base_pixel();
        legend::draw(&side, legend_top.unwrap_or(side_top) - side_top, &entries)
    }
}

/// Highest read or write GiB/s of one window of the plotted timeline.
fn peak_rate(o: &Overview) -> f64 {
    let tl = o.timeline.at_most(PLOT_WINDOWS);
    let top = tl
        .read()
        .iter()
        .chain(tl.write())
        .copied()
        .max()
        .unwrap_or(0);
    top as f64 / GIB / tl.window_s()
}

/// Draws one chart in `area` and its phase names on `root` (absolute
/// pixels); returns the pixel row of the chart's top edge.
fn draw_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    duration: f64,
    ymax: f64,
) -> Result<i32, Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let tl = panel.overview.timeline.at_most(PLOT_WINDOWS);
    let secs = tl.window_s();
    let rate = |b: u64| b as f64 / GIB / secs;
    let duration = duration.max(secs);
    // The panel's name on its own line (when the figure has several), then
    // the band of phase names.
    let name_px = if panel.name.is_empty() {
        0
    } else {
        let font = FontDesc::new(FontFamily::Name(FONT), 14.0, FontStyle::Normal)
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Top));
        area.draw(&Text::new(panel.name.clone(), (78, 4), font))?;
        NAME_PX
    };
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .margin_top(name_px + LABEL_ROWS as i32 * LABEL_ROW_PX + 6)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..duration, 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_desc("time since first event (s)")
        .y_desc(format!("GiB/s (per {} ms window)", (secs * 1e3).round()))
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    let phases = &panel.overview.phases;
    chart.draw_series(phases.iter().map(|p| {
        Rectangle::new(
            [(p.start_s, 0.0), (p.end_s, ymax)],
            shade(p.kind).mix(0.25).filled(),
        )
    }))?;
    // Steps: each window's rate held across the window.
    let steps = |v: &[u64]| -> Vec<(f64, f64)> {
        v.iter()
            .enumerate()
            .flat_map(|(i, &b)| [(i as f64 * secs, rate(b)), ((i + 1) as f64 * secs, rate(b))])
            .collect()
    };
    chart.draw_series(LineSeries::new(
        steps(tl.read()),
        READ_COLOR.stroke_width(2),
    ))?;
    chart.draw_series(LineSeries::new(
        steps(tl.write()),
        WRITE_COLOR.stroke_width(2),
    ))?;

    // Phase names in the band above the chart, never over each other.
    let (left, top) = chart.backend_coord(&(0.0, ymax));
    let (right, _) = chart.backend_coord(&(duration, ymax));
    let named: Vec<_> = phases
        .iter()
        .filter(|p| p.kind != PhaseKind::Read)
        .collect();
    let wanted: Vec<Wanted> = named
        .iter()
        .map(|p| Wanted {
            x: chart.backend_coord(&((p.start_s + p.end_s) / 2.0, ymax)).0 as f64,
            width: text_size(p.kind.as_str(), LABEL_PT).0 as f64,
            priority: priority(p.kind),
        })
        .collect();
    let font = FontDesc::new(FontFamily::Name(FONT), LABEL_PT, FontStyle::Normal)
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (p, spot) in named
        .iter()
        .zip(place(&wanted, left as f64, right as f64, LABEL_ROWS))
    {
        let Some((row, x)) = spot else { continue };
        let y = top - 4 - row as i32 * LABEL_ROW_PX - LABEL_ROW_PX / 2;
        root.draw(&Text::new(
            p.kind.as_str().to_string(),
            (x.round() as i32, y),
            font.clone(),
        ))?;
    }
    Ok(top)
}
