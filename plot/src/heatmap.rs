//! Who did I/O when: ranks down, time across, each cell coloured by the bytes
//! the rank read (top panel) or wrote (bottom panel) in that time window, on
//! a log scale, as DXT Explorer draws a job. Stragglers show as late rows, a
//! checkpoint as a stripe down the write panel. The cells come from their own
//! parallel pass over four columns; many ranks are drawn in bands of
//! neighbouring ranks, so the figure keeps its size.

use arrow_array::Array;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::canvas::{DrawResult, Figure, FONT};
use super::legend;
use iorepro_analysis::overview::span_ns;
use iorepro_format::error::TraceResult;
use iorepro_format::reader::TraceReader;
use iorepro_format::scan::{scan, Fold, ScanBatch};
use iorepro_format::schema::{Op, COL_OP, COL_RANK, COL_RET, COL_TS};

/// Time windows across the figure.
pub const COLUMNS: usize = 300;
/// Most rows drawn; more ranks are grouped into bands.
pub const MAX_ROWS: usize = 128;
const WIDTH: u32 = 1200;
const HEIGHT: u32 = 760;

/// Bytes per rank and window: read and written.
#[derive(Debug, Clone)]
pub struct RankWindows {
    pub origin_ns: i64,
    pub window_ns: i64,
    /// Ranks in order; rows without a rank are the last entry, `None`.
    pub ranks: Vec<Option<i32>>,
    /// `read[r][w]`: bytes rank `ranks[r]` read in window `w`.
    pub read: Vec<Vec<u64>>,
    pub write: Vec<Vec<u64>>,
}

/// One part's cells, by rank.
struct Part {
    origin_ns: i64,
    window_ns: i64,
    cells: std::collections::HashMap<Option<i32>, (Vec<u64>, Vec<u64>)>,
}

impl Fold for Part {
    fn add(&mut self, b: &ScanBatch) {
        let (ts, ret, rank) = (b.ts(), b.ret(), b.rank());
        let (keys, table) = b.ops();
        for i in 0..b.len() {
            let op = table[keys[i] as usize];
            let write = op == Op::Write;
            if ret[i] <= 0 || !(write || op == Op::Read) {
                continue;
            }
            let w = (((ts[i] - self.origin_ns).max(0) / self.window_ns) as usize).min(COLUMNS - 1);
            let r = rank.is_valid(i).then(|| rank.value(i));
            let (rd, wr) = self
                .cells
                .entry(r)
                .or_insert_with(|| (vec![0; COLUMNS], vec![0; COLUMNS]));
            if write {
                wr[w] += ret[i] as u64;
            } else {
                rd[w] += ret[i] as u64;
            }
        }
    }
}

impl RankWindows {
    /// One parallel pass over `ts`, `rank`, `op` and `ret`.
    pub fn compute(reader: &TraceReader) -> TraceResult<RankWindows> {
        let (first, last) = span_ns(reader)?;
        let window_ns = ((last - first) / COLUMNS as i64 + 1).max(1);
        let mut all = Part {
            origin_ns: first,
            window_ns,
            cells: Default::default(),
        };
        scan(
            reader,
            &[COL_TS, COL_RANK, COL_OP, COL_RET],
            || Part {
                origin_ns: first,
                window_ns,
                cells: Default::default(),
            },
            |part| {
                for (r, (rd, wr)) in part.cells {
                    let (a, b) = all
                        .cells
                        .entry(r)
                        .or_insert_with(|| (vec![0; COLUMNS], vec![0; COLUMNS]));
                    a.iter_mut().zip(rd).for_each(|(x, y)| *x += y);
                    b.iter_mut().zip(wr).for_each(|(x, y)| *x += y);
                }
            },
        )?;
        let mut ranks: Vec<Option<i32>> = all.cells.keys().copied().collect();
        // Ranks in order, rows without a rank last.
        ranks.sort_by_key(|r| (r.is_none(), *r));
        let (read, write) = ranks
            .iter()
            .map(|r| all.cells.remove(r).expect("rank listed"))
            .unzip();
        Ok(RankWindows {
            origin_ns: first,
            window_ns,
            ranks,
            read,
            write,
        })
    }
}

/// A row of the figure: one rank, or a band of neighbouring ranks.
struct Row {
    label: String,
    read: Vec<u64>,
    write: Vec<u64>,
}

fn rank_name(r: Option<i32>) -> String {
    r.map_or("no rank".into(), |r| r.to_string())
}

fn rows(data: &RankWindows) -> Vec<Row> {
    let n = data.ranks.len();
    let per = n.div_ceil(MAX_ROWS).max(1);
    (0..n)
        .step_by(per)
        .map(|a| {
            let b = (a + per).min(n);
            let sum = |v: &[Vec<u64>]| -> Vec<u64> {
                (0..COLUMNS)
                    .map(|w| v[a..b].iter().map(|r| r[w]).sum())
                    .collect()
            };
            let label = if b - a == 1 {
                rank_name(data.ranks[a])
            } else {
                format!(
                    "{}-{}",
                    rank_name(data.ranks[a]),
                    rank_name(data.ranks[b - 1])
                )
            };
            Row {
                label,
                read: sum(&data.read),
                write: sum(&data.write),
            }
        })
        .collect()
}

/// A perceptually ordered ramp (dark purple to yellow, after viridis) at `t` in [0, 1].
pub fn ramp(t: f64) -> RGBColor {
    const STOPS: [(u8, u8, u8); 5] = [
        (68, 1, 84),
        (59, 82, 139),
        (33, 145, 140),
        (94, 201, 98),
        (253, 231, 37),
    ];
    let t = t.clamp(0.0, 1.0) * (STOPS.len() - 1) as f64;
    let i = (t.floor() as usize).min(STOPS.len() - 2);
    let f = t - i as f64;
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * f).round() as u8;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// The heatmap of a trace's ranks over time.
pub struct HeatmapFigure<'a> {
    pub title: String,
    pub data: &'a RankWindows,
}

impl Figure for HeatmapFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (WIDTH, HEIGHT)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let (main, side) = legend::frame(root, WIDTH, &self.title)?;
        let rows = rows(self.data);
        let scale = Scale::of(&rows);
        let secs = self.data.window_ns as f64 / 1e9;
        let mut top = None;
        for (area, (caption, pick)) in main.split_evenly((2, 1)).iter().zip([
            (
                "bytes read per rank",
                (|r: &Row| &r.read) as fn(&Row) -> &Vec<u64>,
            ),
            ("bytes written per rank", |r: &Row| &r.write),
        ]) {
            let panel = Panel {
                caption,
                pick,
                rows: &rows,
                scale: &scale,
                secs,
            };
            let panel_top = panel.draw(root, area)?;
            top.get_or_insert(panel_top);
        }
        scale.draw(&side, top, secs)
    }
}

/// How bytes map to colours: a log scale from the fewest bytes of a cell
/// that has any to the most.
struct Scale {
    min: u64,
    max: u64,
}

impl Scale {
    fn of(rows: &[Row]) -> Scale {
        let cells = || {
            rows.iter()
                .flat_map(|r| r.read.iter().chain(&r.write))
                .copied()
        };
        Scale {
            max: cells().max().unwrap_or(0).max(1),
            min: cells().filter(|&b| b > 0).min().unwrap_or(1),
        }
    }

    fn color(&self, b: u64) -> RGBColor {
        let (lo, hi) = ((self.min as f64).log10(), (self.max as f64).log10());
        ramp(if hi > lo {
            ((b as f64).log10() - lo) / (hi - lo)
        } else {
            1.0
        })
    }

    /// The colour scale in the legend strip, its top level with the
    /// panels' (at pixel row `top`).
    fn draw<DB: DrawingBackend>(
        &self,
        side: &DrawingArea<DB, Shift>,
        top: Option<i32>,
        secs: f64,
    ) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let (_, side_top) = side.get_base_pixel();
        let y0 = top.unwrap_or(side_top) - side_top;
        let font = FontDesc::new(FontFamily::Name(FONT), 12.0, FontStyle::Normal)
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        side.draw(&Text::new(
            format!("bytes per {:.0} ms", secs * 1e3),
            (10, y0),
            font.clone(),
        ))?;
        let steps = 40;
        for k in 0..steps {
            let t = 1.0 - k as f64 / (steps - 1) as f64;
            let y = y0 + 16 + k * 6;
            side.draw(&Rectangle::new([(10, y), (32, y + 6)], ramp(t).filled()))?;
        }
        let fmt = |b: u64| iorepro_format::units::fmt_bytes(b as f64);
        side.draw(&Text::new(fmt(self.max), (40, y0 + 19), font.clone()))?;
        side.draw(&Text::new(
            fmt(self.min),
            (40, y0 + 16 + steps * 6 - 3),
            font,
        ))?;
        Ok(())
    }
}

/// One panel: the bytes `pick` takes of each row, ranks down, time across.
struct Panel<'a> {
    caption: &'a str,
    pick: fn(&Row) -> &Vec<u64>,
    rows: &'a [Row],
    scale: &'a Scale,
    /// Seconds a window spans.
    secs: f64,
}

impl Panel<'_> {
    /// Draws the panel in `area` (rank names on `root`); returns the pixel
    /// row of its top.
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<i32, Box<dyn std::error::Error>>
    where
        DB::ErrorType: 'static,
    {
        let n = self.rows.len();
        let span = self.secs * COLUMNS as f64;
        let mut chart = ChartBuilder::on(area)
            .caption(self.caption, (FONT, 15))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..span, 0f64..n as f64)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("time since first event (s)")
            .y_desc("rank")
            .y_labels(0)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()?;
        // Rank names at their rows' middles (the first rank on top),
        // every k-th when there are many.
        let rank_font = FontDesc::new(FontFamily::Name(FONT), 11.0, FontStyle::Normal)
            .color(&BLACK)
            .pos(Pos::new(HPos::Right, VPos::Center));
        let every = n.div_ceil(16).max(1);
        for (i, row) in self.rows.iter().enumerate().step_by(every) {
            let (x, y) = chart.backend_coord(&(0.0, (n - 1 - i) as f64 + 0.5));
            root.draw(&Text::new(row.label.clone(), (x - 6, y), rank_font.clone()))?;
        }
        let (secs, pick, scale) = (self.secs, self.pick, self.scale);
        chart.draw_series(self.rows.iter().enumerate().flat_map(|(i, row)| {
            let y = (n - 1 - i) as f64;
            pick(row)
                .iter()
                .enumerate()
                .filter(|(_, &b)| b > 0)
                .map(move |(w, &b)| {
                    Rectangle::new(
                        [(w as f64 * secs, y), ((w + 1) as f64 * secs, y + 1.0)],
                        scale.color(b).filled(),
                    )
                })
                .collect::<Vec<_>>()
        }))?;
        Ok(chart.backend_coord(&(0.0, n as f64)).1)
    }
}
