//! Kernel records become trace rows here: path and rank looked up, ops mapped
//! onto the trace's vocabulary, and rows held briefly in a reorder window so
//! they reach the writer in `ts` order (records arrive in exit order, rows are
//! stamped with the entry time).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use iorepro_common::{kind, IoEvent, PathEvent, COMM_LEN};
use iorepro_traces::{EventRow, Op, TraceResult, TraceWriter};

/// One row, owned until the reorder window lets it go.
#[derive(Debug, Clone)]
pub struct Row {
    pub ts_ns: i64,
    pub dur_ns: i64,
    pub pid: i32,
    pub tid: i32,
    pub rank: Option<i32>,
    pub comm: [u8; COMM_LEN],
    pub op: Op,
    pub path: Option<Arc<str>>,
    pub fd: Option<i32>,
    pub offset: Option<i64>,
    pub size: Option<i64>,
    pub ret: i64,
    pub flags: Option<i32>,
}

pub fn op_of(kind: u32) -> Option<Op> {
    Some(match kind {
        kind::OPEN => Op::Open,
        kind::CLOSE => Op::Close,
        kind::READ => Op::Read,
        kind::WRITE => Op::Write,
        kind::LSEEK => Op::Lseek,
        kind::FSYNC => Op::Fsync,
        kind::FDATASYNC => Op::Fdatasync,
        kind::TRUNCATE => Op::Truncate,
        kind::UNLINK => Op::Unlink,
        kind::RENAME => Op::Rename,
        kind::MMAP => Op::Mmap,
        kind::FAULT => Op::Fault,
        _ => return None,
    })
}

impl Row {
    /// The columns every record fills the same way; `wall_offset_ns` turns
    /// the kernel's monotonic clock into wall-clock time.
    pub fn from_event(
        ev: &IoEvent,
        op: Op,
        rank: Option<i32>,
        path: Option<Arc<str>>,
        comm: [u8; COMM_LEN],
        wall_offset_ns: i64,
    ) -> Row {
        let has_fd = ev.fd >= 0;
        let (offset, size, flags) = match op {
            Op::Read | Op::Write | Op::Mmap | Op::Fault => (
                Some(ev.offset),
                Some(ev.size as i64),
                (op == Op::Mmap).then_some(ev.flags as i32),
            ),
            Op::Lseek => (Some(ev.offset), None, Some(ev.flags as i32)),
            Op::Truncate => (None, Some(ev.size as i64), None),
            Op::Open | Op::Unlink | Op::Rename => (None, None, Some(ev.flags as i32)),
            _ => (None, None, None),
        };
        Row {
            ts_ns: ev.ts_ns as i64 + wall_offset_ns,
            dur_ns: ev.dur_ns as i64,
            pid: (ev.pid_tgid >> 32) as i32,
            tid: ev.pid_tgid as u32 as i32,
            rank,
            comm,
            op,
            path,
            fd: has_fd.then_some(ev.fd),
            offset,
            size,
            ret: ev.ret,
            flags,
        }
    }
}

/// The NUL-terminated string in a fixed buffer.
pub fn c_str(buf: &[u8]) -> &str {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..end]) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&buf[..e.valid_up_to()]).unwrap_or(""),
    }
}

/// The path arguments of a path record as strings.
pub fn raw_paths(ev: &PathEvent) -> (&str, &str) {
    (c_str(&ev.path), c_str(&ev.path2))
}

struct Pending {
    seq: u64,
    row: Row,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    // Reversed: BinaryHeap is a max-heap and the oldest row must come first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.row.ts_ns, other.seq).cmp(&(self.row.ts_ns, self.seq))
    }
}

/// Rows waiting until no earlier row can still arrive.
pub struct Reorder {
    heap: BinaryHeap<Pending>,
    seq: u64,
    host: String,
}

impl Reorder {
    pub fn new(host: String) -> Self {
        Reorder {
            heap: BinaryHeap::new(),
            seq: 0,
            host,
        }
    }

    pub fn push(&mut self, row: Row) {
        self.seq += 1;
        self.heap.push(Pending { seq: self.seq, row });
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Writes every row stamped before `watermark_ns` (all with `None`).
    pub fn release(
        &mut self,
        watermark_ns: Option<i64>,
        out: &mut TraceWriter,
    ) -> TraceResult<usize> {
        let mut n = 0;
        while let Some(top) = self.heap.peek() {
            if watermark_ns.is_some_and(|w| top.row.ts_ns >= w) {
                break;
            }
            let Pending { row, .. } = self.heap.pop().expect("peeked");
            out.push(&EventRow {
                ts_ns: row.ts_ns,
                dur_ns: row.dur_ns,
                host: &self.host,
                pid: row.pid,
                tid: row.tid,
                rank: row.rank,
                comm: c_str(&row.comm),
                op: row.op,
                path: row.path.as_deref(),
                fd: row.fd,
                offset: row.offset,
                size: row.size,
                ret: row.ret,
                flags: row.flags,
            })?;
            n += 1;
        }
        Ok(n)
    }
}
