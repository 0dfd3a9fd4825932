//! Full check of a trace: every segment decodes, rows are in `ts` order within
//! each segment, and the manifest agrees with what the segments hold.

use std::path::Path;

use serde::Serialize;

use crate::columns::Events;
use crate::error::{TraceError, TraceResult};
use crate::reader::{SegmentBatches, TraceReader};

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
    let reader = TraceReader::open(path)?;
    let m = reader.manifest();
    let mut events = 0u64;
    let mut warnings = Vec::new();
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    for seg in reader.segments() {
        let mut prev = i64::MIN;
        let mut unordered = 0u64;
        for b in SegmentBatches::open(&seg.path, None)? {
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
                "manifest time range [{}, {}] differs from the rows' [{first}, {last}]",
                m.start_unix_ns, m.end_unix_ns
            ));
        }
        if !m.complete {
            warnings.push("trace is not marked complete: its writer did not close it (killed?); finished segments are intact".into());
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
