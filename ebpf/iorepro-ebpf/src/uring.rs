//! io_uring requests: file I/O that never passes through read/write
//! syscalls. A request is seen twice: when it is submitted (in the
//! submitting thread, or in the ring's SQPOLL thread, both of the traced
//! process) and when it completes (in whatever context the kernel completes
//! it). Submission keeps what the request asked for in `URING` under the
//! request's address; completion adds the result and the file, and sends
//! one record, stamped with the submission time and lasting until the
//! completion, attributed to the submitting thread.
//!
//! Opens and statx name a path, already copied into the kernel at
//! submission (and freed before completion): their path record is sent at
//! submission with `ret` pending, and the completion's record, which names
//! the request in `offset`, gives the result.

use aya_ebpf::helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel};
use aya_ebpf::macros::map;
use aya_ebpf::maps::HashMap;
use iorepro_common::{kind, IoEvent, RET_PENDING, VIA_IO_URING};

use crate::kernel::{self, file_identity, global};
use crate::paths::{self, Name};
use crate::records;
use crate::slots;
use crate::work;

/// io_uring requests of traced threads, from submission to completion.
#[map]
static URING: HashMap<u64, Request> = HashMap::with_max_entries(16384, 0);

const OP_READV: u8 = 1;
const OP_WRITEV: u8 = 2;
const OP_FSYNC: u8 = 3;
const OP_READ_FIXED: u8 = 4;
const OP_WRITE_FIXED: u8 = 5;
const OP_OPENAT: u8 = 18;
const OP_CLOSE: u8 = 19;
const OP_STATX: u8 = 21;
const OP_READ: u8 = 22;
const OP_WRITE: u8 = 23;
const OP_OPENAT2: u8 = 28;

/// What a request asked for, kept from its submission to its completion.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Request {
    ts: u64,
    pid_tgid: u64,
    /// The file position it asked for; -1 for "the current position".
    pos: i64,
    size: u64,
    /// The file of a close, looked up at submission (it is gone at completion).
    ino: u64,
    dev: u32,
    fd: i32,
    opcode: u32,
    _pad: u32,
}

#[inline(always)]
fn read<T>(addr: u64) -> Option<T> {
    // SAFETY: bpf_probe_read_kernel faults safely on a bad address.
    unsafe { bpf_probe_read_kernel(addr as *const T).ok() }
}

/// A request submitted by a traced thread.
pub fn submitted(req: u64) {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !kernel::is_traced(pid_tgid) {
        return;
    }
    let Some(opcode) = read::<u8>(req.wrapping_add(global(&kernel::OFF_REQ_OPCODE))) else {
        return;
    };
    let fd = read::<i32>(req.wrapping_add(global(&kernel::OFF_REQ_FD))).unwrap_or(-1);
    // SAFETY: helper without arguments.
    let ts = unsafe { bpf_ktime_get_ns() };
    let mut r = Request {
        ts,
        pid_tgid,
        pos: -1,
        size: 0,
        ino: 0,
        dev: 0,
        fd,
        opcode: opcode as u32,
        _pad: 0,
    };
    match opcode {
        OP_READ | OP_WRITE | OP_READ_FIXED | OP_WRITE_FIXED | OP_READV | OP_WRITEV => {
            r.pos = read(req.wrapping_add(global(&kernel::OFF_RW_POS))).unwrap_or(-1);
            let len: u32 = read(req.wrapping_add(global(&kernel::OFF_RW_LEN))).unwrap_or(0);
            r.size = if matches!(opcode, OP_READV | OP_WRITEV) {
                let iov: u64 = read(req.wrapping_add(global(&kernel::OFF_RW_ADDR))).unwrap_or(0);
                crate::syscalls::iov_sum(iov, len as u64, work::URING)
            } else {
                len as u64
            };
        }
        OP_FSYNC => {}
        OP_CLOSE => {
            r.fd = read(req.wrapping_add(global(&kernel::OFF_CLOSE_FD))).unwrap_or(-1);
            let id = file_identity(0, r.fd as i64, work::URING);
            match id {
                Some(id) if id.wanted() => {
                    r.ino = id.ino;
                    r.dev = id.dev;
                }
                _ => r.ino = 0,
            }
        }
        OP_OPENAT | OP_OPENAT2 | OP_STATX => named(req, opcode, &r),
        _ => return,
    }
    let _ = URING.insert(req, r, 0);
}

/// The path record of an open or statx, sent at submission.
fn named(req: u64, opcode: u8, r: &Request) {
    let (dfd_at, name_at) = if opcode == OP_STATX {
        (&kernel::OFF_STATX_DFD, &kernel::OFF_STATX_FILENAME)
    } else {
        (&kernel::OFF_OPEN_DFD, &kernel::OFF_OPEN_FILENAME)
    };
    let dirfd: i32 = read(req.wrapping_add(global(dfd_at))).unwrap_or(-1);
    let Some(filename) = read::<u64>(req.wrapping_add(global(name_at))) else {
        return;
    };
    let Some(name) = read::<u64>(filename.wrapping_add(global(&kernel::OFF_FILENAME_NAME))) else {
        return;
    };
    let flags = if opcode == OP_STATX {
        0
    } else {
        read::<u64>(req.wrapping_add(global(&kernel::OFF_OPEN_FLAGS))).unwrap_or(0)
    };
    let io = IoEvent {
        ts_ns: r.ts,
        dur_ns: 0,
        span_ns: 0,
        pid_tgid: r.pid_tgid,
        ret: RET_PENDING,
        offset: req as i64,
        size: 0,
        ino: 0,
        dev: 0,
        fd: -1,
        kind: if opcode == OP_STATX {
            kind::STAT
        } else {
            kind::OPEN
        },
        flags: flags as u32,
        calls: 1,
        via: VIA_IO_URING,
    };
    paths::record(&io, Name::Kernel(dirfd, name), None, 0, work::URING);
}

/// A request completed with `res`: its record, if it was one we follow.
pub fn completed(req: u64, res: i32) {
    // SAFETY: the value is copied out before the entry is removed.
    let Some(r) = (unsafe { URING.get(req) }).copied() else {
        return;
    };
    let _ = URING.remove(req);
    // SAFETY: helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    let opcode = r.opcode as u8;
    let mut io = IoEvent {
        ts_ns: r.ts,
        dur_ns: now.wrapping_sub(r.ts),
        span_ns: now.wrapping_sub(r.ts),
        pid_tgid: r.pid_tgid,
        ret: res as i64,
        offset: -1,
        size: r.size,
        ino: 0,
        dev: 0,
        fd: r.fd,
        kind: 0,
        flags: 0,
        calls: 1,
        via: VIA_IO_URING,
    };
    let here = bpf_get_current_pid_tgid() >> 32 == r.pid_tgid >> 32;
    io.kind = match opcode {
        OP_READ | OP_READ_FIXED | OP_READV => kind::READ,
        OP_WRITE | OP_WRITE_FIXED | OP_WRITEV => kind::WRITE,
        OP_FSYNC => kind::FSYNC,
        OP_CLOSE => {
            // A descriptor left the submitter's table: its cache is stale.
            slots::bump_generation((r.pid_tgid >> 32) as u32);
            if r.ino == 0 {
                return; // not a file the trace records
            }
            io.kind = kind::CLOSE;
            io.ino = r.ino;
            io.dev = r.dev;
            records::io(&io);
            return;
        }
        OP_OPENAT | OP_OPENAT2 | OP_STATX => {
            // The result of the path record sent at submission.
            io.offset = req as i64;
            io.size = 0;
            io.fd = -1;
            if opcode != OP_STATX {
                io.kind = kind::OPEN;
                if res >= 0 && here {
                    if let Some(id) = file_identity(0, res as i64, work::URING) {
                        io.ino = id.ino;
                        io.dev = id.dev;
                        io.fd = res;
                    }
                }
            } else {
                io.kind = kind::STAT;
            }
            records::io(&io);
            return;
        }
        _ => return,
    };
    // The file the request worked on: the request's own (its first member).
    let file: u64 = read(req).unwrap_or(0);
    if file != 0 {
        if let Some(id) = file_identity(file, -1, work::URING) {
            if !id.wanted() {
                return;
            }
            io.ino = id.ino;
            io.dev = id.dev;
        }
    }
    if matches!(io.kind, kind::READ | kind::WRITE) {
        // A request at "the current position" moved it by what it moved: the
        // request's own position, now past the data, less that.
        io.offset = if r.pos >= 0 {
            r.pos
        } else {
            let now_at: i64 = read(req.wrapping_add(global(&kernel::OFF_RW_POS))).unwrap_or(-1);
            if now_at >= 0 && res >= 0 {
                now_at - res as i64
            } else {
                -1
            }
        };
    }
    records::io(&io);
}
