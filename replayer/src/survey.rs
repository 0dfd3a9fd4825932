//! The first pass over the trace: which ranks exist, which files are read (and
//! how far) or written, how many ops each rank replays, and the phases. It
//! streams batches and keeps only per-file and per-phase state, so its memory
//! grows with the number of files, never with the number of events.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use iorepro_traces::analysis::activity::{writer_of, Activity};
use iorepro_traces::analysis::phases::{self, Phase, PhaseKind};
use iorepro_traces::format::schema::{
    COL_DUR_NS, COL_FD, COL_FLAGS, COL_OFFSET, COL_OP, COL_PATH, COL_PID, COL_RANK, COL_RET,
    COL_SIZE, COL_TS,
};
use iorepro_traces::{Events, Op, TraceReader};

use crate::error::ReplayResult;

/// The columns the replayer reads (the rest are never decoded).
pub const REPLAY_COLUMNS: [&str; 11] = [
    COL_TS, COL_DUR_NS, COL_RANK, COL_PID, COL_OP, COL_PATH, COL_FD, COL_OFFSET, COL_SIZE, COL_RET,
    COL_FLAGS,
];

#[derive(Debug, Clone, Default)]
pub struct PathInfo {
    pub path: Arc<str>,
    /// Bytes a reader needs the file to hold (largest `offset + bytes` of a read).
    pub read_extent: u64,
    /// Written, created, truncated, renamed or unlinked somewhere in the trace.
    pub written: bool,
    /// Source ranks that read it (sorted, distinct).
    pub readers: Vec<i32>,
}

#[derive(Debug, Default)]
pub struct Survey {
    pub sources: Vec<i32>,
    pub ops_per_source: BTreeMap<i32, u64>,
    pub paths: Vec<PathInfo>,
    pub path_ids: HashMap<Arc<str>, u32>,
    pub phases: Vec<Phase>,
    pub start_ns: i64,
    pub end_ns: i64,
    pub events: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// The largest single read or write, so workers size their buffers once
    /// up front instead of growing (and filling) them inside a timed phase.
    pub max_io_bytes: u64,
}

/// Rows without a rank (a trace of one untagged process) replay as rank 0.
pub fn rank_or_zero(ev: &Events, row: usize) -> i32 {
    Events::opt_i32(ev.rank(), row).unwrap_or(0)
}

/// Open flags that mean the file is written.
pub fn opens_for_writing(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY || flags & (libc::O_CREAT | libc::O_TRUNC) != 0
}

pub fn open_reader(trace: &Path) -> ReplayResult<TraceReader> {
    Ok(TraceReader::open(trace)?.with_columns(&REPLAY_COLUMNS))
}

impl Survey {
    pub fn path_id(&mut self, path: &str) -> u32 {
        if let Some(&id) = self.path_ids.get(path) {
            return id;
        }
        let id = self.paths.len() as u32;
        let p: Arc<str> = Arc::from(path);
        self.paths.push(PathInfo {
            path: p.clone(),
            ..Default::default()
        });
        self.path_ids.insert(p, id);
        id
    }

    pub fn run(trace: &Path) -> ReplayResult<Survey> {
        let reader = open_reader(trace)?;
        let mut s = Survey {
            start_ns: i64::MAX,
            end_ns: i64::MIN,
            ..Default::default()
        };
        let mut activity = Activity::default();
        for ev in reader.events()? {
            let ev = ev?;
            let ops = ev.ops();
            let (ts, dur, ret) = (ev.ts(), ev.dur_ns(), ev.ret());
            for (row, &op) in ops.iter().enumerate() {
                let t = ts.value(row);
                let end = t + dur.value(row).max(0);
                s.start_ns = s.start_ns.min(t);
                s.end_ns = s.end_ns.max(end);
                s.events += 1;
                let r = ret.value(row);
                let rank = rank_or_zero(&ev, row);
                *s.ops_per_source.entry(rank).or_default() += 1;
                let bytes = if r > 0 && matches!(op, Op::Read | Op::Write | Op::Fault) {
                    r as u64
                } else {
                    0
                };
                let writer = writer_of(Events::opt_i32(ev.rank(), row), ev.pid().value(row));
                activity.observe(t, dur.value(row), op, r, writer);
                if r < 0 {
                    continue;
                }
                match op {
                    Op::Read => s.read_bytes += bytes,
                    Op::Write => s.write_bytes += bytes,
                    _ => {}
                }
                if matches!(op, Op::Read | Op::Write) {
                    let requested = iorepro_traces::Events::opt_i64(ev.size(), row)
                        .unwrap_or(0)
                        .max(0) as u64;
                    s.max_io_bytes = s.max_io_bytes.max(bytes).max(requested);
                }
                let Some(path) = ev.path_at(row) else {
                    continue;
                };
                let id = s.path_id(path) as usize;
                let info = &mut s.paths[id];
                match op {
                    Op::Read | Op::Fault => {
                        let off = Events::opt_i64(ev.offset(), row).unwrap_or(0).max(0) as u64;
                        info.read_extent = info.read_extent.max(off + bytes);
                        if info.readers.last() != Some(&rank) && !info.readers.contains(&rank) {
                            info.readers.push(rank);
                            info.readers.sort_unstable();
                        }
                    }
                    Op::Write | Op::Truncate | Op::Unlink | Op::Rename => info.written = true,
                    Op::Open if Events::opt_i32(ev.flags(), row).is_some_and(opens_for_writing) => {
                        info.written = true
                    }
                    _ => {}
                }
            }
        }
        if s.events == 0 {
            s.start_ns = 0;
            s.end_ns = 0;
        }
        s.sources = s.ops_per_source.keys().copied().collect();
        if s.sources.is_empty() {
            s.sources.push(0);
        }
        activity.finish();
        s.phases = phases::detect(&activity);
        if s.phases.is_empty() {
            // A trace without calls replays as one idle phase.
            s.phases.push(Phase {
                kind: PhaseKind::Idle,
                start_s: 0.0,
                end_s: 0.0,
                read_bytes: 0,
                write_bytes: 0,
                max_writers: 0,
                start_unix_ns: s.start_ns,
                end_unix_ns: s.end_ns.max(s.start_ns + 1),
            });
        }
        Ok(s)
    }
}
