//! The timeline figure: read and write GiB/s over time with the phases shaded
//! and labelled, as an SVG (text stays text, so it scales and can be searched).

use std::path::Path;

use plotters::prelude::*;

use crate::analysis::phases::{Phase, PhaseKind};
use crate::analysis::timeline::Timeline;
use crate::error::{TraceError, TraceResult};

/// Points per series: enough for a wide figure, few enough for a small file.
pub const PLOT_WINDOWS: usize = 2_000;
const SIZE: (u32, u32) = (1200, 500);
const GIB: f64 = (1u64 << 30) as f64;

fn shade(kind: PhaseKind) -> RGBColor {
    match kind {
        PhaseKind::Load => RGBColor(255, 170, 60),
        PhaseKind::Read => RGBColor(120, 170, 230),
        PhaseKind::Checkpoint => RGBColor(230, 80, 80),
        PhaseKind::Idle => RGBColor(170, 170, 170),
    }
}

const READ_COLOR: RGBColor = RGBColor(20, 80, 200);
const WRITE_COLOR: RGBColor = RGBColor(200, 30, 30);

/// Writes the figure to `out` (SVG). `title` names the trace.
pub fn plot_svg(timeline: &Timeline, phases: &[Phase], title: &str, out: &Path) -> TraceResult<()> {
    match out.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => {}
        _ => {
            return Err(TraceError::invalid(
                out,
                "output must be an .svg file (PNG is not supported by this build)",
            ))
        }
    }
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.is_dir() {
            return Err(TraceError::invalid(out, "output directory does not exist"));
        }
    }
    draw(timeline, phases, title, out)
        .map_err(|e| TraceError::invalid(out, format!("cannot draw plot: {e}")))
}

fn draw(
    timeline: &Timeline,
    phases: &[Phase],
    title: &str,
    out: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let tl = timeline.at_most(PLOT_WINDOWS);
    let secs = tl.window_s();
    let rate = |b: u64| b as f64 / GIB / secs;
    let duration = (tl.len() as f64 * secs).max(secs);
    let ymax = tl
        .read()
        .iter()
        .chain(tl.write().iter())
        .map(|&b| rate(b))
        .fold(0.0f64, f64::max)
        .max(1e-6)
        * 1.15;

    let root = SVGBackend::new(out, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{title}: read vs write bandwidth"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..duration, 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_desc("time since first event (s)")
        .y_desc(format!("GiB/s (per {:.0} ms window)", secs * 1e3))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;

    // Phase shading first, so the lines are drawn over it; one legend entry per kind.
    for kind in [
        PhaseKind::Load,
        PhaseKind::Read,
        PhaseKind::Checkpoint,
        PhaseKind::Idle,
    ] {
        let of_kind: Vec<&Phase> = phases.iter().filter(|p| p.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        let color = shade(kind);
        chart
            .draw_series(of_kind.iter().map(|p| {
                Rectangle::new(
                    [(p.start_s, 0.0), (p.end_s, ymax)],
                    color.mix(0.25).filled(),
                )
            }))?
            .label(format!("{} phase", kind.as_str()))
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 18, y + 5)], color.mix(0.4).filled())
            });
    }
    let mid = |i: usize| (i as f64 + 0.5) * secs;
    chart
        .draw_series(LineSeries::new(
            tl.read()
                .iter()
                .enumerate()
                .map(|(i, &b)| (mid(i), rate(b))),
            READ_COLOR.stroke_width(2),
        ))?
        .label("read GiB/s")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], READ_COLOR.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(
            tl.write()
                .iter()
                .enumerate()
                .map(|(i, &b)| (mid(i), rate(b))),
            WRITE_COLOR.stroke_width(2),
        ))?
        .label("write GiB/s")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], WRITE_COLOR.stroke_width(2)));
    // Labels for the phases that stand out (everything but steady reading),
    // wide enough on the figure not to collide with a neighbour.
    let min_width = duration / 60.0;
    chart.draw_series(
        phases
            .iter()
            .filter(|p| {
                p.kind != PhaseKind::Read
                    && (p.duration_s() >= min_width || p.kind == PhaseKind::Checkpoint)
            })
            .map(|p| {
                Text::new(
                    p.kind.as_str().to_string(),
                    (p.start_s, ymax * 0.98),
                    ("sans-serif", 12).into_font(),
                )
            }),
    )?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
