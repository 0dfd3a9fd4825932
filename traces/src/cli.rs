//! The `iorepro-trace` command line: raw arguments parsed by clap, each
//! subcommand a small function over the library.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::analysis::overview::Overview;
use crate::analysis::summary::Summary;
use crate::error::TraceError;
use crate::format::reader::TraceReader;
use crate::format::writer::WriterOptions;
use crate::plot::{self, Format};
use crate::synth::Workload;
use crate::Source;

#[derive(Debug, Parser)]
#[command(
    name = "iorepro-trace",
    version,
    about = "Inspect, analyze, convert and synthesize iorepro traces"
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Totals, op mix, peaks and phases of a trace.
    Summary {
        trace: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Every file the trace names: its role in the job, calls and bytes.
    Files {
        trace: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// A trace cut by file role, path prefix, rank and time window, to share or archive.
    Filter {
        trace: PathBuf,
        #[arg(short, long)]
        out: PathBuf,
        /// Keep the files of these roles (repeatable, or a comma list):
        /// dataset, checkpoint, code, scratch, system, other.
        #[arg(long = "role", value_delimiter = ',', value_name = "ROLE")]
        roles: Vec<String>,
        /// Keep the paths at or beneath PREFIX whatever their role (repeatable).
        #[arg(long, value_name = "PREFIX")]
        include: Vec<String>,
        /// Drop the paths at or beneath PREFIX (repeatable).
        #[arg(long, value_name = "PREFIX")]
        exclude: Vec<String>,
        /// Keep the rows of this rank (repeatable, or a comma list).
        #[arg(long = "rank", value_delimiter = ',', value_name = "N")]
        ranks: Vec<i32>,
        /// Keep rows from this long after the trace's start (50ms, 2s, 1.5m).
        #[arg(long, value_name = "DUR")]
        from: Option<String>,
        /// Keep rows until this long after the trace's start.
        #[arg(long, value_name = "DUR")]
        to: Option<String>,
        #[arg(long, default_value_t = 1 << 20)]
        segment_events: usize,
        #[arg(long)]
        json: bool,
    },
    /// Check that a trace is complete and consistent.
    Validate {
        trace: PathBuf,
        #[arg(long)]
        json: bool,
        /// Rebuild the manifest from the segments that are complete and readable;
        /// unreadable and unfinished segments are renamed to *.corrupt, never deleted.
        #[arg(long)]
        repair: bool,
    },
    /// Load bursts, steady reading, checkpoint spikes and idle time, found from the data.
    Phases {
        trace: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Read vs write GiB/s over time with the phases shaded (.svg or .png).
    Plot {
        trace: PathBuf,
        /// The figure: .svg or .png.
        #[arg(short, long)]
        out: PathBuf,
        /// Ranks down, time across, bytes read and written per window (as DXT Explorer).
        #[arg(long)]
        heatmap: bool,
        /// A second trace (a replay's --record-ops log) drawn under this one on one time axis.
        #[arg(long, value_name = "REPLAY_OPS", conflicts_with = "heatmap")]
        against: Option<PathBuf>,
    },
    /// Two traces (or a trace and a replay's --record-ops trace): relative errors (B - A) / A.
    Compare {
        a: PathBuf,
        b: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// fio iologs (v3), one per rank, replayable with `fio --read_iolog` (or
    /// `fio job.fio` in DIR); or trace-event JSON for ui.perfetto.dev.
    #[command(group(clap::ArgGroup::new("format").required(true).args(["fio_iolog", "perfetto"])))]
    Export {
        trace: PathBuf,
        #[arg(long = "fio-iolog", value_name = "DIR")]
        fio_iolog: Option<PathBuf>,
        /// One complete event per call, a track per rank and thread (Chrome/Perfetto JSON).
        #[arg(long, value_name = "OUT.json")]
        perfetto: Option<PathBuf>,
        /// fio: do the I/O under this directory instead of at the trace's own paths.
        #[arg(long)]
        target: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// A trace from fio iologs (v2/v3) or from `strace -f -ttt -T -y` output.
    #[command(group(clap::ArgGroup::new("input").required(true).args(["fio_iolog", "strace"])))]
    Import {
        /// An iolog file, or a directory of them (one per rank).
        #[arg(long = "fio-iolog", value_name = "PATH")]
        fio_iolog: Option<PathBuf>,
        /// strace output: one file (strace -f -o FILE), or a directory of strace -ff files.
        #[arg(long, value_name = "PATH")]
        strace: Option<PathBuf>,
        #[arg(short, long)]
        out: PathBuf,
        /// Host name recorded in the rows.
        #[arg(long, default_value = "imported")]
        host: String,
        /// strace: rank recorded in every row (strace does not know ranks).
        #[arg(long)]
        rank: Option<i32>,
        /// strace -tt: the capture's date (UTC), YYYY-MM-DD; default: the file's modification date.
        #[arg(long)]
        date: Option<String>,
        /// fio iolog: wall-clock time (Unix ns) of the log's time 0; default: the log's modification time.
        #[arg(long)]
        start_unix_ns: Option<i64>,
        #[arg(long, default_value_t = 1 << 20)]
        segment_events: usize,
    },
    /// Per-node captures into one trace, rows in wall-clock order.
    Merge {
        #[arg(required = true)]
        traces: Vec<PathBuf>,
        #[arg(short, long)]
        out: PathBuf,
        #[arg(long, default_value_t = 1 << 20)]
        segment_events: usize,
    },
    /// Make a synthetic trace from a workload description (TOML).
    Synth {
        workload: PathBuf,
        #[arg(short, long)]
        out: PathBuf,
        /// Rows per segment file.
        #[arg(long, default_value_t = 1 << 20)]
        segment_events: usize,
        /// Rows per Parquet row group (at most --segment-events).
        #[arg(long, default_value_t = 1 << 20)]
        row_group_events: usize,
    },
}

/// Bad input (a trace or workload that cannot be used) exits 2; anything else 1.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<TraceError>()) {
        2
    } else {
        1
    }
}

pub fn run(cli: Cli) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match cli.cmd {
        Cmd::Summary { trace, json } => {
            let reader = TraceReader::open(&trace)?;
            let s = Summary::compute(&reader)?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&s)?)?;
            } else {
                write!(out, "{}", s.render())?;
            }
        }
        Cmd::Files { trace, json } => {
            let reader = TraceReader::open(&trace)?;
            let roles = crate::analysis::roles::FileRoles::compute(&reader)?;
            if json {
                let files: Vec<_> = roles.files().collect();
                let v = serde_json::json!({
                    "roles": roles.totals(),
                    "mounts": roles.per_mount(),
                    "files": files,
                });
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                write!(out, "{}", crate::analysis::roles::render(&roles))?;
            }
        }
        Cmd::Filter {
            trace,
            out: dir,
            roles,
            include,
            exclude,
            ranks,
            from,
            to,
            segment_events,
            json,
        } => {
            let bad = |m: String| TraceError::invalid(&trace, m);
            let mut f = crate::filter::Filter {
                include,
                exclude,
                ranks,
                ..Default::default()
            };
            for name in &roles {
                let r = crate::Role::parse(name.trim()).ok_or_else(|| {
                    bad(format!(
                        "--role `{name}` is not a role (dataset, checkpoint, code, scratch, system, other)"
                    ))
                })?;
                if !f.roles.contains(&r) {
                    f.roles.push(r);
                }
            }
            let dur = |flag: &str, s: &Option<String>| -> Result<Option<u64>, TraceError> {
                s.as_deref()
                    .map(|s| {
                        crate::units::parse_duration_ns(s).map_err(|e| bad(format!("{flag} {e}")))
                    })
                    .transpose()
            };
            f.from_ns = dur("--from", &from)?;
            f.to_ns = dur("--to", &to)?;
            let r = crate::filter::filter(&trace, &dir, &f, segment_events)?;
            if json {
                let v =
                    serde_json::json!({ "events_in": r.events_in, "events": r.events, "out": dir });
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                writeln!(
                    out,
                    "{}: {} of {} events kept, {:.3} s",
                    dir.display(),
                    r.events,
                    r.events_in,
                    r.manifest.duration_s()
                )?;
            }
        }
        Cmd::Phases { trace, json } => {
            let reader = TraceReader::open(&trace)?;
            let mut s = Overview::compute(&reader)?;
            let first = crate::analysis::roles::FileRoles::compute(&reader)?.first_data_ns();
            s.phases = crate::analysis::phases::fold_startup(std::mem::take(&mut s.phases), first);
            if json {
                let v = serde_json::json!({ "duration_s": s.duration_s, "phases": s.phases });
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                write!(out, "{}", crate::analysis::phases::render(&s.phases))?;
            }
        }
        Cmd::Plot {
            trace,
            out: file,
            heatmap,
            against,
        } => {
            let reader = TraceReader::open(&trace)?;
            let name = |p: &std::path::Path| {
                p.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| p.display().to_string())
            };
            if heatmap {
                let title = format!("{}: I/O per rank over time", name(&trace));
                let cells = plot::heatmap(&reader, &title, &file)?;
                writeln!(
                    out,
                    "{}: {} ranks x {} windows of {:.3} s",
                    file.display(),
                    cells.ranks.len(),
                    plot::heatmap::COLUMNS,
                    cells.window_ns as f64 / 1e9
                )?;
                return Ok(());
            }
            Format::of(&file)?;
            let capture = plot::overview_for_plot(&reader)?;
            let replay = match &against {
                Some(b) => Some(plot::overview_for_plot(&TraceReader::open(b)?)?),
                None => None,
            };
            let mut panels = vec![plot::Panel {
                name: format!("{} (capture)", name(&trace)),
                overview: &capture,
            }];
            let title = match (&against, &replay) {
                (Some(b), Some(r)) => {
                    panels.push(plot::Panel {
                        name: format!("{} (replay)", name(b)),
                        overview: r,
                    });
                    format!("{} against its replay {}", name(&trace), name(b))
                }
                _ => {
                    panels[0].name.clear();
                    format!("{}: read vs write bandwidth", name(&trace))
                }
            };
            plot::timeline(&title, panels, &file)?;
            writeln!(
                out,
                "{}: {} phases over {:.3} s",
                file.display(),
                capture.phases.len(),
                capture.duration_s
            )?;
        }
        Cmd::Compare { a, b, json } => {
            let (ra, rb) = (TraceReader::open(&a)?, TraceReader::open(&b)?);
            let (sa, sb) = (Overview::compute(&ra)?, Overview::compute(&rb)?);
            let ranks = (
                crate::analysis::overview::rank_count(&ra)?,
                crate::analysis::overview::rank_count(&rb)?,
            );
            let c = crate::analysis::compare::compare(
                &a.display().to_string(),
                &sa,
                &b.display().to_string(),
                &sb,
                ranks,
            );
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&c)?)?;
            } else {
                write!(out, "{}", c.render())?;
            }
        }
        Cmd::Export {
            trace,
            perfetto: Some(file),
            json,
            ..
        } => {
            let r = crate::interchange::export_perfetto::export(&trace, &file)?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?;
            } else {
                writeln!(
                    out,
                    "{}: {} events on {} process and {} thread tracks; open it in ui.perfetto.dev",
                    file.display(),
                    r.events,
                    r.processes,
                    r.threads
                )?;
            }
        }
        Cmd::Export {
            trace,
            fio_iolog,
            target,
            json,
            ..
        } => {
            let fio_iolog = fio_iolog.expect("clap requires one output");
            let r = crate::interchange::export_fio::export(&trace, &fio_iolog, target.as_deref())?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?;
            } else {
                writeln!(
                    out,
                    "{}: {} iologs, {} I/Os, read {} B, write {} B ({} rows skipped); replay: cd {} && fio {}",
                    fio_iolog.display(),
                    r.logs.len(),
                    r.ios,
                    r.read_bytes,
                    r.write_bytes,
                    r.skipped,
                    fio_iolog.display(),
                    crate::interchange::export_fio::JOB_FILE
                )?;
            }
        }
        Cmd::Import {
            fio_iolog,
            strace,
            out: dir,
            host,
            rank,
            date,
            start_unix_ns,
            segment_events,
        } => {
            let m = if let Some(log) = fio_iolog {
                let start = match start_unix_ns {
                    Some(s) => s,
                    None => file_mtime_ns(&log)?,
                };
                let opts = crate::interchange::import_fio::ImportOptions {
                    host,
                    start_unix_ns: start,
                    segment_rows: segment_events,
                };
                crate::interchange::import_fio::import(&log, &dir, &opts)?
            } else {
                let input = strace.expect("clap requires one input");
                let date_days = match date {
                    None => None,
                    Some(d) => Some(
                        crate::interchange::import_strace::parse_date(&d).ok_or_else(|| {
                            TraceError::invalid(&input, format!("--date `{d}` is not YYYY-MM-DD"))
                        })?,
                    ),
                };
                let opts = crate::interchange::import_strace::StraceOptions {
                    host,
                    rank,
                    date_days,
                    segment_rows: segment_events,
                };
                crate::interchange::import_strace::import(&input, &dir, &opts)?
            };
            writeln!(
                out,
                "{}: {} events, {:.3} s",
                dir.display(),
                m.events,
                m.duration_s()
            )?;
        }
        Cmd::Merge {
            traces,
            out: dir,
            segment_events,
        } => {
            let m = crate::interchange::merge::merge(&traces, &dir, segment_events)?;
            writeln!(
                out,
                "{}: {} events from {} traces, hosts {}, {} dropped at capture",
                dir.display(),
                m.events,
                traces.len(),
                m.hosts.join(","),
                m.dropped_events
            )?;
        }
        Cmd::Validate {
            trace,
            json,
            repair: true,
        } => {
            let repairs = crate::validate::repair_all(&trace)?;
            if json {
                let v = match repairs.as_slice() {
                    [one] => serde_json::to_value(one)?,
                    many => serde_json::to_value(many)?,
                };
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                for r in &repairs {
                    write!(out, "{}", r.render())?;
                }
            }
        }
        Cmd::Validate {
            trace,
            json,
            repair: false,
        } => {
            let v = crate::validate::validate(&trace).map_err(|e| repair_hint(e, &trace))?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                writeln!(
                    out,
                    "{}: ok: {} events in {} segments, {} dropped at capture",
                    trace.display(),
                    v.events,
                    v.segments,
                    v.dropped_events
                )?;
                for w in &v.warnings {
                    writeln!(out, "warning: {w}")?;
                }
            }
        }
        Cmd::Synth {
            workload,
            out: dir,
            segment_events,
            row_group_events,
        } => {
            let w = Workload::load(&workload)?;
            let mut opts = WriterOptions::new(Source::Synth);
            opts.segment_rows = segment_events.max(1);
            opts.row_group_rows = row_group_events.max(1);
            opts.command = Some(std::env::args().collect());
            let m = w.write_trace(&dir, opts)?;
            writeln!(
                out,
                "{}: {} events in {} segments, {:.3} s",
                dir.display(),
                m.events,
                m.segments.len(),
                m.duration_s()
            )?;
        }
    }
    Ok(())
}

/// A damaged trace directory (lost or broken manifest, a segment that cannot be
/// read, counts that disagree) can be rebuilt from what is still readable: say
/// so on the same line. A newer schema is not damage.
fn repair_hint(e: TraceError, trace: &std::path::Path) -> anyhow::Error {
    let repairable = trace.is_dir() && !matches!(e, TraceError::NewerSchema { .. });
    let e = anyhow::Error::from(e);
    if repairable {
        e.context(format!(
            "{}: damaged trace (`iorepro-trace validate --repair {}` rebuilds the manifest from the readable segments)",
            trace.display(),
            trace.display()
        ))
    } else {
        e
    }
}

fn file_mtime_ns(path: &std::path::Path) -> Result<i64, TraceError> {
    let meta = std::fs::metadata(path).map_err(|e| TraceError::io(path, e))?;
    let t = meta.modified().map_err(|e| TraceError::io(path, e))?;
    Ok(t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64))
}
