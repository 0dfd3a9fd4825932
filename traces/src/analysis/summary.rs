//! One streaming pass over a trace: totals, op mix, request-size histograms,
//! sequential versus random access, per-rank and per-file totals, peak
//! bandwidth and phases. Memory grows with distinct files, ranks and time
//! windows, never with rows.
//!
//! `peak_read_gib_s` / `peak_write_gib_s` are over 1 s windows aligned to the
//! first event; the 100 ms peaks are in `peak_read_gib_s_100ms` /
//! `peak_write_gib_s_100ms`.

use std::collections::BTreeMap;

use arrow_array::cast::AsArray;
use arrow_array::{Array, StringArray};
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::analysis::access::{AccessCounts, AccessTracker};
use crate::analysis::histogram::SizeHistogram;
use crate::analysis::phases::{self, Phase};
use crate::analysis::prefetch::Prefetch;
use crate::analysis::timeline::{Timeline, BASE_WINDOW_NS};
use crate::error::TraceResult;
use crate::format::reader::TraceReader;
use crate::format::schema::{
    Op, COL_CALLS, COL_DUR_NS, COL_HOST, COL_OFFSET, COL_OP, COL_PATH, COL_PID, COL_RANK, COL_RET,
    COL_SIZE, COL_SPAN_NS, COL_TS,
};

/// How many files the summary lists, busiest first.
pub const TOP_FILES: usize = 10;

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct OpStats {
    pub count: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RankStats {
    pub rank: i32,
    pub events: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FileStats {
    pub path: String,
    pub events: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AccessShares {
    pub read: AccessCounts,
    pub write: AccessCounts,
    pub read_sequential_share: f64,
    pub write_sequential_share: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub events: u64,
    pub dropped_events: u64,
    pub duration_s: f64,
    pub hosts: Vec<String>,
    pub ranks: Vec<i32>,
    pub files: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub ops: BTreeMap<String, OpStats>,
    /// Over 1 s windows.
    pub peak_read_gib_s: f64,
    pub peak_write_gib_s: f64,
    pub peak_read_gib_s_100ms: f64,
    pub peak_write_gib_s_100ms: f64,
    /// Requested sizes (`size`) of read and write calls, power-of-two buckets.
    pub size_histogram: BTreeMap<String, SizeHistogram>,
    pub access: AccessShares,
    /// Every rank that appears, in rank order (rows without a rank are in `unranked_events`).
    pub per_rank: Vec<RankStats>,
    pub unranked_events: u64,
    pub top_files: Vec<FileStats>,
    pub phases: Vec<Phase>,
    #[serde(skip)]
    pub timeline: Timeline,
}

/// Interns paths: one id per distinct path, looked up once per change of path
/// between consecutive rows.
#[derive(Default)]
struct Files {
    ids: FxHashMap<String, u32>,
    stats: Vec<FileStats>,
}

impl Files {
    fn id(&mut self, path: &str) -> u32 {
        if let Some(&id) = self.ids.get(path) {
            return id;
        }
        let id = self.stats.len() as u32;
        self.ids.insert(path.to_string(), id);
        self.stats.push(FileStats {
            path: path.to_string(),
            ..Default::default()
        });
        id
    }
}

#[derive(Default)]
struct Ranks {
    slots: FxHashMap<i32, usize>,
    stats: Vec<RankStats>,
    unranked: u64,
}

impl Ranks {
    fn slot(&mut self, rank: i32) -> usize {
        let next = self.stats.len();
        let slot = *self.slots.entry(rank).or_insert(next);
        if slot == next {
            self.stats.push(RankStats {
                rank,
                ..Default::default()
            });
        }
        slot
    }
}

impl Summary {
    /// The columns a summary reads; the others are never decoded.
    pub const COLUMNS: [&'static str; 12] = [
        COL_TS,
        COL_DUR_NS,
        COL_HOST,
        COL_PID,
        COL_RANK,
        COL_OP,
        COL_PATH,
        COL_OFFSET,
        COL_SIZE,
        COL_RET,
        COL_CALLS,
        COL_SPAN_NS,
    ];

    pub fn compute(reader: &TraceReader) -> TraceResult<Summary> {
        let projected = TraceReader::open(reader.root())?.with_columns(&Self::COLUMNS);
        let mut events = 0u64;
        let mut hosts: Vec<String> = Vec::new();
        let mut ranks = Ranks::default();
        let mut files = Files::default();
        let mut ops: Vec<OpStats> = vec![OpStats::default(); Op::ALL.len()];
        let mut hist: Vec<SizeHistogram> = vec![SizeHistogram::default(); Op::ALL.len()];
        let mut access = AccessTracker::default();
        let mut timeline = Timeline::new(BASE_WINDOW_NS);
        for ev in Prefetch::new(projected.events()?) {
            let ev = ev?;
            if ev.is_empty() {
                continue;
            }
            let (calls, span) = (ev.calls(), ev.span_ns());
            let calls_of = |i: usize| {
                if calls.is_valid(i) {
                    calls.value(i).max(1) as u64
                } else {
                    1
                }
            };
            for h in ev.host_values() {
                if !hosts.iter().any(|x| x == h) {
                    hosts.push(h.to_string());
                }
            }
            let ts = ev.ts().values();
            timeline.touch(ts[0]);
            timeline.touch(ts[ts.len() - 1]);
            let (rank, pid, path) = (ev.rank(), ev.pid().values(), ev.path());
            let (offset, size, ret) = (ev.offset(), ev.size(), ev.ret().values());
            let dur = ev.dur_ns().values();
            // Per-batch op table: dictionary key -> op, so rows cost an index.
            let op_names: &StringArray = ev.op_dict().values().as_string();
            let op_table: Vec<Op> = (0..op_names.len())
                .map(|i| Op::parse(op_names.value(i)))
                .collect();
            let op_keys = ev.op_dict().keys().values();
            let mut prev_path: Option<(&str, u32)> = None;
            let mut prev_rank: Option<(i32, usize)> = None;
            for i in 0..ev.len() {
                let op = op_table[op_keys[i] as usize];
                // A run of calls counts as its calls (see format::runs).
                let n = calls_of(i);
                events += n;
                let file = if path.is_valid(i) {
                    let p = path.value(i);
                    match prev_path {
                        Some((q, id)) if q == p => Some(id),
                        _ => {
                            let id = files.id(p);
                            prev_path = Some((p, id));
                            Some(id)
                        }
                    }
                } else {
                    None
                };
                let r = rank.is_valid(i).then(|| rank.value(i));
                let data = op.is_read_data() || op.is_write_data();
                let moved = if data && ret[i] > 0 { ret[i] as u64 } else { 0 };
                let st = &mut ops[op as usize];
                st.count += n;
                st.bytes += moved;
                let write = op.is_write_data();
                match r {
                    Some(rk) => {
                        let slot = match prev_rank {
                            Some((q, slot)) if q == rk => slot,
                            _ => {
                                let slot = ranks.slot(rk);
                                prev_rank = Some((rk, slot));
                                slot
                            }
                        };
                        let rs = &mut ranks.stats[slot];
                        rs.events += n;
                        if write {
                            rs.write_bytes += moved;
                        } else {
                            rs.read_bytes += moved;
                        }
                    }
                    None => ranks.unranked += n,
                }
                if let Some(id) = file {
                    let fs = &mut files.stats[id as usize];
                    fs.events += n;
                    if write {
                        fs.write_bytes += moved;
                    } else {
                        fs.read_bytes += moved;
                    }
                }
                if !data {
                    continue;
                }
                if size.is_valid(i) {
                    hist[op as usize].add_calls(size.value(i).max(0) as u64 / n, n);
                }
                let owner = match r {
                    Some(rk) => rk as i64,
                    None => (1i64 << 40) | pid[i] as i64,
                };
                if let (Some(id), true) = (file, offset.is_valid(i)) {
                    if ret[i] >= 0 {
                        access.record(id, owner, offset.value(i), ret[i], write, n);
                    }
                }
                if moved > 0 {
                    // A run's bytes moved over its whole span.
                    let lasted = if span.is_valid(i) {
                        span.value(i)
                    } else {
                        dur[i]
                    };
                    if write {
                        timeline.add_write(ts[i], lasted, moved, owner);
                    } else {
                        timeline.add_read(ts[i], lasted, moved);
                    }
                }
            }
        }
        timeline.close();
        hosts.sort();
        let mut per_rank: Vec<RankStats> = ranks.stats;
        per_rank.sort_by_key(|r| r.rank);
        let n_files = files.stats.len() as u64;
        let mut top_files = files.stats;
        top_files.sort_by(|a, b| {
            (b.read_bytes + b.write_bytes)
                .cmp(&(a.read_bytes + a.write_bytes))
                .then(b.events.cmp(&a.events))
                .then(a.path.cmp(&b.path))
        });
        top_files.truncate(TOP_FILES);
        let read_bytes = ops[Op::Read as usize].bytes;
        let write_bytes = ops[Op::Write as usize].bytes;
        let (peak_read_100ms, peak_write_100ms) = timeline.peaks_gib_s(1);
        let per_second = (1_000_000_000 / BASE_WINDOW_NS) as usize;
        let (peak_read, peak_write) = timeline.peaks_gib_s(per_second);
        Ok(Summary {
            events,
            dropped_events: reader.manifest().dropped_events,
            duration_s: timeline.duration_s(),
            hosts,
            ranks: per_rank.iter().map(|r| r.rank).collect(),
            files: n_files,
            read_bytes,
            write_bytes,
            ops: Op::ALL
                .iter()
                .zip(ops)
                .filter(|(_, s)| s.count > 0)
                .map(|(op, s)| (op.as_str().to_string(), s))
                .collect(),
            peak_read_gib_s: peak_read,
            peak_write_gib_s: peak_write,
            peak_read_gib_s_100ms: peak_read_100ms,
            peak_write_gib_s_100ms: peak_write_100ms,
            size_histogram: Op::ALL
                .iter()
                .zip(hist)
                .filter(|(_, h)| h.total() > 0)
                .map(|(op, h)| (op.as_str().to_string(), h))
                .collect(),
            access: AccessShares {
                read: access.read,
                write: access.write,
                read_sequential_share: access.read.sequential_share(),
                write_sequential_share: access.write.sequential_share(),
            },
            per_rank,
            unranked_events: ranks.unranked,
            top_files,
            phases: phases::detect(&timeline),
            timeline,
        })
    }
}

impl Summary {
    /// The human-readable report.
    pub fn render(&self) -> String {
        use crate::units::fmt_bytes;
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "events {}  dropped {}  duration {:.3} s  hosts {}  ranks {}  files {}",
            self.events,
            self.dropped_events,
            self.duration_s,
            self.hosts.len(),
            self.ranks.len(),
            self.files
        );
        let _ = writeln!(
            s,
            "read {}  write {}",
            fmt_bytes(self.read_bytes as f64),
            fmt_bytes(self.write_bytes as f64)
        );
        let _ = writeln!(
            s,
            "peak read {:.3} GiB/s (1 s), {:.3} GiB/s (100 ms)   peak write {:.3} GiB/s (1 s), {:.3} GiB/s (100 ms)",
            self.peak_read_gib_s, self.peak_read_gib_s_100ms, self.peak_write_gib_s, self.peak_write_gib_s_100ms
        );
        let _ = writeln!(
            s,
            "sequential: reads {:.1} %, writes {:.1} %",
            self.access.read_sequential_share * 100.0,
            self.access.write_sequential_share * 100.0
        );
        let _ = writeln!(s, "\n{:<10} {:>12} {:>14}", "op", "count", "bytes");
        for (op, st) in &self.ops {
            let _ = writeln!(
                s,
                "{:<10} {:>12} {:>14}",
                op,
                st.count,
                fmt_bytes(st.bytes as f64)
            );
        }
        for (op, h) in &self.size_histogram {
            let _ = writeln!(s, "\n{op} sizes");
            let total = h.total().max(1) as f64;
            for (floor, count) in h.buckets() {
                let bar = "#".repeat(((count as f64 / total) * 40.0).ceil() as usize);
                let _ = writeln!(
                    s,
                    "  >= {:>10} {:>12}  {bar}",
                    fmt_bytes(floor as f64),
                    count
                );
            }
        }
        let _ = writeln!(
            s,
            "\n{:<8} {:>12} {:>14} {:>14}",
            "rank", "events", "read", "write"
        );
        let mut busiest: Vec<&RankStats> = self.per_rank.iter().collect();
        busiest.sort_by_key(|r| std::cmp::Reverse(r.read_bytes + r.write_bytes));
        for r in busiest.iter().take(TOP_FILES) {
            let _ = writeln!(
                s,
                "{:<8} {:>12} {:>14} {:>14}",
                r.rank,
                r.events,
                fmt_bytes(r.read_bytes as f64),
                fmt_bytes(r.write_bytes as f64)
            );
        }
        if self.per_rank.len() > TOP_FILES {
            let _ = writeln!(
                s,
                "  ... {} more ranks (--json lists all)",
                self.per_rank.len() - TOP_FILES
            );
        }
        let _ = writeln!(s, "\n{:>14} {:>14} {:>10}  file", "read", "write", "events");
        for f in &self.top_files {
            let _ = writeln!(
                s,
                "{:>14} {:>14} {:>10}  {}",
                fmt_bytes(f.read_bytes as f64),
                fmt_bytes(f.write_bytes as f64),
                f.events,
                f.path
            );
        }
        s.push('\n');
        s.push_str(&crate::analysis::phases::render(&self.phases));
        s
    }
}
