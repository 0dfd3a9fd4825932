//! The `iorepro-trace` command line: raw arguments parsed by clap, each
//! subcommand a small function over the library: [`inspect`] (summary,
//! files, phases, compare, validate), [`figures`] (plots), [`report`] (one
//! offline HTML page of them all), [`convert`] (filter, export, import,
//! merge, synth) and [`anonymize`].

mod anonymize;
mod convert;
mod figures;
mod inspect;
mod report;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

use iorepro_format::error::TraceError;

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
        #[command(flatten)]
        select: convert::FilterArgs,
        #[arg(long, default_value_t = 1 << 20)]
        segment_events: usize,
        #[arg(long)]
        json: bool,
    },
    /// A trace safe to hand to another team: every path component, host and
    /// thread name a keyed hash (HMAC-SHA256), the command line dropped;
    /// structure, extensions, shard numbers, roles and figures kept.
    Anonymize {
        trace: PathBuf,
        /// The directory to create (must not exist).
        #[arg(short, long)]
        out: PathBuf,
        /// The secret key (at least 16 bytes, e.g. `head -c 32 /dev/urandom > F`):
        /// the same key gives the same hashes; never stored in the trace.
        #[arg(long, value_name = "F")]
        key_file: PathBuf,
        /// Keep the file name of the command's program (`python3`, `torchrun`);
        /// the rest of the command line is dropped all the same.
        #[arg(long)]
        keep_program_name: bool,
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
    /// One HTML page of a trace that opens offline: headline figures, the
    /// timeline and per-rank heatmap, phases, files by role and mount, op mix.
    Report {
        trace: PathBuf,
        /// The page to write (its directory must exist).
        #[arg(short, long)]
        out: PathBuf,
    },
    /// Two traces (or a trace and a replay's --record-ops trace): relative errors (B - A) / A.
    Compare {
        a: PathBuf,
        b: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// fio iologs (v3), one per rank, replayable with `fio --read_iolog` (or
    /// `fio job.fio` in DIR); trace-event JSON for ui.perfetto.dev; or a
    /// DLIO workload (DIR/workload/NAME.yaml) with a note of how each
    /// setting was told.
    #[command(group(clap::ArgGroup::new("format").required(true).args(["fio_iolog", "perfetto", "dlio"])))]
    Export {
        trace: PathBuf,
        #[arg(long = "fio-iolog", value_name = "DIR")]
        fio_iolog: Option<PathBuf>,
        /// DLIO's workload YAML for `dlio_benchmark --config-dir DIR workload=NAME`.
        #[arg(long, value_name = "DIR")]
        dlio: Option<PathBuf>,
        /// DLIO: the workload's name (default: the trace directory's name).
        #[arg(long)]
        name: Option<String>,
        /// DLIO: the processes to run at (default: the traced ranks).
        #[arg(long)]
        ranks: Option<u64>,
        /// DLIO: its own time per step on the machine that runs it, in
        /// seconds (a run's `proc` less `compute` in RANK_output.json),
        /// taken from the traced step time to give `computation_time`.
        #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
        step_overhead: f64,
        /// One complete event per call, a track per rank and thread (Chrome/Perfetto JSON).
        #[arg(long, value_name = "OUT.json")]
        perfetto: Option<PathBuf>,
        /// fio: do the I/O under this directory instead of at the trace's own paths.
        #[arg(long)]
        target: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// A trace from fio iologs (v2/v3), `strace -f -ttt -T -y` output, or
    /// DFTracer's traces (.pfw, .pfw.gz).
    #[command(group(clap::ArgGroup::new("input").required(true).args(["fio_iolog", "strace", "dftracer"])))]
    Import {
        /// An iolog file, or a directory of them (one per rank).
        #[arg(long = "fio-iolog", value_name = "PATH")]
        fio_iolog: Option<PathBuf>,
        /// strace output: one file (strace -f -o FILE), or a directory of strace -ff files.
        #[arg(long, value_name = "PATH")]
        strace: Option<PathBuf>,
        /// DFTracer's trace: one .pfw or .pfw.gz file, or a directory of them
        /// (one per rank, as DLIO writes them; traced with DFTRACER_INC_METADATA=1).
        #[arg(long, value_name = "PATH")]
        dftracer: Option<PathBuf>,
        #[arg(short, long)]
        out: PathBuf,
        /// Host name recorded in the rows (DFTracer: where its events name none).
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
    let out = &mut std::io::stdout().lock();
    match cli.cmd {
        Cmd::Summary { trace, json } => inspect::summary(out, &trace, json),
        Cmd::Files { trace, json } => inspect::files(out, &trace, json),
        Cmd::Phases { trace, json } => inspect::phases(out, &trace, json),
        Cmd::Compare { a, b, json } => inspect::compare(out, &a, &b, json),
        Cmd::Validate {
            trace,
            json,
            repair,
        } if repair => inspect::repair(out, &trace, json),
        Cmd::Validate { trace, json, .. } => inspect::validate(out, &trace, json),
        Cmd::Plot {
            trace,
            out: file,
            heatmap,
            ..
        } if heatmap => figures::heatmap(out, &trace, &file),
        Cmd::Plot {
            trace,
            out: file,
            against,
            ..
        } => figures::timeline(out, &trace, &file, against.as_deref()),
        Cmd::Report { trace, out: file } => report::report(out, &trace, &file),
        Cmd::Filter {
            trace,
            out: dir,
            select,
            segment_events,
            json,
        } => convert::filter(out, &trace, &dir, select, segment_events, json),
        Cmd::Anonymize {
            trace,
            out: dir,
            key_file,
            keep_program_name,
            json,
        } => anonymize::anonymize(out, &trace, &dir, &key_file, keep_program_name, json),
        Cmd::Export {
            trace,
            perfetto: Some(file),
            json,
            ..
        } => convert::export_perfetto(out, &trace, &file, json),
        Cmd::Export {
            trace,
            dlio: Some(dir),
            name,
            ranks,
            step_overhead,
            json,
            ..
        } => convert::export_dlio(out, &trace, &dir, name, ranks, step_overhead, json),
        Cmd::Export {
            trace,
            fio_iolog,
            target,
            json,
            ..
        } => {
            let dir = fio_iolog.expect("clap requires one output");
            convert::export_fio(out, &trace, &dir, target.as_deref(), json)
        }
        Cmd::Import {
            fio_iolog: Some(log),
            out: dir,
            host,
            start_unix_ns,
            segment_events,
            ..
        } => convert::import_fio(out, &log, &dir, host, start_unix_ns, segment_events),
        Cmd::Import {
            dftracer: Some(input),
            out: dir,
            host,
            segment_events,
            ..
        } => convert::import_dftracer(out, &input, &dir, host, segment_events),
        Cmd::Import {
            strace,
            out: dir,
            host,
            rank,
            date,
            segment_events,
            ..
        } => {
            let input = strace.expect("clap requires one input");
            let opts = convert::StraceArgs {
                host,
                rank,
                date,
                segment_events,
            };
            convert::import_strace(out, &input, &dir, opts)
        }
        Cmd::Merge {
            traces,
            out: dir,
            segment_events,
        } => convert::merge(out, &traces, &dir, segment_events),
        Cmd::Synth {
            workload,
            out: dir,
            segment_events,
            row_group_events,
        } => convert::synth(out, &workload, &dir, segment_events, row_group_events),
    }
}
