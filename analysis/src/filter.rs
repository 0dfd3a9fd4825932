//! `iorepro-trace filter`: a trace cut to the rows a user wants to share or
//! archive, by file role, path prefix, rank and time window. The output is a
//! trace like any other (every subcommand and the replayer read it): the
//! source, command, mount table and lost-event count of the capture are
//! kept, the rows and calls are counted again, and `filtered_from` in its
//! manifest says where it came from and how it was cut.
//!
//! A row is kept when it passes every criterion given:
//! - `--from` / `--to`: its `ts` lies in `[from, to)` after the trace's start;
//! - `--rank`: its rank is one of those named (rows without a rank go);
//! - `--exclude`: its path is not at or beneath any of those prefixes;
//! - `--roles` / `--include`: its path has one of the roles, or lies beneath
//!   one of the include prefixes (either suffices, as in a replay's scope);
//!   rows that name no path go.
//!
//! Roles are judged on the whole trace before it is cut, so a checkpoint
//! stays a checkpoint in a window that only reads it back.

use std::collections::HashMap;
use std::path::Path;

use arrow_array::BooleanArray;
use serde::Serialize;

use crate::roles::forms::beneath;
use crate::roles::{FileRoles, Role};
use iorepro_format::columns::Events;
use iorepro_format::error::{TraceError, TraceResult};
use iorepro_format::manifest::Manifest;
use iorepro_format::paths::spelling;
use iorepro_format::reader::TraceReader;
use iorepro_format::writer::{TraceWriter, WriterOptions};

/// What to keep; an empty list keeps everything for its criterion.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Filter {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<Role>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<i32>,
    /// Nanoseconds after the trace's start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_ns: Option<u64>,
}

/// What [`filter`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Filtered {
    pub events_in: u64,
    pub events: u64,
    pub manifest: Manifest,
}

/// Manifest keys of the source that describe its own files, not the capture.
const NOT_CARRIED: [&str; 3] = ["partitions", "late_batch_segments", "filtered_from"];

pub fn filter(input: &Path, out: &Path, f: &Filter, segment_rows: usize) -> TraceResult<Filtered> {
    if let (Some(a), Some(b)) = (f.from_ns, f.to_ns) {
        if b <= a {
            return Err(TraceError::invalid(
                input,
                "filter: --to must be later than --from",
            ));
        }
    }
    let reader = TraceReader::open(input)?;
    let src = reader.manifest().clone();
    let roles = if f.roles.is_empty() {
        None
    } else {
        Some(FileRoles::compute(&reader)?)
    };
    let start = match src.start_unix_ns {
        0 => reader.ts_span_ns().map_or(0, |s| s.0),
        s => s,
    };
    let mut opts = WriterOptions::new(src.source);
    opts.segment_rows = segment_rows.max(1);
    opts.command = src.command.clone();
    let mut w = TraceWriter::create(out, opts)?;
    let mut judge = RowJudge {
        f,
        roles: roles.as_ref(),
        from: f.from_ns.map(|n| start.saturating_add(n as i64)),
        to: f.to_ns.map(|n| start.saturating_add(n as i64)),
        paths: HashMap::new(),
    };
    let mut events_in = 0u64;
    for batch in reader.batches()? {
        let batch = batch?;
        events_in += batch.num_rows() as u64;
        let ev = Events::new(batch.clone());
        let mask: BooleanArray = (0..ev.len()).map(|r| Some(judge.keep(&ev, r))).collect();
        let kept = arrow_select::filter::filter_record_batch(&batch, &mask)
            .map_err(|e| TraceError::invalid(input, e.to_string()))?;
        w.write_batch(&kept)?;
    }
    for (k, v) in &src.extra {
        if !NOT_CARRIED.contains(&k.as_str()) {
            w.set_extra(k, v.clone());
        }
    }
    if let Some(m) = &src.mounts {
        w.set_mounts(m.clone());
    }
    w.set_process_starts(src.process_starts.clone());
    w.set_dropped_events(src.dropped_events);
    if let Some(a) = &src.anonymized {
        w.set_anonymized(a.clone());
    }
    let mut from = serde_json::json!({
        "trace": input.display().to_string(),
        "events": events_in,
        "start_unix_ns": start,
        "filter": f,
        "command": std::env::args().collect::<Vec<_>>(),
    });
    if src.anonymized.is_some() {
        // Where it was cut, and how, may name files of the machine that cut it.
        from = serde_json::json!({ "events": events_in, "start_unix_ns": start });
    }
    w.set_extra("filtered_from", from);
    let manifest = w.finish()?;
    Ok(Filtered {
        events_in,
        events: manifest.events,
        manifest,
    })
}

struct RowJudge<'a> {
    f: &'a Filter,
    roles: Option<&'a FileRoles>,
    from: Option<i64>,
    to: Option<i64>,
    /// Whether a path passes the path criteria, by its spelling in the trace.
    paths: HashMap<String, bool>,
}

impl RowJudge<'_> {
    fn keep(&mut self, ev: &Events, row: usize) -> bool {
        let ts = ev.ts().value(row);
        if self.from.is_some_and(|a| ts < a) || self.to.is_some_and(|b| ts >= b) {
            return false;
        }
        if !self.f.ranks.is_empty() {
            match Events::opt_i32(ev.rank(), row) {
                Some(r) if self.f.ranks.contains(&r) => {}
                _ => return false,
            }
        }
        let paths_matter =
            !(self.f.roles.is_empty() && self.f.include.is_empty() && self.f.exclude.is_empty());
        if !paths_matter {
            return true;
        }
        let Some(path) = ev.path_at(row) else {
            return self.f.roles.is_empty() && self.f.include.is_empty();
        };
        if let Some(&k) = self.paths.get(path) {
            return k;
        }
        let k = self.judge_path(path);
        self.paths.insert(path.to_string(), k);
        k
    }

    fn judge_path(&self, path: &str) -> bool {
        let key = spelling(path);
        if self.f.exclude.iter().any(|p| beneath(&key, p)) {
            return false;
        }
        if self.f.roles.is_empty() && self.f.include.is_empty() {
            return true;
        }
        self.f.include.iter().any(|p| beneath(&key, p))
            || self
                .roles
                .is_some_and(|r| self.f.roles.contains(&r.role(path)))
    }
}
