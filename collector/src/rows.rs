//! Kernel records become trace rows here: path and rank looked up, ops mapped
//! onto the trace's vocabulary, and rows held briefly in a reorder window so
//! they reach the writer in `ts` order (records arrive in exit order, rows are
//! stamped with the entry time). A row names its thread by tid; the thread's
//! name is looked up when the row is written.

use std::collections::VecDeque;
use std::rc::Rc;

use iorepro_common::{
    kind, IoEvent, COMM_LEN, VIA_COPY_FILE_RANGE, VIA_IO_URING, VIA_SENDFILE, VIA_SPLICE,
};
use iorepro_format::event::OwnedRow;
use iorepro_format::schema;
use iorepro_format::{Op, TraceResult, TraceWriter};

use crate::hashed_rows::Masker;
use crate::live::written::Written;

/// One row, owned until the reorder window lets it go.
pub type Row = OwnedRow<Rc<str>>;

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
        kind::STAT => Op::Stat,
        kind::ACCESS => Op::Access,
        kind::MKDIR => Op::Mkdir,
        kind::RMDIR => Op::Rmdir,
        kind::GETDENTS => Op::Getdents,
        kind::LINK => Op::Link,
        kind::SYMLINK => Op::Symlink,
        kind::WRITEBACK => Op::Writeback,
        _ => return None,
    })
}

/// The row of a kernel record: the columns every record fills the same
/// way; `wall_offset_ns` turns the kernel's monotonic clock into wall-clock
/// time.
pub fn row_from_event(
    ev: &IoEvent,
    op: Op,
    rank: Option<i32>,
    path: Option<Rc<str>>,
    wall_offset_ns: i64,
) -> Row {
    let has_fd = ev.fd >= 0;
    let (offset, size, flags) = match op {
        // (An io_uring open or statx names its request in `offset`.)
        Op::Read | Op::Write | Op::Mmap | Op::Fault => (
            Some(ev.offset),
            Some(ev.size as i64),
            (op == Op::Mmap).then_some(ev.flags as i32),
        ),
        Op::Lseek => (Some(ev.offset), None, Some(ev.flags as i32)),
        Op::Truncate | Op::Writeback => (None, Some(ev.size as i64), None),
        Op::Getdents => (None, Some(ev.size as i64), None),
        // Open flags; the AT_* flags of a stat, unlink, rename or link; the
        // mode of an access or mkdir.
        Op::Open
        | Op::Unlink
        | Op::Rename
        | Op::Stat
        | Op::Access
        | Op::Mkdir
        | Op::Rmdir
        | Op::Link
        | Op::Symlink => (None, None, Some(ev.flags as i32)),
        _ => (None, None, None),
    };
    Row {
        ts_ns: ev.ts_ns as i64 + wall_offset_ns,
        dur_ns: ev.dur_ns as i64,
        pid: (ev.pid_tgid >> 32) as i32,
        tid: ev.pid_tgid as u32 as i32,
        rank,
        op,
        path,
        fd: has_fd.then_some(ev.fd),
        offset,
        size,
        ret: ev.ret,
        flags,
        calls: ev.calls.max(1) as i64,
        span_ns: (ev.calls > 1).then_some(ev.span_ns as i64),
        path2: None,
        via: via_name(ev.via),
        exchange: None,
        from_storage: None,
    }
}

/// The `via` column of a record: null for a plain syscall.
pub fn via_name(via: u32) -> Option<&'static str> {
    Some(match via {
        VIA_IO_URING => schema::VIA_IO_URING,
        VIA_SENDFILE => schema::VIA_SENDFILE,
        VIA_COPY_FILE_RANGE => schema::VIA_COPY_FILE_RANGE,
        VIA_SPLICE => schema::VIA_SPLICE,
        _ => return None,
    })
}

/// The NUL-terminated string in a fixed buffer.
pub fn c_str(buf: &[u8]) -> &str {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..end]) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&buf[..e.valid_up_to()]).unwrap_or(""),
    }
}

/// Rows waiting until no earlier row can still arrive.
///
/// Records arrive in the order calls end and rows are stamped with their
/// start, so a row may arrive after rows that started later. Rows are kept in
/// buckets of `BUCKET_NS` of start time (a calendar queue): a row goes into
/// its bucket at once, and a bucket is sorted only when the watermark has
/// passed it and it is written out whole. (A binary heap of whole rows spent
/// most of the collector's time moving rows.) A row older than every bucket
/// left (a call that lasted longer than the reorder window) joins the oldest
/// bucket, and is written out of order: the writer starts a new segment for it.
pub struct Reorder {
    /// `buckets[i]` holds rows starting in `[base + i, base + i + 1) * BUCKET_NS`.
    buckets: VecDeque<Vec<(u64, Row)>>,
    /// Start of `buckets[0]`, in buckets.
    base: i64,
    seq: u64,
    len: usize,
    host: String,
    /// Emptied buckets kept for reuse.
    spare: Vec<Vec<(u64, Row)>>,
    /// Hashes every name on its way out (`--anonymize-key-file`).
    masker: Option<Masker>,
}

/// Width of a reorder bucket.
const BUCKET_NS: i64 = 1_000_000;

impl Reorder {
    pub fn new(host: String) -> Self {
        Reorder {
            buckets: VecDeque::new(),
            base: 0,
            seq: 0,
            len: 0,
            host,
            spare: Vec::new(),
            masker: None,
        }
    }

    /// From now on, rows leave with their names hashed (see [`Masker`]).
    pub fn mask_with(&mut self, masker: Masker) {
        self.masker = Some(masker);
    }

    pub fn push(&mut self, row: Row) {
        let b = row.ts_ns.div_euclid(BUCKET_NS);
        if self.buckets.is_empty() {
            self.base = b;
        }
        let i = (b - self.base).max(0) as usize;
        while self.buckets.len() <= i {
            let fresh = self.spare.pop().unwrap_or_default();
            self.buckets.push_back(fresh);
        }
        self.seq += 1;
        self.len += 1;
        self.buckets[i].push((self.seq, row));
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes every row stamped before `watermark_ns` (all with `None`),
    /// in `ts` order; `comm` names a row's thread.
    pub fn release(
        &mut self,
        watermark_ns: Option<i64>,
        comm: impl Fn(i32) -> [u8; COMM_LEN],
        written: &mut Written,
        out: &mut TraceWriter,
    ) -> TraceResult<usize> {
        let mut n = 0;
        // Whole buckets before the watermark's bucket; with no watermark, all.
        let last = watermark_ns.map(|w| w.div_euclid(BUCKET_NS));
        while !self.buckets.is_empty() && last.is_none_or(|l| self.base < l) {
            let mut bucket = self.buckets.pop_front().expect("not empty");
            self.base += 1;
            bucket.sort_unstable_by_key(|(seq, r)| (r.ts_ns, *seq));
            self.len -= bucket.len();
            for (_, row) in bucket.drain(..) {
                let name = comm(row.tid);
                let event = row.as_event(&self.host, c_str(&name));
                match self.masker.as_mut() {
                    None => out.push(&event)?,
                    Some(m) => {
                        let (masked, traits) = m.mask(&event);
                        out.push_with_traits(&masked, traits)?;
                    }
                }
                written.add(&event);
                n += 1;
            }
            self.spare.push(bucket);
        }
        Ok(n)
    }
}
