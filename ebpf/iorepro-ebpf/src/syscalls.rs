//! The syscalls iorepro records (x86_64 numbers) and what happens at each
//! one's entry and exit.
//!
//! Calls on a descriptor look the file up at entry, so a call on a file that
//! is not recorded (a pipe, a socket, /dev/null) costs no timestamp and no
//! state; the entry keeps the file's identity and position for the exit.
//! Path calls keep only their entry time; their exit reads the arguments back
//! from the saved user registers. `regs` is always the BTF-typed
//! `struct pt_regs *` of the raw syscall tracepoints, read with plain loads.

use aya_ebpf::helpers::{bpf_ktime_get_ns, bpf_probe_read_user, bpf_probe_read_user_str_bytes};
use iorepro_common::{kind, IoEvent, PathEvent, PATH_LEN};

use crate::kernel::{self, dir_of, file_of, file_window, identity, Traced, O_APPEND};
use crate::records;
use crate::runs;
use crate::slots::{self, Slot, IDLE};

pub const READ: u64 = 0;
pub const WRITE: u64 = 1;
pub const OPEN: u64 = 2;
pub const CLOSE: u64 = 3;
pub const LSEEK: u64 = 8;
pub const MMAP: u64 = 9;
pub const PREAD64: u64 = 17;
pub const PWRITE64: u64 = 18;
pub const READV: u64 = 19;
pub const WRITEV: u64 = 20;
pub const DUP2: u64 = 33;
pub const FSYNC: u64 = 74;
pub const FDATASYNC: u64 = 75;
pub const FTRUNCATE: u64 = 77;
pub const RENAME: u64 = 82;
pub const CREAT: u64 = 85;
pub const UNLINK: u64 = 87;
pub const OPENAT: u64 = 257;
pub const UNLINKAT: u64 = 263;
pub const RENAMEAT: u64 = 264;
pub const DUP3: u64 = 292;
pub const PREADV: u64 = 295;
pub const PWRITEV: u64 = 296;
pub const RENAMEAT2: u64 = 316;
pub const PREADV2: u64 = 327;
pub const PWRITEV2: u64 = 328;
pub const CLOSE_RANGE: u64 = 436;
pub const OPENAT2: u64 = 437;

const ALL: [u64; 28] = [
    READ,
    WRITE,
    OPEN,
    CLOSE,
    LSEEK,
    MMAP,
    PREAD64,
    PWRITE64,
    READV,
    WRITEV,
    DUP2,
    FSYNC,
    FDATASYNC,
    FTRUNCATE,
    RENAME,
    CREAT,
    UNLINK,
    OPENAT,
    UNLINKAT,
    RENAMEAT,
    DUP3,
    PREADV,
    PWRITEV,
    RENAMEAT2,
    PREADV2,
    PWRITEV2,
    CLOSE_RANGE,
    OPENAT2,
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

/// Entry of an interesting syscall of a traced thread.
#[inline(always)]
pub fn on_enter(regs: *const u8, nr: u64, pid_tgid: u64, traced: Traced) {
    let data_op = matches!(
        nr,
        READ | WRITE | PREAD64 | PWRITE64 | READV | WRITEV | PREADV | PWRITEV | PREADV2 | PWRITEV2
    );
    let fd = match nr {
        _ if data_op => reg(regs, regs::DI),
        LSEEK | FSYNC | FDATASYNC | FTRUNCATE | CLOSE => reg(regs, regs::DI),
        MMAP => {
            const MAP_ANONYMOUS: u64 = 0x20;
            let fd = reg(regs, regs::R8);
            if reg(regs, regs::R10) & MAP_ANONYMOUS != 0 || (fd as i32) < 0 {
                return;
            }
            fd as u32 as u64
        }
        // Descriptor-table changes only matter at their exit (see `slots`).
        DUP2 | DUP3 | CLOSE_RANGE => u64::MAX,
        // Path calls: the entry time is all the exit needs.
        _ => u64::MAX - 1,
    };
    let Some(slot) = slots::claim(pid_tgid) else {
        records::count_drop(iorepro_common::DROPPED_BUSY);
        return;
    };
    // SAFETY: the slot belongs to this thread.
    let s = unsafe { &mut *slot };
    if !data_op {
        // Only a data op can continue the thread's run.
        runs::flush(&mut s.run);
    }
    s.file = 0;
    if fd == u64::MAX - 1 {
        s.ts = now();
        s.nr = nr as u32;
        return;
    }
    if fd != u64::MAX && !learn_file(s, nr, fd, traced) && nr != CLOSE {
        return; // not a recorded file: nothing to do at exit
    }
    s.ts = now();
    s.nr = nr as u32;
}

/// Fills the slot with the file at `fd` if it is one the trace records;
/// returns whether it is.
#[inline(always)]
fn learn_file(s: &mut Slot, nr: u64, fd: u64, traced: Traced) -> bool {
    // Plain read/write start at the file position: it is read at every call.
    let at_position = matches!(nr, READ | WRITE | READV | WRITEV | PREADV2 | PWRITEV2);
    let (file, id) = match slots::cached(s, fd, traced) {
        Some((file, id)) => {
            if !id.wanted() {
                return false;
            }
            if at_position {
                let Some(w) = file_window(file, &mut s.scratch) else {
                    return false;
                };
                s.pos = w.pos;
                s.file_flags = w.flags;
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
            slots::remember(s, fd, file, &id, traced);
            s.pos = w.pos;
            s.file_flags = w.flags;
            (file, id)
        }
    };
    if !id.wanted() {
        return false;
    }
    s.file = file;
    s.ino = id.ino;
    s.dev = id.dev;
    true
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
        _pad: 0,
    };
    match nr {
        READ | PREAD64 | READV | PREADV | PREADV2 => data_op(kind::READ, nr, regs, s, io),
        WRITE | PWRITE64 | WRITEV | PWRITEV | PWRITEV2 => data_op(kind::WRITE, nr, regs, s, io),
        CLOSE | DUP2 | DUP3 | CLOSE_RANGE => {
            // A file may have left the table: cached descriptors are stale.
            slots::bump_generation((pid_tgid >> 32) as u32);
            if nr == CLOSE && s.file != 0 {
                fd_op(kind::CLOSE, reg(regs, regs::DI), io);
            }
        }
        LSEEK => {
            let mut io = io;
            io.offset = reg(regs, regs::SI) as i64;
            io.flags = reg(regs, regs::DX) as u32;
            fd_op(kind::LSEEK, reg(regs, regs::DI), io);
        }
        FSYNC => fd_op(kind::FSYNC, reg(regs, regs::DI), io),
        FDATASYNC => fd_op(kind::FDATASYNC, reg(regs, regs::DI), io),
        FTRUNCATE => {
            let mut io = io;
            io.size = reg(regs, regs::SI);
            fd_op(kind::TRUNCATE, reg(regs, regs::DI), io);
        }
        MMAP => {
            let mut io = io;
            io.offset = reg(regs, regs::R9) as i64;
            io.size = reg(regs, regs::SI);
            io.flags = reg(regs, regs::R10) as u32;
            fd_op(kind::MMAP, reg(regs, regs::R8) as u32 as u64, io);
        }
        _ => path_exit(nr, regs, s, io),
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
        iov_total(buf, count)
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
    runs::record(&mut s.run, &io);
}

/// Most iovecs looked at; a larger vector's size counts its first entries only.
const MAX_IOV: u64 = 8;

fn iov_total(iov: u64, count: u64) -> u64 {
    let mut total = 0u64;
    for i in 0..MAX_IOV {
        if i >= count {
            break;
        }
        // iov_len is the second word of struct iovec.
        let at = iov.wrapping_add(i * 16 + 8) as *const u64;
        // SAFETY: probe read of user memory.
        total += unsafe { bpf_probe_read_user(at) }.unwrap_or(0);
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
const O_WRONLY: u32 = 0o1;
const O_CREAT: u32 = 0o100;
const O_TRUNC: u32 = 0o1000;

fn path_exit(nr: u64, regs: *const u8, s: &mut Slot, io: IoEvent) {
    let (di, si, dx, r10, r8) = (
        reg(regs, regs::DI),
        reg(regs, regs::SI),
        reg(regs, regs::DX),
        reg(regs, regs::R10),
        reg(regs, regs::R8),
    );
    match nr {
        OPEN => open_op(di, AT_FDCWD, si as u32, s, io),
        CREAT => open_op(di, AT_FDCWD, O_CREAT | O_WRONLY | O_TRUNC, s, io),
        OPENAT => open_op(si, di as i32, dx as u32, s, io),
        OPENAT2 => {
            // struct open_how begins with the u64 flags.
            // SAFETY: probe read of user memory.
            let flags = unsafe { bpf_probe_read_user(dx as *const u64) }.unwrap_or(0);
            open_op(si, di as i32, flags as u32, s, io)
        }
        UNLINK => path_op(kind::UNLINK, (AT_FDCWD, di), None, 0, s, io),
        UNLINKAT => path_op(kind::UNLINK, (di as i32, si), None, dx as u32, s, io),
        RENAME => path_op(kind::RENAME, (AT_FDCWD, di), Some((AT_FDCWD, si)), 0, s, io),
        RENAMEAT => path_op(
            kind::RENAME,
            (di as i32, si),
            Some((dx as i32, r10)),
            0,
            s,
            io,
        ),
        RENAMEAT2 => path_op(
            kind::RENAME,
            (di as i32, si),
            Some((dx as i32, r10)),
            r8 as u32,
            s,
            io,
        ),
        _ => {}
    }
}

fn open_op(path: u64, dirfd: i32, flags: u32, s: &mut Slot, mut io: IoEvent) {
    if io.ret < 0 {
        return;
    }
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
    slots::remember(s, fd, file, &id, traced);
    // Directories are sent too: they name the start of later relative paths.
    if !id.wanted() && !id.is_dir() {
        return;
    }
    io.kind = kind::OPEN;
    io.fd = fd as i32;
    io.flags = flags;
    io.ino = id.ino;
    io.dev = id.dev;
    let Some(mut entry) = records::reserve::<PathEvent>(io.kind) else {
        return;
    };
    // SAFETY: the reserved record is written field by field, then submitted.
    let ev = unsafe { &mut *entry.as_mut_ptr() };
    ev.io = io;
    ev.mode = id.mode;
    ev.dir2_ino = 0;
    ev.dir2_dev = 0;
    ev.path2[0] = 0;
    let (ino, dev, truncated) = read_path(path, dirfd, &mut ev.path, &mut s.scratch);
    ev.dir_ino = ino;
    ev.dir_dev = dev;
    ev.truncated = truncated;
    records::submit(entry);
}

fn path_op(
    op: u32,
    first: (i32, u64),
    second: Option<(i32, u64)>,
    flags: u32,
    s: &mut Slot,
    mut io: IoEvent,
) {
    io.kind = op;
    io.flags = flags;
    io.ino = 0;
    io.dev = 0;
    let Some(mut entry) = records::reserve::<PathEvent>(io.kind) else {
        return;
    };
    // SAFETY: the reserved record is written field by field, then submitted.
    let ev = unsafe { &mut *entry.as_mut_ptr() };
    ev.io = io;
    ev.mode = 0;
    let (ino, dev, t1) = read_path(first.1, first.0, &mut ev.path, &mut s.scratch);
    ev.dir_ino = ino;
    ev.dir_dev = dev;
    let (ino2, dev2, t2) = match second {
        Some((dirfd, p)) => read_path(p, dirfd, &mut ev.path2, &mut s.scratch),
        None => {
            ev.path2[0] = 0;
            (0, 0, 0)
        }
    };
    ev.dir2_ino = ino2;
    ev.dir2_dev = dev2;
    ev.truncated = t1 | (t2 << 1);
    records::submit(entry);
}

/// Copies a user path; returns the start directory (for a relative path) and
/// whether the string was cut.
fn read_path(
    user: u64,
    dirfd: i32,
    buf: &mut [u8; PATH_LEN],
    scratch: &mut kernel::Scratch,
) -> (u64, u32, u32) {
    // SAFETY: probe read of user memory into the reserved record.
    let len = match unsafe { bpf_probe_read_user_str_bytes(user as *const u8, buf) } {
        Ok(s) => s.len(),
        Err(_) => {
            buf[0] = 0;
            return (0, 0, 0);
        }
    };
    let truncated = (len + 1 >= PATH_LEN) as u32;
    if buf[0] == b'/' {
        return (0, 0, truncated);
    }
    let (ino, dev) = dir_of(dirfd, scratch);
    (ino, dev, truncated)
}
