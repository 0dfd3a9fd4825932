//! Full check of a trace: [`validate`] decodes every segment, checks that
//! rows are in `ts` order within each segment and that the manifest agrees
//! with what the segments hold, and points out files a killed writer left
//! behind. Rebuilding a damaged trace is [`crate::repair`]'s (named here
//! too, as it always was).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::columns::Events;
use crate::error::{TraceError, TraceResult};
use crate::partitions::{partition_name, partitions};
use crate::reader::{ReadShape, SegmentBatches, TraceReader};

use crate::repair::{file_names, PARTIAL_SUFFIX, SEGMENT_SUFFIX};
pub use crate::repair::{repair, repair_all, Repair, SetAside};

#[derive(Debug, Serialize)]
pub struct Validation {
    pub segments: usize,
    pub events: u64,
    pub manifest_events: u64,
    pub dropped_events: u64,
    pub complete: bool,
    /// Problems that do not stop reading (a trace with these is still usable).
    pub warnings: Vec<String>,
}

pub fn validate(path: &Path) -> TraceResult<Validation> {
    if let Some(parts) = partitions(path)? {
        return validate_partitions(&parts);
    }
    let reader = TraceReader::open(path)?;
    let m = reader.manifest();
    let mut events = 0u64;
    let mut warnings = Vec::new();
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    for seg in reader.segments() {
        let mut prev = i64::MIN;
        let mut unordered = 0u64;
        for b in SegmentBatches::open(&seg.path, ReadShape::default())? {
            let ev = Events::new(b?);
            for &t in ev.ts().values().iter() {
                unordered += (t < prev) as u64;
                prev = t;
                first = first.min(t);
                last = last.max(t);
            }
            events += ev.len() as u64;
        }
        if unordered > 0 {
            warnings.push(format!(
                "{}: {unordered} rows are out of ts order",
                seg.path.display()
            ));
        }
    }
    if path.is_dir() {
        if events != m.events {
            return Err(TraceError::invalid(
                path,
                format!("manifest says {} events, segments hold {events}", m.events),
            ));
        }
        if events > 0 && (first != m.start_unix_ns || last != m.end_unix_ns) {
            warnings.push(format!(
                "manifest time range [{}, {}] differs from the rows' [{first}, {last}] (`validate --repair` rewrites it)",
                m.start_unix_ns, m.end_unix_ns
            ));
        }
        warnings.extend(loose_files(path, &m.segments)?);
        let stopped = m.extra.get("capture_stopped").and_then(|s| s.get("error"));
        match (m.complete, stopped.and_then(|e| e.as_str())) {
            (true, _) => {}
            (false, Some(why)) => warnings.push(format!(
                "trace is not complete: the capture stopped early ({why}); finished segments are intact"
            )),
            (false, None) => warnings.push("trace is not marked complete: its writer did not close it (killed?); finished segments are intact".into()),
        }
    }
    if m.dropped_events > 0 {
        warnings.push(format!(
            "{} events were dropped at capture",
            m.dropped_events
        ));
    }
    Ok(Validation {
        segments: reader.segments().len(),
        events,
        manifest_events: m.events,
        dropped_events: m.dropped_events,
        complete: m.complete,
        warnings,
    })
}

/// A partitioned trace is valid when each node's partition is; their counts
/// add up and their warnings say which partition they are about.
fn validate_partitions(parts: &[PathBuf]) -> TraceResult<Validation> {
    let mut all = Validation {
        segments: 0,
        events: 0,
        manifest_events: 0,
        dropped_events: 0,
        complete: true,
        warnings: Vec::new(),
    };
    for p in parts {
        let v = validate(p)?;
        all.segments += v.segments;
        all.events += v.events;
        all.manifest_events += v.manifest_events;
        all.dropped_events += v.dropped_events;
        all.complete &= v.complete;
        let name = partition_name(p);
        all.warnings
            .extend(v.warnings.into_iter().map(|w| format!("{name}: {w}")));
    }
    Ok(all)
}

/// Segment files in `dir` that the manifest does not list: unfinished ones a
/// killed writer left, and finished ones it did not get to record.
fn loose_files(dir: &Path, listed: &[String]) -> TraceResult<Vec<String>> {
    let mut out = Vec::new();
    for name in file_names(dir)? {
        if name.ends_with(PARTIAL_SUFFIX) {
            out.push(format!(
                "{}: unfinished segment left by a writer that did not close it (`validate --repair` adopts it if readable, else sets it aside)",
                dir.join(&name).display()
            ));
        } else if name.ends_with(SEGMENT_SUFFIX) && !listed.contains(&name) {
            out.push(format!(
                "{}: segment not listed in the manifest, so readers skip it (`validate --repair` adds it if readable)",
                dir.join(&name).display()
            ));
        }
    }
    Ok(out)
}
