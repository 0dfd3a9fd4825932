//! One pass over a trace's rows for what a DLIO workload is made of: each
//! dataset file's size and visits (its opens, by whom and when), each
//! checkpoint file's writes, and each rank's first process (the one that
//! runs its training loop, beside the loader workers it forks).

use std::collections::BTreeMap;

use arrow_array::Array;

use iorepro_format::error::TraceResult;
use iorepro_format::reader::TraceReader;
use iorepro_format::Op;

use crate::roles::{FileRoles, Role};

/// What the pass saw.
#[derive(Debug, Default)]
pub struct Observed {
    /// Dataset files read, by path.
    pub dataset: BTreeMap<String, DatasetFile>,
    /// The dataset files' paths, by [`DatasetFile::id`].
    pub names: Vec<String>,
    /// Each visit of a dataset file: an open, or a read at offset 0 of a
    /// file the job never opened in the trace (kept open from before).
    pub visits: Vec<Visit>,
    /// Checkpoint files written, by path.
    pub checkpoints: BTreeMap<String, CheckpointFile>,
    /// Per rank (-1 for rows without one), its first process: the pid of
    /// its earliest row.
    pub first_process: BTreeMap<i32, (i64, i32)>,
    /// Per rank, every process with a row of it.
    pub processes: BTreeMap<i32, std::collections::BTreeSet<i32>>,
    /// Each traced process's parent, where the capture recorded the forks.
    pub parents: BTreeMap<i32, i32>,
}

/// A dataset file.
#[derive(Debug, Default, Clone)]
pub struct DatasetFile {
    /// Its index in [`Observed::names`].
    pub id: u32,
    /// The furthest byte read (offset + bytes): the file's size where it
    /// was read whole.
    pub extent: u64,
    pub read_bytes: u64,
    pub opens: u64,
}

/// A visit of a dataset file: when, by which rank, process and thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Visit {
    pub ts: i64,
    pub rank: i32,
    pub pid: i32,
    pub tid: i32,
    /// The file ([`DatasetFile::id`]).
    pub file: u32,
}

/// A checkpoint file: its bytes written, by which rank, from when.
#[derive(Debug, Clone)]
pub struct CheckpointFile {
    pub first_write_ns: i64,
    pub rank: i32,
    pub bytes: u64,
}

impl Observed {
    /// The dataset file `path`, made at its first sight.
    fn file(&mut self, path: &str) -> &mut DatasetFile {
        if !self.dataset.contains_key(path) {
            let id = self.names.len() as u32;
            self.names.push(path.to_string());
            self.dataset.insert(
                path.to_string(),
                DatasetFile {
                    id,
                    ..DatasetFile::default()
                },
            );
        }
        self.dataset.get_mut(path).expect("just made")
    }
}

/// Reads `reader`'s rows once; `roles` says which files are the dataset's
/// and which the checkpoints'.
pub fn observe(reader: &TraceReader, roles: &FileRoles) -> TraceResult<Observed> {
    let mut o = Observed {
        parents: reader
            .manifest()
            .process_starts
            .iter()
            .map(|s| (s.pid, s.parent))
            .collect(),
        ..Observed::default()
    };
    let mut read_at_zero: Vec<(String, Visit)> = Vec::new();
    for batch in reader.events()? {
        let ev = batch?;
        let (ts, pid, tid, rank) = (ev.ts(), ev.pid(), ev.tid(), ev.rank());
        let (offset, ret) = (ev.offset(), ev.ret());
        for i in 0..ev.len() {
            let r = if rank.is_valid(i) { rank.value(i) } else { -1 };
            let (t, p) = (ts.value(i), pid.value(i));
            let first = o.first_process.entry(r).or_insert((t, p));
            if t < first.0 {
                *first = (t, p);
            }
            if o.processes.get(&r).is_none_or(|ps| !ps.contains(&p)) {
                o.processes.entry(r).or_default().insert(p);
            }
            let Some(path) = ev.path_at(i) else { continue };
            let op = ev.op(i);
            let role = match op {
                Op::Open | Op::Read | Op::Write => roles.role(path),
                _ => continue,
            };
            let mut visit = Visit {
                ts: t,
                rank: r,
                pid: p,
                tid: tid.value(i),
                file: 0,
            };
            let moved = ret.value(i).max(0) as u64;
            match (role, op) {
                (Role::Dataset, Op::Open) if ret.value(i) >= 0 => {
                    let f = o.file(path);
                    f.opens += 1;
                    visit.file = f.id;
                    o.visits.push(visit);
                }
                (Role::Dataset, Op::Read) if moved > 0 => {
                    let at = if offset.is_valid(i) {
                        offset.value(i).max(0) as u64
                    } else {
                        0
                    };
                    let f = o.file(path);
                    visit.file = f.id;
                    f.extent = f.extent.max(at + moved);
                    f.read_bytes += moved;
                    if at == 0 {
                        read_at_zero.push((path.to_string(), visit));
                    }
                }
                (Role::Checkpoint, Op::Write) if moved > 0 => {
                    let f = o
                        .checkpoints
                        .entry(path.to_string())
                        .or_insert(CheckpointFile {
                            first_write_ns: t,
                            rank: r,
                            bytes: 0,
                        });
                    f.first_write_ns = f.first_write_ns.min(t);
                    f.bytes += moved;
                }
                _ => {}
            }
        }
    }
    // A file the job read with no open in the trace: its reads from the
    // start are its visits.
    for (path, v) in read_at_zero {
        if o.dataset.get(&path).is_some_and(|f| f.opens == 0) {
            o.visits.push(v);
        }
    }
    o.visits.sort_unstable();
    Ok(o)
}
