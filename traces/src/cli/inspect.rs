//! Subcommands that read a trace and say what is in it: `summary`, `files`,
//! `phases`, `compare` and `validate` (with `--repair`).

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use anyhow::Result;

use iorepro_analysis::overview::{rank_count, Overview};
use iorepro_analysis::phases;
use iorepro_analysis::requests_by_object::RequestTotals;
use iorepro_analysis::roles::{self, FileRoles};
use iorepro_analysis::served;
use iorepro_analysis::summary::{Summary, TOP_FILES};
use iorepro_format::error::TraceError;
use iorepro_format::reader::TraceReader;
use iorepro_format::validate;

/// Prints `value` as pretty JSON.
pub(super) fn json_line(out: &mut dyn Write, value: &impl serde::Serialize) -> Result<()> {
    writeln!(out, "{}", serde_json::to_string_pretty(value)?)?;
    Ok(())
}

pub(super) fn summary(out: &mut dyn Write, trace: &Path, json: bool) -> Result<()> {
    let reader = TraceReader::open(trace)?;
    let s = Summary::compute(&reader)?;
    if json {
        return json_line(out, &s);
    }
    write!(out, "{}", s.render())?;
    Ok(())
}

pub(super) fn files(out: &mut dyn Write, trace: &Path, json: bool) -> Result<()> {
    let reader = TraceReader::open(trace)?;
    let roles = FileRoles::compute(&reader)?;
    // A bucket's objects, each with its role, as files have theirs.
    let objects = RequestTotals::compute_listing(&reader, usize::MAX)?;
    // What the storage served of each file read, where the trace says.
    let served = served::per_file(&reader)?;
    if json {
        let stored: HashMap<&str, Option<u64>> = served
            .iter()
            .flatten()
            .map(|f| (f.path.as_str(), f.storage_read_bytes))
            .collect();
        let files: Vec<serde_json::Value> = roles
            .files()
            .map(|f| {
                let mut v = serde_json::to_value(f).expect("a file's role serializes");
                if let Some(b) = stored.get(f.path.as_str()).copied().flatten() {
                    v["storage_read_bytes"] = b.into();
                }
                v
            })
            .collect();
        return json_line(
            out,
            &serde_json::json!({
                "roles": roles.totals(),
                "mounts": roles.per_mount(),
                "files": files,
                "object_roles": objects.as_ref().map(|o| &o.roles),
                "objects": objects.as_ref().map(|o| &o.top_objects),
            }),
        );
    }
    write!(out, "{}", roles::render(&roles))?;
    if let Some(files) = served {
        write!(out, "\n{}", served::render_files(&files, TOP_FILES))?;
    }
    if let Some(o) = objects {
        write!(
            out,
            "\n{} objects in {} requests:\n{}",
            o.objects,
            o.requests,
            o.render_objects()
        )?;
    }
    Ok(())
}

pub(super) fn phases(out: &mut dyn Write, trace: &Path, json: bool) -> Result<()> {
    let reader = TraceReader::open(trace)?;
    let s = Overview::compute_with_startup(&reader)?;
    if json {
        return json_line(
            out,
            &serde_json::json!({ "duration_s": s.duration_s, "phases": s.phases }),
        );
    }
    write!(out, "{}", phases::render(&s.phases))?;
    Ok(())
}

pub(super) fn compare(out: &mut dyn Write, a: &Path, b: &Path, json: bool) -> Result<()> {
    let (ra, rb) = (TraceReader::open(a)?, TraceReader::open(b)?);
    let (sa, sb) = (Overview::compute(&ra)?, Overview::compute(&rb)?);
    let ranks = (rank_count(&ra)?, rank_count(&rb)?);
    let c = iorepro_analysis::compare::compare(
        &a.display().to_string(),
        &sa,
        &b.display().to_string(),
        &sb,
        ranks,
    );
    if json {
        return json_line(out, &c);
    }
    write!(out, "{}", c.render())?;
    Ok(())
}

pub(super) fn repair(out: &mut dyn Write, trace: &Path, json: bool) -> Result<()> {
    let repairs = validate::repair_all(trace)?;
    if json {
        return match repairs.as_slice() {
            [one] => json_line(out, one),
            many => json_line(out, &many),
        };
    }
    for r in &repairs {
        write!(out, "{}", r.render())?;
    }
    Ok(())
}

pub(super) fn validate(out: &mut dyn Write, trace: &Path, json: bool) -> Result<()> {
    let v = validate::validate(trace).map_err(|e| repair_hint(e, trace))?;
    if json {
        return json_line(out, &v);
    }
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
    Ok(())
}

/// A damaged trace directory (lost or broken manifest, a segment that cannot be
/// read, counts that disagree) can be rebuilt from what is still readable: say
/// so on the same line. A newer schema is not damage.
fn repair_hint(e: TraceError, trace: &Path) -> anyhow::Error {
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
