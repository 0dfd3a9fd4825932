//! Subcommands that make a trace from another: `filter`, `export` (fio
//! iologs, Perfetto), `import` (fio iologs, strace), `merge` and `synth`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::inspect::json_line;
use iorepro_analysis::filter::Filter;
use iorepro_analysis::roles::Role;
use iorepro_format::error::TraceError;
use iorepro_format::units;
use iorepro_format::writer::WriterOptions;
use iorepro_format::Source;
use iorepro_interchange::synth::Workload;
use iorepro_interchange::{
    export_fio, export_perfetto, import_fio, import_strace, merge as joined,
};

/// `filter`'s selection as given on the command line.
#[derive(Debug, clap::Args)]
pub struct FilterArgs {
    /// Keep the files of these roles (repeatable, or a comma list):
    /// dataset, checkpoint, log, output, code, scratch, launcher, system,
    /// other, or all.
    // `--role` too, the name this flag had before it was spelled as
    // `iorepro-replay`'s.
    #[arg(
        long = "roles",
        alias = "role",
        value_delimiter = ',',
        value_name = "ROLE"
    )]
    pub roles: Vec<String>,
    /// Keep the paths at or beneath PREFIX whatever their role (repeatable).
    #[arg(long, value_name = "PREFIX")]
    pub include: Vec<String>,
    /// Drop the paths at or beneath PREFIX (repeatable).
    #[arg(long, value_name = "PREFIX")]
    pub exclude: Vec<String>,
    /// Keep the rows of this rank (repeatable, or a comma list).
    #[arg(long = "rank", value_delimiter = ',', value_name = "N")]
    pub ranks: Vec<i32>,
    /// Keep rows from this long after the trace's start (50ms, 2s, 1.5m).
    #[arg(long, value_name = "DUR")]
    pub from: Option<String>,
    /// Keep rows until this long after the trace's start.
    #[arg(long, value_name = "DUR")]
    pub to: Option<String>,
}

impl FilterArgs {
    /// The filter, or what is wrong with a role or a duration.
    fn into_filter(self, trace: &Path) -> Result<Filter, TraceError> {
        let bad = |m: String| TraceError::invalid(trace, m);
        let mut f = Filter {
            roles: Role::parse_list(&self.roles).map_err(|e| bad(format!("--roles {e}")))?,
            include: self.include,
            exclude: self.exclude,
            ranks: self.ranks,
            ..Default::default()
        };
        let dur = |flag: &str, s: &Option<String>| -> Result<Option<u64>, TraceError> {
            s.as_deref()
                .map(|s| units::parse_duration_ns(s).map_err(|e| bad(format!("{flag} {e}"))))
                .transpose()
        };
        f.from_ns = dur("--from", &self.from)?;
        f.to_ns = dur("--to", &self.to)?;
        Ok(f)
    }
}

pub(super) fn filter(
    out: &mut dyn Write,
    trace: &Path,
    dir: &Path,
    args: FilterArgs,
    segment_events: usize,
    json: bool,
) -> Result<()> {
    let f = args.into_filter(trace)?;
    let r = iorepro_analysis::filter::filter(trace, dir, &f, segment_events)?;
    if json {
        return json_line(
            out,
            &serde_json::json!({ "events_in": r.events_in, "events": r.events, "out": dir }),
        );
    }
    writeln!(
        out,
        "{}: {} of {} events kept, {:.3} s",
        dir.display(),
        r.events,
        r.events_in,
        r.manifest.duration_s()
    )?;
    Ok(())
}

pub(super) fn export_perfetto(
    out: &mut dyn Write,
    trace: &Path,
    file: &Path,
    json: bool,
) -> Result<()> {
    let r = export_perfetto::export(trace, file)?;
    if json {
        return json_line(out, &r);
    }
    writeln!(
        out,
        "{}: {} events on {} process and {} thread tracks; open it in ui.perfetto.dev",
        file.display(),
        r.events,
        r.processes,
        r.threads
    )?;
    Ok(())
}

/// DLIO's workload YAML and its note, in `dir`.
pub(super) fn export_dlio(
    out: &mut dyn Write,
    trace: &Path,
    dir: &Path,
    name: Option<String>,
    ranks: Option<u64>,
    step_overhead_s: f64,
    json: bool,
) -> Result<()> {
    use iorepro_analysis::dlio_workload::{self, render, Ask};
    if ranks == Some(0) {
        anyhow::bail!("--ranks must be at least 1");
    }
    if !(0.0..3600.0).contains(&step_overhead_s) {
        anyhow::bail!("--step-overhead is seconds a step, from 0 to 3600");
    }
    let name = name.unwrap_or_else(|| dlio_workload::name_from(trace));
    let reader = iorepro_format::TraceReader::open(trace)?;
    let ask = Ask {
        name: name.clone(),
        ranks,
        step_overhead_s,
    };
    let w = dlio_workload::infer(&reader, &ask)?;
    let yaml = dir.join("workload").join(format!("{name}.yaml"));
    let note = dir.join(format!("{name}.md"));
    std::fs::create_dir_all(dir.join("workload"))
        .with_context(|| format!("creating {}", dir.join("workload").display()))?;
    std::fs::write(&yaml, render::yaml(&w))
        .with_context(|| format!("writing {}", yaml.display()))?;
    std::fs::write(&note, render::note(&w))
        .with_context(|| format!("writing {}", note.display()))?;
    if json {
        return json_line(out, &w);
    }
    writeln!(
        out,
        "{}: DLIO workload `{name}` ({} settings; how each was told: {})
run: mpirun -np {} \
         dlio_benchmark --config-dir {} workload={name}",
        yaml.display(),
        w.fields.len(),
        note.display(),
        w.processes,
        dir.display()
    )?;
    Ok(())
}

pub(super) fn export_fio(
    out: &mut dyn Write,
    trace: &Path,
    dir: &Path,
    target: Option<&Path>,
    json: bool,
) -> Result<()> {
    let r = export_fio::export(trace, dir, target)?;
    if json {
        return json_line(out, &r);
    }
    writeln!(
        out,
        "{}: {} iologs, {} I/Os, read {} B, write {} B ({} rows skipped); replay: cd {} && fio {}",
        dir.display(),
        r.logs.len(),
        r.ios,
        r.read_bytes,
        r.write_bytes,
        r.skipped,
        dir.display(),
        export_fio::JOB_FILE
    )?;
    Ok(())
}

pub(super) fn import_fio(
    out: &mut dyn Write,
    log: &Path,
    dir: &Path,
    host: String,
    start_unix_ns: Option<i64>,
    segment_events: usize,
) -> Result<()> {
    let start = match start_unix_ns {
        Some(s) => s,
        None => file_mtime_ns(log)?,
    };
    let opts = import_fio::ImportOptions {
        host,
        start_unix_ns: start,
        segment_rows: segment_events,
    };
    let m = import_fio::import(log, dir, &opts)?;
    imported(out, dir, m.events, m.duration_s())
}

/// `import --strace`'s options as given on the command line.
pub(super) struct StraceArgs {
    pub host: String,
    pub rank: Option<i32>,
    pub date: Option<String>,
    pub segment_events: usize,
}

pub(super) fn import_strace(
    out: &mut dyn Write,
    input: &Path,
    dir: &Path,
    args: StraceArgs,
) -> Result<()> {
    let date_days = match args.date {
        None => None,
        Some(d) => Some(import_strace::parse_date(&d).ok_or_else(|| {
            TraceError::invalid(input, format!("--date `{d}` is not YYYY-MM-DD"))
        })?),
    };
    let opts = import_strace::StraceOptions {
        host: args.host,
        rank: args.rank,
        date_days,
        segment_rows: args.segment_events,
    };
    let m = import_strace::import(input, dir, &opts)?;
    imported(out, dir, m.events, m.duration_s())
}

pub(super) fn import_dftracer(
    out: &mut dyn Write,
    input: &Path,
    dir: &Path,
    host: String,
    segment_events: usize,
) -> Result<()> {
    use iorepro_interchange::import_dftracer::{import, DftracerOptions};
    let opts = DftracerOptions {
        host,
        segment_rows: segment_events,
    };
    let m = import(input, dir, &opts)?;
    imported(out, dir, m.events, m.duration_s())
}

fn imported(out: &mut dyn Write, dir: &Path, events: u64, duration_s: f64) -> Result<()> {
    writeln!(
        out,
        "{}: {} events, {:.3} s",
        dir.display(),
        events,
        duration_s
    )?;
    Ok(())
}

pub(super) fn merge(
    out: &mut dyn Write,
    traces: &[PathBuf],
    dir: &Path,
    segment_events: usize,
) -> Result<()> {
    let m = joined::merge(traces, dir, segment_events)?;
    writeln!(
        out,
        "{}: {} events from {} traces, hosts {}, {} dropped at capture",
        dir.display(),
        m.events,
        traces.len(),
        m.hosts.join(","),
        m.dropped_events
    )?;
    Ok(())
}

pub(super) fn synth(
    out: &mut dyn Write,
    workload: &Path,
    dir: &Path,
    segment_events: usize,
    row_group_events: usize,
) -> Result<()> {
    let w = Workload::load(workload)?;
    let mut opts = WriterOptions::new(Source::Synth);
    opts.segment_rows = segment_events.max(1);
    opts.row_group_rows = row_group_events.max(1);
    opts.command = Some(std::env::args().collect());
    let m = w.write_trace(dir, opts)?;
    writeln!(
        out,
        "{}: {} events in {} segments, {:.3} s",
        dir.display(),
        m.events,
        m.segments.len(),
        m.duration_s()
    )?;
    Ok(())
}

fn file_mtime_ns(path: &Path) -> Result<i64, TraceError> {
    let meta = std::fs::metadata(path).map_err(|e| TraceError::io(path, e))?;
    let t = meta.modified().map_err(|e| TraceError::io(path, e))?;
    Ok(t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64))
}
