//! `--report FILE.html`: the replay as one page that opens offline and can
//! be sent: the verdict's figures at the top and its block in full, the
//! capture over the replay at N on one time axis, who did I/O when at N,
//! the epochs, saves and phases, and the trace's files by role and mount.
//! Every figure is the report's own, as the table and `--json` give it.

use std::path::Path;

use iorepro_analysis::roles::FileRoles;
use iorepro_format::error::TraceError;
use iorepro_format::reader::TraceReader;
use iorepro_format::units::fmt_bytes;
use iorepro_plot::{self as plot, Page};

use super::summary::Report;
use super::verdict::Verdict;
use crate::error::ReplayResult;

/// Writes the page of `report` (a replay of `trace`, whose calls were
/// recorded in `ops` where they were) into `out`.
pub fn write(out: &Path, report: &Report, trace: &Path, ops: Option<&Path>) -> ReplayResult<()> {
    let capture = TraceReader::open(trace)?;
    let replayed = ops.map(TraceReader::open).transpose()?;
    let mut page = Page::new(format!("Replay at {} ranks", report.ranks));
    if let Some(v) = &report.verdict {
        page.headline(&headline(report, v));
        page.section("Verdict").pre(&v.render());
    }
    timeline(&mut page, &capture, replayed.as_ref(), report.ranks)?;
    let heat_of = replayed.as_ref().unwrap_or(&capture);
    let heat_title = match replayed {
        Some(_) => format!(
            "the replay at {} ranks: I/O per rank over time",
            report.ranks
        ),
        None => "the capture: I/O per rank over time".into(),
    };
    page.section("Ranks").figure(
        plot::heatmap_svg(heat_of, &heat_title)?,
        "Bytes read and written per rank and time window (ranks down, time across).",
    );
    epochs(&mut page, report);
    saves(&mut page, report);
    phases(&mut page, report);
    let roles = FileRoles::compute(&capture)?;
    plot::tables::files_by_role_and_mount(&mut page, "The trace's files by role and mount", &roles);
    page.note(&format!(
        "iorepro-replay {} of {}; timing {}, engine {}",
        env!("CARGO_PKG_VERSION"),
        trace.display(),
        report.timing,
        report.engine
    ));
    std::fs::write(out, page.render()).map_err(|e| TraceError::io(out, e))?;
    Ok(())
}

/// The verdict's figures a reader looks for first.
fn headline(report: &Report, v: &Verdict) -> Vec<(&'static str, String)> {
    let aus: Vec<f64> = v.epochs.iter().filter_map(|e| e.au_percent).collect();
    let passed = v.epochs.iter().filter(|e| e.pass == Some(true)).count();
    let gib_s = |g: Option<f64>| g.map_or_else(|| "-".into(), |g| format!("{g:.3} GiB/s"));
    vec![
        ("ranks", format!("{} on {} node(s)", v.ranks, v.nodes)),
        ("replay", format!("{:.3} s", report.duration_s)),
        (
            "lowest epoch AU",
            aus.iter()
                .copied()
                .reduce(f64::min)
                .map_or_else(|| "-".into(), |a| format!("{a:.1} %")),
        ),
        (
            "epochs at the bar",
            format!("{passed} of {}", v.epochs.len()),
        ),
        (
            "saves made",
            format!("{} of {}", v.saves_made, v.saves_traced),
        ),
        (
            "longest save",
            v.saves
                .iter()
                .map(|s| s.duration_s)
                .reduce(f64::max)
                .map_or_else(|| "-".into(), |s| format!("{s:.2} s")),
        ),
        ("reads needed", gib_s(v.read_gib_s_for_au)),
        ("writes needed", gib_s(v.write_gib_s_for_saves)),
    ]
}

/// The capture over the replay at N on one time axis (the capture alone
/// where the replay's calls were not recorded).
fn timeline(
    page: &mut Page,
    capture: &TraceReader,
    replayed: Option<&TraceReader>,
    ranks: u32,
) -> ReplayResult<()> {
    let traced = plot::overview_for_plot(capture)?;
    let at_n = replayed.map(plot::overview_for_plot).transpose()?;
    let mut panels = vec![plot::Panel {
        name: "the capture".into(),
        overview: &traced,
    }];
    if let Some(r) = &at_n {
        panels.push(plot::Panel {
            name: format!("the replay at {ranks} ranks"),
            overview: r,
        });
    }
    let svg = plot::timeline_svg("read and write bandwidth over time", panels)?;
    page.section("Timeline").figure(
        svg,
        "Read and write GiB/s over time, the phases shaded: the load bursts and checkpoint spikes \
         as traced and as replayed.",
    );
    Ok(())
}

/// Bytes the kernel counted, or `-` where it did not.
fn known_bytes(b: Option<u64>) -> String {
    b.map_or_else(|| "-".into(), |b| fmt_bytes(b as f64))
}

fn pct(a: Option<f64>) -> String {
    a.map_or_else(|| "-".into(), |a| format!("{a:.1}"))
}

fn epochs(page: &mut Page, report: &Report) {
    let rows = report
        .training
        .epochs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            vec![
                (i + 1).to_string(),
                format!("{}-{}", e.phases.0, e.phases.1),
                format!("{:.3}", e.duration_s),
                format!("{:.3}", e.stall_s),
                pct(e.au_percent),
                pct(e.au_whole_epoch_percent),
                format!("{:.1}", e.samples_per_s),
                format!("{:.1}", e.read_mib_s),
                known_bytes(e.storage_read_bytes),
                pct(e.cache_served_percent),
            ]
        })
        .collect();
    page.section("Epochs").table(
        &[
            "epoch",
            "phases",
            "time s",
            "stall s",
            "AU %",
            "whole %",
            "samples/s",
            "MiB/s",
            "from storage",
            "cache %",
        ],
        rows,
    );
    page.note(
        "AU % as MLPerf Storage computes it: per rank, the compute of steps 2..n over the \
         epoch's time less the first step's, averaged over the ranks; whole %: the whole epoch's \
         compute over its time. From storage: the bytes the storage served, as the kernel \
         counts them per thread (read-ahead included); cache %: the share of the bytes read \
         that memory served instead.",
    );
}

fn saves(page: &mut Page, report: &Report) {
    let rows = report
        .training
        .checkpoints
        .iter()
        .enumerate()
        .map(|(i, c)| {
            vec![
                (i + 1).to_string(),
                c.phase.to_string(),
                fmt_bytes(c.write_bytes as f64),
                format!("{:.3}", c.duration_s),
                format!("{:.3}", c.gib_s),
                if c.met { "every rank" } else { "its writers" }.into(),
                known_bytes(c.storage_write_bytes),
            ]
        })
        .collect();
    page.section("Saves").table(
        &[
            "save",
            "phase",
            "written",
            "time s",
            "GiB/s",
            "held",
            "to storage",
        ],
        rows,
    );
}

fn phases(page: &mut Page, report: &Report) {
    let rows = report
        .phases
        .iter()
        .enumerate()
        .map(|(i, p)| {
            vec![
                i.to_string(),
                p.kind.as_str().into(),
                if p.replayed {
                    format!("{:.3}", p.duration_s)
                } else {
                    "not replayed".into()
                },
                format!("{:.3}", p.trace_duration_s),
                fmt_bytes(p.read_bytes as f64),
                fmt_bytes(p.write_bytes as f64),
            ]
        })
        .collect();
    page.section("Phases: the replay against the trace").table(
        &["#", "phase", "replay s", "trace s", "read", "written"],
        rows,
    );
}
