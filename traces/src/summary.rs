//! One streaming pass over a trace: totals, op mix, hosts/ranks/files and peak
//! bandwidth. Memory grows with distinct files and seconds, never with rows.

use std::collections::{BTreeMap, HashSet};

use arrow_array::Array;
use serde::Serialize;

use crate::error::TraceResult;
use crate::reader::TraceReader;
use crate::schema::Op;

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct OpStats {
    pub count: u64,
    pub bytes: u64,
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
    pub peak_read_gib_s: f64,
    pub peak_write_gib_s: f64,
    pub phases: Vec<serde_json::Value>,
}

/// Bytes moved per one-second window, from the first event on.
#[derive(Default)]
struct Windows {
    origin: Option<i64>,
    read: Vec<u64>,
    write: Vec<u64>,
}

impl Windows {
    const NS: i64 = 1_000_000_000;

    fn add(&mut self, ts: i64, bytes: u64, write: bool) {
        let origin = *self.origin.get_or_insert(ts);
        let slot = ((ts - origin).max(0) / Self::NS) as usize;
        let v = if write { &mut self.write } else { &mut self.read };
        if v.len() <= slot {
            v.resize(slot + 1, 0);
        }
        v[slot] += bytes;
    }

    fn peak_gib_s(v: &[u64]) -> f64 {
        v.iter().copied().max().unwrap_or(0) as f64 / (1u64 << 30) as f64
    }
}

impl Summary {
    pub fn compute(reader: &TraceReader) -> TraceResult<Summary> {
        let mut events = 0u64;
        let mut first = i64::MAX;
        let mut last = i64::MIN;
        let mut hosts: Vec<String> = Vec::new();
        let mut ranks: HashSet<i32> = HashSet::new();
        let mut files: HashSet<String> = HashSet::new();
        let mut ops: BTreeMap<Op, (u64, u64)> = BTreeMap::new();
        let mut windows = Windows::default();
        for ev in reader.events()? {
            let ev = ev?;
            if ev.is_empty() {
                continue;
            }
            events += ev.len() as u64;
            let ts = ev.ts().values();
            first = first.min(ts[0]);
            last = last.max(ts[ts.len() - 1]);
            for h in ev.host_values() {
                if !hosts.iter().any(|x| x == h) {
                    hosts.push(h.to_string());
                }
            }
            let rank = ev.rank();
            let path = ev.path();
            let ret = ev.ret().values();
            let op_of = ev.ops();
            let mut prev_path: Option<&str> = None;
            for i in 0..ev.len() {
                if rank.is_valid(i) {
                    ranks.insert(rank.value(i));
                }
                if path.is_valid(i) {
                    let p = path.value(i);
                    if prev_path != Some(p) {
                        if !files.contains(p) {
                            files.insert(p.to_string());
                        }
                        prev_path = Some(p);
                    }
                }
                let op = op_of[i];
                let e = ops.entry(op).or_default();
                e.0 += 1;
                if (op.is_read_data() || op.is_write_data()) && ret[i] > 0 {
                    e.1 += ret[i] as u64;
                    windows.add(ts[i], ret[i] as u64, op.is_write_data());
                }
            }
        }
        hosts.sort();
        let mut ranks: Vec<i32> = ranks.into_iter().collect();
        ranks.sort_unstable();
        let read_bytes = ops.get(&Op::Read).map_or(0, |e| e.1);
        let write_bytes = ops.get(&Op::Write).map_or(0, |e| e.1);
        Ok(Summary {
            events,
            dropped_events: reader.manifest().dropped_events,
            duration_s: if events > 0 { (last - first) as f64 / 1e9 } else { 0.0 },
            hosts,
            ranks,
            files: files.len() as u64,
            read_bytes,
            write_bytes,
            ops: ops
                .into_iter()
                .map(|(op, (count, bytes))| (op.as_str().to_string(), OpStats { count, bytes }))
                .collect(),
            peak_read_gib_s: Windows::peak_gib_s(&windows.read),
            peak_write_gib_s: Windows::peak_gib_s(&windows.write),
            phases: Vec::new(),
        })
    }

    /// The human-readable table.
    pub fn render(&self) -> String {
        use crate::units::fmt_bytes;
        let mut s = String::new();
        s.push_str(&format!(
            "events {}  dropped {}  duration {:.3} s  hosts {}  ranks {}  files {}\n",
            self.events,
            self.dropped_events,
            self.duration_s,
            self.hosts.len(),
            self.ranks.len(),
            self.files
        ));
        s.push_str(&format!(
            "read {}  write {}  peak read {:.3} GiB/s  peak write {:.3} GiB/s\n",
            fmt_bytes(self.read_bytes as f64),
            fmt_bytes(self.write_bytes as f64),
            self.peak_read_gib_s,
            self.peak_write_gib_s
        ));
        s.push_str(&format!("{:<10} {:>12} {:>14}\n", "op", "count", "bytes"));
        for (op, st) in &self.ops {
            s.push_str(&format!("{:<10} {:>12} {:>14}\n", op, st.count, fmt_bytes(st.bytes as f64)));
        }
        s
    }
}
