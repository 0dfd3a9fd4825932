//! `plot`: the bandwidth timeline with its phases (alone, or a capture over
//! its replay), or the per-rank heatmap.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use iorepro_format::reader::TraceReader;
use iorepro_plot::{self as plot, Format};

/// A trace's name in a figure: its directory's last component.
pub(super) fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

pub(super) fn heatmap(out: &mut dyn Write, trace: &Path, file: &Path) -> Result<()> {
    let reader = TraceReader::open(trace)?;
    let title = format!("{}: I/O per rank over time", name(trace));
    let cells = plot::heatmap(&reader, &title, file)?;
    writeln!(
        out,
        "{}: {} ranks x {} windows of {:.3} s",
        file.display(),
        cells.ranks.len(),
        plot::heatmap::COLUMNS,
        cells.window_ns as f64 / 1e9
    )?;
    Ok(())
}

pub(super) fn timeline(
    out: &mut dyn Write,
    trace: &Path,
    file: &Path,
    against: Option<&Path>,
) -> Result<()> {
    let reader = TraceReader::open(trace)?;
    Format::of(file)?;
    let capture = plot::overview_for_plot(&reader)?;
    let replay = match against {
        Some(b) => Some(plot::overview_for_plot(&TraceReader::open(b)?)?),
        None => None,
    };
    let mut panels = vec![plot::Panel {
        name: format!("{} (capture)", name(trace)),
        overview: &capture,
    }];
    let title = match (against, &replay) {
        (Some(b), Some(r)) => {
            panels.push(plot::Panel {
                name: format!("{} (replay)", name(b)),
                overview: r,
            });
            format!("{} against its replay {}", name(trace), name(b))
        }
        _ => {
            panels[0].name.clear();
            format!("{}: read vs write bandwidth", name(trace))
        }
    };
    plot::timeline(&title, panels, file)?;
    writeln!(
        out,
        "{}: {} phases over {:.3} s",
        file.display(),
        capture.phases.len(),
        capture.duration_s
    )?;
    Ok(())
}
