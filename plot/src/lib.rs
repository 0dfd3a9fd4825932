//! Figures of a trace, drawn from what `iorepro-analysis` found in it, as SVG or PNG ([`canvas`]): the bandwidth
//! [`timeline`] with its phases (or a capture against its replay on one time
//! axis), the per-rank [`heatmap`], and a replay plan's [`sizing`] sweep
//! (AU against bandwidth, a line per rank count). Phase names are laid out by
//! [`labels`] so they never overlap, and the [`legend`] sits beside the data,
//! never on it. A [`page`] gathers figures (as inline SVG), headline figures
//! and tables into one self-contained HTML page that opens offline.
//!
//! Which room may import which (`cargo xtask imports --rooms` checks it):
//! each only rooms of the lines above its own, and no two files of the
//! crate import each other (`cargo xtask imports`).
//! - `canvas`, `labels`
//! - `legend`, `page`
//! - `heatmap`, `sizing`, `tables`, `timeline`

pub mod canvas;
pub mod heatmap;
pub mod labels;
pub mod legend;
pub mod page;
pub mod sizing;
pub mod tables;
pub mod timeline;

use std::path::Path;

use iorepro_analysis::overview::{span_ns, Overview};
use iorepro_format::error::TraceResult;
use iorepro_format::reader::TraceReader;

pub use canvas::{svg_string, Format};
pub use heatmap::{HeatmapFigure, RankWindows};
pub use page::Page;
pub use sizing::{SizingFigure, SizingLine};
pub use timeline::{Panel, TimelineFigure, PLOT_WINDOWS};

/// Window widths a plot may use, finest first; each divides 100 ms, so the
/// overview's peaks stay exact.
const PLOT_WINDOW_CHOICES_NS: [i64; 7] = [
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
];

/// The finest window that draws a trace of this span in at most
/// [`PLOT_WINDOWS`] points (longer traces are coarsened from 100 ms).
pub fn window_for(span_ns: i64) -> i64 {
    PLOT_WINDOW_CHOICES_NS
        .into_iter()
        .find(|w| span_ns / w < PLOT_WINDOWS as i64)
        .unwrap_or(100_000_000)
}

/// The overview of a trace at the resolution its plot wants.
pub fn overview_for_plot(reader: &TraceReader) -> TraceResult<Overview> {
    let (first, last) = span_ns(reader)?;
    Overview::compute_with_window(reader, window_for(last - first))
}

/// Draws the timeline of `overview` (and, with `against`, of a second trace
/// under it) into `out` (.svg or .png).
pub fn timeline(title: &str, panels: Vec<Panel>, out: &Path) -> TraceResult<()> {
    canvas::render(
        &TimelineFigure {
            title: title.to_string(),
            panels,
        },
        out,
    )
}

/// The same timeline as an SVG document in memory, for a [`Page`].
pub fn timeline_svg(title: &str, panels: Vec<Panel>) -> TraceResult<String> {
    canvas::svg_string(&TimelineFigure {
        title: title.to_string(),
        panels,
    })
}

/// Draws the per-rank heatmap of `reader`'s trace into `out` (.svg or .png).
pub fn heatmap(reader: &TraceReader, title: &str, out: &Path) -> TraceResult<RankWindows> {
    Format::of(out)?;
    let data = RankWindows::compute(reader)?;
    canvas::render(
        &HeatmapFigure {
            title: title.to_string(),
            data: &data,
        },
        out,
    )?;
    Ok(data)
}

/// The same heatmap as an SVG document in memory, for a [`Page`].
pub fn heatmap_svg(reader: &TraceReader, title: &str) -> TraceResult<String> {
    let data = RankWindows::compute(reader)?;
    canvas::svg_string(&HeatmapFigure {
        title: title.to_string(),
        data: &data,
    })
}

/// Draws a sizing sweep into `out` (.svg or .png).
pub fn sizing(figure: &SizingFigure, out: &Path) -> TraceResult<()> {
    canvas::render(figure, out)
}
