//! The syscalls iorepro records (x86_64 numbers) and what happens at each
//! one's entry and exit.
//!
//! Calls on a descriptor look the file up at entry, so a call on a file that
//! is not recorded (a pipe, a socket, /dev/null) costs no timestamp and no
//! state; the entry keeps the file's identity and position for the exit.
//! Path calls keep only their entry time; their exit reads the arguments back
//! from the saved user registers. `regs` is always the BTF-typed
//! `struct pt_regs *` of the raw syscall tracepoints, read with plain loads.

use aya_ebpf::helpers::bpf_ktime_get_ns;
use aya_ebpf::helpers::generated::bpf_probe_read_user;
use iorepro_common::{kind, IoEvent, SCRATCH_WORDS, VIA_COPY_FILE_RANGE, VIA_SENDFILE, VIA_SPLICE};

use crate::kernel::{self, file_of, file_window, identity, Traced, O_APPEND};
use crate::paths::{self, Name};
use crate::records;
use crate::runs;
use crate::slots::{self, Slot, IDLE};
use crate::sockets;
use crate::work;

pub const READ: u64 = 0;
pub const WRITE: u64 = 1;
pub const OPEN: u64 = 2;
pub const CLOSE: u64 = 3;
pub const STAT: u64 = 4;
pub const FSTAT: u64 = 5;
pub const LSTAT: u64 = 6;
pub const LSEEK: u64 = 8;
pub const MMAP: u64 = 9;
pub const PREAD64: u64 = 17;
pub const PWRITE64: u64 = 18;
pub const READV: u64 = 19;
pub const WRITEV: u64 = 20;
pub const ACCESS: u64 = 21;
pub const DUP2: u64 = 33;
pub const SENDFILE: u64 = 40;
pub const SENDTO: u64 = 44;
pub const RECVFROM: u64 = 45;
pub const FSYNC: u64 = 74;
pub const FDATASYNC: u64 = 75;
pub const TRUNCATE: u64 = 76;
pub const FTRUNCATE: u64 = 77;
pub const GETDENTS: u64 = 78;
pub const RENAME: u64 = 82;
pub const MKDIR: u64 = 83;
pub const RMDIR: u64 = 84;
pub const CREAT: u64 = 85;
pub const LINK: u64 = 86;
pub const UNLINK: u64 = 87;
pub const SYMLINK: u64 = 88;
pub const GETDENTS64: u64 = 217;
pub const OPENAT: u64 = 257;
pub const MKDIRAT: u64 = 258;
pub const NEWFSTATAT: u64 = 262;
pub const UNLINKAT: u64 = 263;
pub const RENAMEAT: u64 = 264;
pub const LINKAT: u64 = 265;
pub const SYMLINKAT: u64 = 266;
pub const FACCESSAT: u64 = 269;
pub const SPLICE: u64 = 275;
pub const DUP3: u64 = 292;
pub const PREADV: u64 = 295;
pub const PWRITEV: u64 = 296;
pub const RENAMEAT2: u64 = 316;
pub const COPY_FILE_RANGE: u64 = 326;
pub const PREADV2: u64 = 327;
pub const PWRITEV2: u64 = 328;
pub const STATX: u64 = 332;
pub const IO_URING_ENTER: u64 = 426;
pub const CLOSE_RANGE: u64 = 436;
pub const OPENAT2: u64 = 437;
pub const FACCESSAT2: u64 = 439;
// `tee` (276) is not followed: both its ends are pipes, so it touches no file.

const ALL: [u64; 52] = [
    READ,
    WRITE,
    OPEN,
    CLOSE,
    STAT,
    FSTAT,
    LSTAT,
    LSEEK,
    MMAP,
    PREAD64,
    PWRITE64,
    READV,
    WRITEV,
    ACCESS,
    DUP2,
    FSYNC,
    FDATASYNC,
    TRUNCATE,
    FTRUNCATE,
    GETDENTS,
    RENAME,
    MKDIR,
    RMDIR,
    CREAT,
    LINK,
    UNLINK,
    SYMLINK,
    GETDENTS64,
    OPENAT,
    MKDIRAT,
    NEWFSTATAT,
    UNLINKAT,
    RENAMEAT,
    LINKAT,
    SYMLINKAT,
    FACCESSAT,
    DUP3,
    PREADV,
    PWRITEV,
    RENAMEAT2,
    PREADV2,
    PWRITEV2,
    STATX,
    IO_URING_ENTER,
    CLOSE_RANGE,
    OPENAT2,
    FACCESSAT2,
    SENDFILE,
    SPLICE,
    COPY_FILE_RANGE,
    SENDTO,
    RECVFROM,
];

const BITMAP_WORDS: usize = 8;

const fn bitmap() -> [u64; BITMAP_WORDS] {
    let mut words = [0u64; BITMAP_WORDS];
    let mut i = 0;
    while i < ALL.len() {
        words[(ALL[i] / 64) as usize] |= 1 << (ALL[i] % 64);
        i += 1;
    }
    words
}

/// One bit per syscall number below 512: the first test of every entry, so
/// the rest of the host's syscalls cost a load and a mask.
static INTERESTING: [u64; BITMAP_WORDS] = bitmap();

#[inline(always)]
pub fn interesting(nr: u64) -> bool {
    if nr >= (BITMAP_WORDS * 64) as u64 {
        return false;
    }
    INTERESTING[(nr / 64) as usize & (BITMAP_WORDS - 1)] & (1 << (nr % 64)) != 0
}

/// The x86_64 `struct pt_regs` members that hold syscall arguments.
mod regs {
    pub const R10: usize = 56;
    pub const R9: usize = 64;
    pub const R8: usize = 72;
    pub const DX: usize = 96;
    pub const SI: usize = 104;
    pub const DI: usize = 112;
    pub const ORIG_AX: usize = 120;
}

/// A saved user register.
#[inline(always)]
fn reg(regs: *const u8, at: usize) -> u64 {
    // SAFETY: `regs` is the tracepoint's BTF-typed pt_regs and `at` one of
    // its u64 members; the verifier checks the load against the type.
    unsafe { core::ptr::read_volatile(regs.wrapping_add(at) as *const u64) }
}

#[inline(always)]
fn now() -> u64 {
    // SAFETY: helper without arguments.
    unsafe { bpf_ktime_get_ns() }
}

/// What a syscall's entry does.
enum Entry {
    /// A call on descriptor `fd`, recorded only if the file is one the trace
    /// records (`dirs`: directories too).
    OnFile { fd: u64, dirs: bool },
    /// A call that names paths: the entry time is all the exit needs.
    Named,
    /// A change to the descriptor table: only its exit matters (see `slots`).
    Table,
    /// A call that moves bytes from descriptor `from` to `to` in the kernel:
    /// recorded if either end is a file the trace records.
    Copy { from: u64, to: u64 },
}

#[inline(always)]
fn entry_of(nr: u64, regs: *const u8) -> Option<Entry> {
    Some(match nr {
        READ | WRITE | PREAD64 | PWRITE64 | READV | WRITEV | PREADV | PWRITEV | PREADV2
        | PWRITEV2 | LSEEK | FSYNC | FDATASYNC | FTRUNCATE | SENDTO | RECVFROM => Entry::OnFile {
            fd: reg(regs, regs::DI),
            dirs: false,
        },
        // A close is followed whatever the file: it moves the generation.
        CLOSE => Entry::OnFile {
            fd: reg(regs, regs::DI),
            dirs: true,
        },
        FSTAT | GETDENTS | GETDENTS64 => Entry::OnFile {
            fd: reg(regs, regs::DI),
            dirs: true,
        },
        MMAP => {
            const MAP_ANONYMOUS: u64 = 0x20;
            let fd = reg(regs, regs::R8);
            if reg(regs, regs::R10) & MAP_ANONYMOUS != 0 || (fd as i32) < 0 {
                return None;
            }
            Entry::OnFile {
                fd: fd as u32 as u64,
                dirs: false,
            }
        }
        DUP2 | DUP3 | CLOSE_RANGE => Entry::Table,
        SENDFILE => Entry::Copy {
            from: reg(regs, regs::SI),
            to: reg(regs, regs::DI),
        },
        SPLICE | COPY_FILE_RANGE => Entry::Copy {
            from: reg(regs, regs::DI),
            to: reg(regs, regs::DX),
        },
        // Followed only to be "in a call": page-cache fills while the ring
        // works for the thread are its requests', not faults (see main).
        IO_URING_ENTER => Entry::Named,
        _ => Entry::Named,
    })
}

#[inline(always)]
fn is_data_op(nr: u64) -> bool {
    matches!(
        nr,
        READ | WRITE | PREAD64 | PWRITE64 | READV | WRITEV | PREADV | PWRITEV | PREADV2 | PWRITEV2
    )
}

/// Entry of an interesting syscall of a traced thread.
#[inline(always)]
pub fn on_enter(regs: *const u8, nr: u64, pid_tgid: u64, traced: Traced) {
    let Some(entry) = entry_of(nr, regs) else {
        return;
    };
    let Some(slot) = slots::claim(pid_tgid) else {
        records::count_drop(iorepro_common::DROPPED_BUSY);
        return;
    };
    // SAFETY: the slot belongs to this thread.
    let s = unsafe { &mut *slot };
    if !is_data_op(nr) {
        // Only a data op can continue the thread's run.
        runs::flush(&mut s.run);
    }
    s.file = 0;
    s.socket = 0;
    match entry {
        Entry::OnFile { fd, dirs } => {
            if !learn_file(s, nr, fd, traced, dirs) && nr != CLOSE && s.socket == 0 {
                return; // not a recorded file or socket: nothing to do at exit
            }
        }
        Entry::Copy { from, to } => {
            if !learn_ends(s, nr, from, to, traced) {
                return; // pipes, sockets, files not recorded: nothing to do
            }
        }
        _ => {}
    }
    s.ts = now();
    s.nr = nr as u32;
}

/// Fills the slot with the file at `fd` if it is one the trace records;
/// returns whether it is.
#[inline(always)]
fn learn_file(s: &mut Slot, nr: u64, fd: u64, traced: Traced, dirs: bool) -> bool {
    // Plain read/write start at the file position: it is read at every call.
    let at_position = matches!(
        nr,
        READ | WRITE | READV | WRITEV | PREADV2 | PWRITEV2 | SENDFILE | SPLICE | COPY_FILE_RANGE
    );
    let (file, id) = match slots::cached(s, fd, traced) {
        Some((file, id, flags)) => {
            if id.is_socket() && on_socket(s, nr, &id) {
                return false;
            }
            if !(id.wanted() || dirs && id.is_dir()) {
                return false;
            }
            if at_position {
                let Some(w) = file_window(file, &mut s.scratch) else {
                    return false;
                };
                s.pos = w.pos;
                s.file_flags = w.flags;
            } else {
                s.file_flags = flags;
            }
            (file, id)
        }
        None => {
            let Some(file) = file_of(fd) else {
                return false;
            };
            let Some(w) = file_window(file, &mut s.scratch) else {
                return false;
            };
            let Some(id) = identity(w.inode, &mut s.scratch) else {
                return false;
            };
            slots::remember(s, fd, file, &id, w.flags, traced);
            if id.is_socket() && on_socket(s, nr, &id) {
                return false;
            }
            s.pos = w.pos;
            s.file_flags = w.flags;
            (file, id)
        }
    };
    if !(id.wanted() || dirs && id.is_dir()) {
        return false;
    }
    s.file = file;
    s.ino = id.ino;
    s.dev = id.dev;
    true
}

/// A call on a socket: marks the slot when its exit is to be recorded as
/// HTTP (see `sockets`), and returns whether it is; such a socket is then
/// no file of the trace's, whatever `--all-files` says.
#[inline(always)]
fn on_socket(s: &mut Slot, nr: u64, id: &kernel::Identity) -> bool {
    let Some(how) = socket_use(nr) else {
        return false;
    };
    if !sockets::followed(how, id.ino) {
        return false;
    }
    s.socket = 1;
    s.ino = id.ino;
    s.dev = id.dev;
    true
}

/// What a call does with a socket, for the calls `sockets` follows.
#[inline(always)]
fn socket_use(nr: u64) -> Option<sockets::Use> {
    Some(match nr {
        WRITE | SENDTO | WRITEV => sockets::Use::Send,
        READ | RECVFROM | READV => sockets::Use::Receive,
        CLOSE => sockets::Use::Close,
        _ => return None,
    })
}

/// Both ends of a copy call: the source goes to the slot's `src_*`, the
/// destination to its file; returns whether either is a recorded file.
#[inline(always)]
fn learn_ends(s: &mut Slot, nr: u64, from: u64, to: u64, traced: Traced) -> bool {
    let source = learn_file(s, nr, from, traced, false);
    s.src_file = if source { s.file } else { 0 };
    s.src_ino = s.ino;
    s.src_dev = s.dev;
    s.src_pos = s.pos;
    s.file = 0;
    let destination = learn_file(s, nr, to, traced, false);
    source || destination
}

/// Exit of a syscall whose entry left state in the slot.
#[inline(always)]
pub fn on_exit(regs: *const u8, ret: i64, pid_tgid: u64, slot: *mut Slot) {
    // SAFETY: the slot belongs to this thread.
    let s = unsafe { &mut *slot };
    let nr = s.nr as u64;
    s.nr = IDLE;
    if reg(regs, regs::ORIG_AX) != nr {
        return;
    }
    let dur = now().wrapping_sub(s.ts);
    let io = IoEvent {
        ts_ns: s.ts,
        dur_ns: dur,
        span_ns: dur,
        pid_tgid,
        ret,
        offset: -1,
        size: 0,
        ino: s.ino,
        dev: s.dev,
        fd: -1,
        kind: 0,
        flags: 0,
        calls: 1,
        via: iorepro_common::VIA_SYSCALL,
    };
    let (di, si, dx, r10) = (
        reg(regs, regs::DI),
        reg(regs, regs::SI),
        reg(regs, regs::DX),
        reg(regs, regs::R10),
    );
    if s.socket != 0 {
        if let Some(how) = socket_use(nr) {
            // A gathered send's head is its first buffer's (a client that
            // writes its headers and its body in one writev).
            let (buf, len) = match nr {
                WRITEV | READV => first_iovec(si),
                _ => (si, dx),
            };
            sockets::exit(how, s, di, buf, len, io);
        }
        return;
    }
    match nr {
        // On anything but a request socket, these two record nothing.
        SENDTO | RECVFROM => {}
        READ | PREAD64 | READV | PREADV | PREADV2 => data_op(kind::READ, nr, regs, s, io),
        WRITE | PWRITE64 | WRITEV | PWRITEV | PWRITEV2 => data_op(kind::WRITE, nr, regs, s, io),
        SENDFILE | SPLICE | COPY_FILE_RANGE => copy_op(nr, regs, s, io),
        CLOSE | DUP2 | DUP3 | CLOSE_RANGE => {
            // A file may have left the table: cached descriptors are stale.
            slots::bump_generation((pid_tgid >> 32) as u32);
            if nr == CLOSE && s.file != 0 {
                fd_op(kind::CLOSE, di, io);
            }
        }
        LSEEK => fd_op(
            kind::LSEEK,
            di,
            IoEvent {
                offset: si as i64,
                flags: dx as u32,
                ..io
            },
        ),
        FSYNC => fd_op(kind::FSYNC, di, io),
        FDATASYNC => fd_op(kind::FDATASYNC, di, io),
        FTRUNCATE => fd_op(kind::TRUNCATE, di, IoEvent { size: si, ..io }),
        FSTAT => fd_op(kind::STAT, di, io),
        GETDENTS | GETDENTS64 => fd_op(kind::GETDENTS, di, IoEvent { size: dx, ..io }),
        MMAP => fd_op(
            kind::MMAP,
            reg(regs, regs::R8) as u32 as u64,
            IoEvent {
                offset: reg(regs, regs::R9) as i64,
                size: si,
                flags: r10 as u32,
                ..io
            },
        ),
        _ => named_exit(nr, regs, s, io),
    }
}

/// read/write and their positional and vectored forms.
#[inline(always)]
fn data_op(op: u32, nr: u64, regs: *const u8, s: &mut Slot, mut io: IoEvent) {
    let (fd, buf, count, off) = (
        reg(regs, regs::DI),
        reg(regs, regs::SI),
        reg(regs, regs::DX),
        reg(regs, regs::R10) as i64,
    );
    let vectored = matches!(nr, READV | WRITEV | PREADV | PWRITEV | PREADV2 | PWRITEV2);
    io.size = if vectored {
        iov_sum(buf, count, work::SYSCALLS)
    } else {
        count
    };
    io.offset = match nr {
        PREAD64 | PWRITE64 | PREADV | PWRITEV => off,
        PREADV2 | PWRITEV2 if off != -1 => off,
        // An O_APPEND write went to the end, wherever the position was: the
        // position it left behind, minus what it wrote, is where it began.
        WRITE | WRITEV | PWRITEV2 if s.file_flags & O_APPEND != 0 => {
            kernel::position(s.file).map_or(-1, |pos| pos - io.ret.max(0))
        }
        _ => s.pos,
    };
    io.kind = op;
    io.fd = fd as i32;
    // User space tells O_DIRECT calls by it: every byte they move is the
    // storage's, with no page-cache fill to see.
    io.flags = s.file_flags;
    runs::record(&mut s.run, &io);
}

/// sendfile, splice, copy_file_range: the bytes moved are a read of the
/// source and a write of the destination, each recorded where that end is
/// a recorded file, with the call named in `via`. A failed call is one
/// record, on the source if it is recorded (as a failed read is).
#[inline(always)]
fn copy_op(nr: u64, regs: *const u8, s: &mut Slot, io: IoEvent) {
    let (di, si, dx, r10, r8) = (
        reg(regs, regs::DI),
        reg(regs, regs::SI),
        reg(regs, regs::DX),
        reg(regs, regs::R10),
        reg(regs, regs::R8),
    );
    // (from fd, its offset pointer, to fd, its offset pointer, length)
    let (from, from_off, to, to_off, len, via) = match nr {
        SENDFILE => (si, dx, di, 0, r10, VIA_SENDFILE),
        SPLICE => (di, si, dx, r10, r8, VIA_SPLICE),
        _ => (di, si, dx, r10, r8, VIA_COPY_FILE_RANGE),
    };
    let moved = io.ret.max(0);
    let io = IoEvent {
        // What moved is what the replay must move; a failure keeps the ask.
        size: if io.ret >= 0 { moved as u64 } else { len },
        via,
        ..io
    };
    if s.src_file != 0 {
        records::io(&IoEvent {
            kind: kind::READ,
            fd: from as i32,
            ino: s.src_ino,
            dev: s.src_dev,
            offset: copy_offset(from_off, s.src_pos, moved),
            ..io
        });
        if io.ret < 0 {
            return;
        }
    }
    if s.file != 0 {
        let offset = if to_off == 0 && s.file_flags & O_APPEND != 0 {
            // Appended at the end, wherever the position was (see data_op).
            kernel::position(s.file).map_or(-1, |pos| pos - moved)
        } else {
            copy_offset(to_off, s.pos, moved)
        };
        records::io(&IoEvent {
            kind: kind::WRITE,
            fd: to as i32,
            offset,
            ..io
        });
    }
}

/// Where one end of a copy call began: its offset argument when it gave
/// one (the kernel wrote it back advanced by what moved, so that is taken
/// off), else the file position at entry.
#[inline(always)]
fn copy_offset(ptr: u64, pos: i64, moved: i64) -> i64 {
    if ptr == 0 {
        return pos;
    }
    // SAFETY: probe read of user memory.
    match unsafe { aya_ebpf::helpers::bpf_probe_read_user(ptr as *const i64) } {
        Ok(end) => end - moved,
        Err(_) => -1,
    }
}

/// `IOV_MAX`: the most iovecs a vectored call takes.
const IOV_MAX: u64 = 1024;
/// iovecs read at once (into the work area's scratch buffer).
const IOV_BATCH: u64 = (SCRATCH_WORDS * 4 / 16) as u64;

/// The first buffer of an iovec array: (its address, its length); none
/// where the array cannot be read.
#[inline(always)]
fn first_iovec(iov: u64) -> (u64, u64) {
    // SAFETY: user reads that fail safely.
    let read =
        |at: u64| unsafe { aya_ebpf::helpers::bpf_probe_read_user((iov + at) as *const u64) };
    match (read(0), read(8)) {
        (Ok(base), Ok(len)) => (base, len),
        _ => (0, 0),
    }
}

/// Bytes a vectored call asked for: the sum of its iovecs' lengths, read in
/// batches into the work area `area` (one helper call per batch instead of
/// one per iovec). A global function, so the verifier follows the loop once;
/// a bounded loop, not `bpf_loop` (5.17+) with a callback (function
/// references: 5.13+), so that it loads on 5.10.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn iov_sum(iov: u64, count: u64, area: u64) -> u64 {
    let Some(w) = work::area(area) else {
        return 0;
    };
    // SAFETY: this CPU's work area, used by one program at a time.
    let scratch = unsafe { &mut (*w).scratch };
    let count = count.min(IOV_MAX);
    let mut total = 0u64;
    for batch in 0..IOV_MAX / IOV_BATCH {
        let first = batch * IOV_BATCH;
        if first >= count {
            break;
        }
        let n = (count - first).min(IOV_BATCH);
        // SAFETY: at most the scratch buffer's size, from user memory.
        let r = unsafe {
            bpf_probe_read_user(
                scratch.0.as_mut_ptr().cast(),
                (n * 16) as u32,
                iov.wrapping_add(first * 16) as *const core::ffi::c_void,
            )
        };
        if r != 0 {
            break;
        }
        for i in 0..IOV_BATCH {
            if i >= n {
                break;
            }
            // iov_len is the second word of struct iovec.
            let at = (i * 4 + 2) as usize;
            total += scratch.0[at] as u64 | (scratch.0[at + 1] as u64) << 32;
        }
    }
    total
}

#[inline(always)]
fn fd_op(op: u32, fd: u64, mut io: IoEvent) {
    io.kind = op;
    io.fd = fd as i32;
    records::io(&io);
}

const AT_FDCWD: i32 = -100;
const AT_EMPTY_PATH: u64 = 0x1000;
const AT_REMOVEDIR: u64 = 0x200;
const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
const O_WRONLY: u32 = 0o1;
const O_CREAT: u32 = 0o100;
const O_TRUNC: u32 = 0o1000;

/// Exit of a call that names paths. The arms only pick the arguments; one
/// call puts the record together (one copy of that code for the verifier to
/// follow, not one per syscall).
fn named_exit(nr: u64, regs: *const u8, s: &mut Slot, io: IoEvent) {
    let (di, si, dx, r10, r8) = (
        reg(regs, regs::DI),
        reg(regs, regs::SI),
        reg(regs, regs::DX),
        reg(regs, regs::R10),
        reg(regs, regs::R8),
    );
    let at = |dirfd: u64, path: u64| Name::At(dirfd as i32, path);
    let cwd = |path: u64| Name::At(AT_FDCWD, path);
    let (kind, first, second, flags, size) = match nr {
        OPEN => return open_exit(cwd(di), si as u32, s, io),
        CREAT => return open_exit(cwd(di), O_CREAT | O_WRONLY | O_TRUNC, s, io),
        OPENAT => return open_exit(at(di, si), dx as u32, s, io),
        OPENAT2 => {
            // struct open_how begins with the u64 flags.
            // SAFETY: probe read of user memory.
            let flags = unsafe { aya_ebpf::helpers::bpf_probe_read_user(dx as *const u64) };
            return open_exit(at(di, si), flags.unwrap_or(0) as u32, s, io);
        }
        NEWFSTATAT => return stat_at(di, si, r10, s, io),
        STATX => return stat_at(di, si, dx, s, io),
        STAT => (kind::STAT, cwd(di), None, 0, 0),
        LSTAT => (kind::STAT, cwd(di), None, AT_SYMLINK_NOFOLLOW, 0),
        ACCESS => (kind::ACCESS, cwd(di), None, si, 0),
        FACCESSAT | FACCESSAT2 => (kind::ACCESS, at(di, si), None, dx, 0),
        MKDIR => (kind::MKDIR, cwd(di), None, si, 0),
        MKDIRAT => (kind::MKDIR, at(di, si), None, dx, 0),
        RMDIR => (kind::RMDIR, cwd(di), None, 0, 0),
        TRUNCATE => (kind::TRUNCATE, cwd(di), None, 0, si),
        UNLINK => (kind::UNLINK, cwd(di), None, 0, 0),
        UNLINKAT if dx & AT_REMOVEDIR != 0 => (kind::RMDIR, at(di, si), None, dx, 0),
        UNLINKAT => (kind::UNLINK, at(di, si), None, dx, 0),
        RENAME => (kind::RENAME, cwd(di), Some(cwd(si)), 0, 0),
        RENAMEAT => (kind::RENAME, at(di, si), Some(at(dx, r10)), 0, 0),
        RENAMEAT2 => (kind::RENAME, at(di, si), Some(at(dx, r10)), r8, 0),
        LINK => (kind::LINK, cwd(di), Some(cwd(si)), 0, 0),
        LINKAT => (kind::LINK, at(di, si), Some(at(dx, r10)), r8, 0),
        SYMLINK => (kind::SYMLINK, Name::Verbatim(di), Some(cwd(si)), 0, 0),
        SYMLINKAT => (kind::SYMLINK, Name::Verbatim(di), Some(at(si, dx)), 0, 0),
        _ => return,
    };
    let Some(call) = paths::call(work::SYSCALLS) else {
        return;
    };
    *call = io;
    call.kind = kind;
    call.flags = flags as u32;
    call.size = size;
    call.ino = 0;
    call.dev = 0;
    paths::send(first, second, 0, work::SYSCALLS)
}

/// newfstatat / statx: a stat of a path, or with `AT_EMPTY_PATH` and an
/// empty path, of the descriptor itself (what `fstat` does).
fn stat_at(dirfd: u64, path: u64, flags: u64, s: &mut Slot, io: IoEvent) {
    if flags & AT_EMPTY_PATH != 0 {
        // SAFETY: probe read of user memory.
        let first = unsafe { aya_ebpf::helpers::bpf_probe_read_user(path as *const u8) };
        if first == Ok(0) {
            let traced = kernel::tgid_traced((io.pid_tgid >> 32) as u32);
            if learn_file(s, FSTAT, dirfd, traced, true) {
                let io = IoEvent {
                    ino: s.ino,
                    dev: s.dev,
                    ..io
                };
                fd_op(kind::STAT, dirfd, io);
            }
            return;
        }
    }
    let Some(call) = paths::call(work::SYSCALLS) else {
        return;
    };
    *call = io;
    call.kind = kind::STAT;
    call.flags = flags as u32;
    call.ino = 0;
    call.dev = 0;
    paths::send(Name::At(dirfd as i32, path), None, 0, work::SYSCALLS)
}

/// An open: the new descriptor's file is looked up (and cached for the
/// calls that follow); a failed open is recorded with its error.
fn open_exit(name: Name, flags: u32, s: &mut Slot, io: IoEvent) {
    let Some(call) = paths::call(work::SYSCALLS) else {
        return;
    };
    *call = io;
    call.kind = kind::OPEN;
    call.flags = flags;
    call.ino = 0;
    call.dev = 0;
    let mut mode = 0;
    if io.ret >= 0 {
        let fd = io.ret as u64;
        let traced = kernel::tgid_traced((io.pid_tgid >> 32) as u32);
        let Some(file) = file_of(fd) else {
            return;
        };
        let Some(w) = file_window(file, &mut s.scratch) else {
            return;
        };
        let Some(id) = identity(w.inode, &mut s.scratch) else {
            return;
        };
        slots::remember(s, fd, file, &id, w.flags, traced);
        // Directories are sent too: they name the start of later relative paths.
        if !id.wanted() && !id.is_dir() {
            return;
        }
        call.fd = fd as i32;
        call.ino = id.ino;
        call.dev = id.dev;
        mode = id.mode;
    }
    paths::send(name, None, mode, work::SYSCALLS);
}
