//! A trace read back as plain rows, for totals by path, process and rank.
//! A row that stands for a run of calls comes back as one row per call, so
//! tests compare call by call with their ground truth (fio's iolog, strace).

use std::path::Path;

use iorepro_format::Op;
use iorepro_format::{Events, Manifest, Run, TraceReader};

/// One trace row, owned.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub ts_ns: i64,
    pub pid: i32,
    pub tid: i32,
    pub rank: Option<i32>,
    pub comm: String,
    pub op: Op,
    pub path: Option<String>,
    /// A rename's or link's new name, a symlink's link.
    pub path2: Option<String>,
    /// An io_uring request rather than a syscall.
    pub io_uring: bool,
    /// How the call was made (`io_uring`, `sendfile`, ...); `None` for a
    /// plain syscall.
    pub via: Option<String>,
    pub fd: Option<i32>,
    pub offset: Option<i64>,
    pub size: Option<i64>,
    pub ret: i64,
    pub flags: Option<i32>,
}

impl Row {
    /// Bytes a read or write moved (its positive return value).
    pub fn moved(&self) -> u64 {
        self.ret.max(0) as u64
    }

    pub fn under(&self, dir: &Path) -> bool {
        self.path
            .as_deref()
            .is_some_and(|p| Path::new(p).starts_with(dir))
    }
}

/// Every row of a (small) trace, in `ts` order.
pub fn load(trace: &Path) -> Vec<Row> {
    load_with_manifest(trace).1
}

/// The manifest of a (small) trace and every call in it, in `ts` order (a
/// run's calls follow its first call).
pub fn load_with_manifest(trace: &Path) -> (Manifest, Vec<Row>) {
    let reader = TraceReader::open(trace).unwrap_or_else(|e| panic!("{e}"));
    let mut rows = Vec::new();
    for batch in reader.events().unwrap_or_else(|e| panic!("{e}")) {
        let ev = batch.unwrap_or_else(|e| panic!("{e}"));
        let ops = ev.ops();
        for (i, op) in ops.into_iter().enumerate() {
            for call in Run::of(&ev, i).calls() {
                rows.push(Row {
                    ts_ns: call.ts_ns,
                    pid: ev.pid().value(i),
                    tid: ev.tid().value(i),
                    rank: Events::opt_i32(ev.rank(), i),
                    comm: ev.comm().value(i).to_string(),
                    op,
                    path: ev.path_at(i).map(str::to_string),
                    path2: ev.path2_at(i).map(str::to_string),
                    io_uring: ev.via_io_uring(i),
                    via: ev.via_at(i).map(str::to_string),
                    fd: Events::opt_i32(ev.fd(), i),
                    offset: call.offset,
                    size: call.size,
                    ret: call.ret,
                    flags: Events::opt_i32(ev.flags(), i),
                });
            }
        }
    }
    (reader.manifest().clone(), rows)
}

/// Sum of bytes moved by `op` rows under `dir`.
pub fn bytes_under(rows: &[Row], op: Op, dir: &Path) -> u64 {
    rows.iter()
        .filter(|r| r.op == op && r.under(dir))
        .map(Row::moved)
        .sum()
}
