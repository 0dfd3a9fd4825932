//! `report`: one HTML page of a trace that opens offline and can be sent
//! (pydarshan's job summary is the model): the headline figures of
//! `summary`, the timeline with its phases and the per-rank heatmap of
//! `plot`, then the phases, the files by role and mount of `files`, and
//! the op mix. Every figure is the analysis's own, as those commands print it.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use iorepro_analysis::roles::FileRoles;
use iorepro_analysis::summary::Summary;
use iorepro_format::error::TraceError;
use iorepro_format::reader::TraceReader;
use iorepro_format::units::fmt_bytes;
use iorepro_plot::{self as plot, Page};

use super::figures::name;

pub(super) fn report(out: &mut dyn Write, trace: &Path, file: &Path) -> Result<()> {
    // Before the analysis, which takes a while on a big trace.
    if let Some(dir) = file.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return Err(TraceError::invalid(file, "output directory does not exist").into());
        }
    }
    let reader = TraceReader::open(trace)?;
    let s = Summary::compute(&reader)?;
    let roles = FileRoles::compute(&reader)?;
    let name = name(trace);

    let mut page = Page::new(format!("{name}: I/O of the job"));
    page.headline(&headline(&s));
    job(&mut page, &reader, &s);
    pictures(&mut page, &reader, &s, &name)?;
    phases(&mut page, &s);
    plot::tables::files_by_role_and_mount(&mut page, "Files by role and mount", &roles);
    op_mix(&mut page, &s);
    if let Some(requests) = &s.requests {
        page.section("Object storage").pre(&requests.render());
    }
    page.note(&format!(
        "iorepro-trace {} report of {}",
        env!("CARGO_PKG_VERSION"),
        trace.display()
    ));
    std::fs::write(file, page.render()).map_err(|e| TraceError::io(file, e))?;
    writeln!(
        out,
        "{}: {} events, {} phases over {:.3} s",
        file.display(),
        s.overview.events,
        s.overview.phases.len(),
        s.overview.duration_s
    )?;
    Ok(())
}

/// The figures at the top, as `summary` prints them.
fn headline(s: &Summary) -> Vec<(&'static str, String)> {
    let o = &s.overview;
    let ranks = match s.processes {
        None => s.ranks.len().to_string(),
        Some(n) => format!("none ({n} processes)"),
    };
    vec![
        ("events", o.events.to_string()),
        ("dropped events", s.dropped_events.to_string()),
        ("duration", format!("{:.3} s", o.duration_s)),
        ("ranks", ranks),
        ("read", fmt_bytes(o.read_bytes as f64)),
        ("written", fmt_bytes(o.write_bytes as f64)),
        ("peak read (1 s)", format!("{:.3} GiB/s", o.peak_read_gib_s)),
        (
            "peak write (1 s)",
            format!("{:.3} GiB/s", o.peak_write_gib_s),
        ),
    ]
}

/// What ran, where, and what the capture saw of it.
fn job(page: &mut Page, reader: &TraceReader, s: &Summary) {
    let m = reader.manifest();
    // The manifest's own spelling of where the trace came from.
    let source = serde_json::to_value(m.source)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut lines = vec![
        format!(
            "hosts {}  files {}  source {source}",
            s.hosts.join(", "),
            s.files,
        ),
        format!(
            "metadata calls {}  ({:.0}/s, peak {:.0}/s)  sequential: reads {:.1} %, writes {:.1} %",
            s.overview.metadata_calls,
            s.overview.metadata_calls_per_s,
            s.overview.peak_metadata_calls_per_s,
            s.access.read_sequential_share * 100.0,
            s.access.write_sequential_share * 100.0
        ),
    ];
    if let Some(command) = &m.command {
        lines.insert(0, format!("$ {}", command.join(" ")));
    }
    page.section("Job").pre(&lines.join("\n"));
}

/// The timeline, shaded with the phases of the table below it, and the
/// per-rank heatmap.
fn pictures(page: &mut Page, reader: &TraceReader, s: &Summary, name: &str) -> Result<()> {
    let mut plotted = plot::overview_for_plot(reader)?;
    plotted.phases = s.overview.phases.clone();
    let timeline = plot::timeline_svg(
        &format!("{name}: read vs write bandwidth"),
        vec![plot::Panel {
            name: String::new(),
            overview: &plotted,
        }],
    )?;
    let heatmap = plot::heatmap_svg(reader, &format!("{name}: I/O per rank over time"))?;
    page.section("Timeline")
        .figure(
            timeline,
            "Read and write GiB/s over time; the phases shaded.",
        )
        .section("Ranks")
        .figure(
            heatmap,
            "Bytes read and written per rank and time window (ranks down, time across).",
        );
    Ok(())
}

/// The phases, with the bytes the storage served their reads where the
/// trace says.
fn phases(page: &mut Page, s: &Summary) {
    let says = s.overview.storage_read_bytes.is_some();
    let rows = s
        .overview
        .phases
        .iter()
        .map(|p| {
            let mut row = vec![
                p.kind.as_str().to_string(),
                format!("{:.3}", p.start_s),
                format!("{:.3}", p.end_s),
                fmt_bytes(p.read_bytes as f64),
                fmt_bytes(p.write_bytes as f64),
                format!("{:.3}", p.gib_s()),
            ];
            if says {
                row.push(
                    p.storage_read_bytes
                        .map_or("-".into(), |b| fmt_bytes(b as f64)),
                );
            }
            row
        })
        .collect();
    let mut head = vec!["phase", "start s", "end s", "read", "written", "GiB/s"];
    if says {
        head.push("read from storage");
    }
    page.section("Phases").table(&head, rows);
}

fn op_mix(page: &mut Page, s: &Summary) {
    let rows = s
        .ops
        .iter()
        .map(|(op, st)| vec![op.clone(), st.count.to_string(), fmt_bytes(st.bytes as f64)])
        .collect();
    page.section("Op mix")
        .table(&["op", "calls", "bytes"], rows);
}
