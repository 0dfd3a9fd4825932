//! The syscalls iorepro records (x86_64 numbers) and how each one's exit
//! becomes a record: arguments come back from the saved user registers.

use aya_ebpf::helpers::{
    bpf_probe_read_kernel, bpf_probe_read_user, bpf_probe_read_user_str_bytes,
};
use iorepro_common::{kind, IoEvent, PathEvent, PATH_LEN};

use crate::kernel::{dir_of, file_info};
use crate::{output_io, reserve_io, submit_io};

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
pub const FSYNC: u64 = 74;
pub const FDATASYNC: u64 = 75;
pub const FTRUNCATE: u64 = 77;
pub const RENAME: u64 = 82;
pub const CREAT: u64 = 85;
pub const UNLINK: u64 = 87;
pub const OPENAT: u64 = 257;
pub const UNLINKAT: u64 = 263;
pub const RENAMEAT: u64 = 264;
pub const PREADV: u64 = 295;
pub const PWRITEV: u64 = 296;
pub const RENAMEAT2: u64 = 316;
pub const PREADV2: u64 = 327;
pub const PWRITEV2: u64 = 328;
pub const OPENAT2: u64 = 437;

#[inline(always)]
pub fn interesting(nr: u64) -> bool {
    matches!(
        nr,
        READ | WRITE
            | OPEN
            | CLOSE
            | LSEEK
            | MMAP
            | PREAD64
            | PWRITE64
            | READV
            | WRITEV
            | FSYNC
            | FDATASYNC
            | FTRUNCATE
            | RENAME
            | CREAT
            | UNLINK
            | OPENAT
            | UNLINKAT
            | RENAMEAT
            | PREADV
            | PWRITEV
            | RENAMEAT2
            | PREADV2
            | PWRITEV2
            | OPENAT2
    )
}

/// The syscall arguments, as saved in `struct pt_regs` (x86_64 layout, from
/// `r10` at byte 56 to `orig_ax` at byte 120).
#[repr(C)]
#[derive(Clone, Copy)]
struct Args {
    r10: u64,
    r9: u64,
    r8: u64,
    _ax: u64,
    _cx: u64,
    dx: u64,
    si: u64,
    di: u64,
    orig_ax: u64,
}

const REGS_ARGS_AT: usize = 56;
const REGS_DI_AT: usize = 112;

fn args(regs: *const u8) -> Option<Args> {
    // SAFETY: probe read of the saved registers.
    unsafe { bpf_probe_read_kernel(regs.wrapping_add(REGS_ARGS_AT) as *const Args).ok() }
}

/// At `close` entry (the descriptor is still open): the file, if recorded.
pub fn close_target(regs: *const u8) -> Option<(u64, u32)> {
    // SAFETY: probe read of the saved registers.
    let fd = unsafe { bpf_probe_read_kernel(regs.wrapping_add(REGS_DI_AT) as *const u64).ok()? };
    let f = file_info(fd)?;
    f.wanted().then_some((f.ino, f.dev))
}

pub fn on_exit(regs: *const u8, nr: u64, mut io: IoEvent) {
    let Some(a) = args(regs) else { return };
    if a.orig_ax != nr {
        return;
    }
    match nr {
        READ | PREAD64 | READV | PREADV | PREADV2 => data_op(kind::READ, nr, &a, io),
        WRITE | PWRITE64 | WRITEV | PWRITEV | PWRITEV2 => data_op(kind::WRITE, nr, &a, io),
        CLOSE => {
            io.kind = kind::CLOSE;
            io.fd = a.di as i32;
            output_io(&io);
        }
        LSEEK => {
            io.offset = a.si as i64;
            io.flags = a.dx as u32;
            fd_op(kind::LSEEK, a.di, io);
        }
        FSYNC => fd_op(kind::FSYNC, a.di, io),
        FDATASYNC => fd_op(kind::FDATASYNC, a.di, io),
        FTRUNCATE => {
            io.size = a.si;
            fd_op(kind::TRUNCATE, a.di, io);
        }
        MMAP => {
            const MAP_ANONYMOUS: u64 = 0x20;
            if a.r10 & MAP_ANONYMOUS != 0 || (a.r8 as i32) < 0 {
                return;
            }
            io.offset = a.r9 as i64;
            io.size = a.si;
            io.flags = a.r10 as u32;
            fd_op(kind::MMAP, a.r8 as u32 as u64, io);
        }
        OPEN => open_op(a.di, AT_FDCWD, a.si as u32, io),
        CREAT => open_op(a.di, AT_FDCWD, O_CREAT | O_WRONLY | O_TRUNC, io),
        OPENAT => open_op(a.si, a.di as i32, a.dx as u32, io),
        OPENAT2 => {
            // struct open_how begins with the u64 flags.
            // SAFETY: probe read of user memory.
            let flags = unsafe { bpf_probe_read_user(a.dx as *const u64) }.unwrap_or(0);
            open_op(a.si, a.di as i32, flags as u32, io)
        }
        UNLINK => path_op(kind::UNLINK, (AT_FDCWD, a.di), None, 0, io),
        UNLINKAT => path_op(kind::UNLINK, (a.di as i32, a.si), None, a.dx as u32, io),
        RENAME => path_op(
            kind::RENAME,
            (AT_FDCWD, a.di),
            Some((AT_FDCWD, a.si)),
            0,
            io,
        ),
        RENAMEAT => path_op(
            kind::RENAME,
            (a.di as i32, a.si),
            Some((a.dx as i32, a.r10)),
            0,
            io,
        ),
        RENAMEAT2 => path_op(
            kind::RENAME,
            (a.di as i32, a.si),
            Some((a.dx as i32, a.r10)),
            a.r8 as u32,
            io,
        ),
        _ => {}
    }
}

const AT_FDCWD: i32 = -100;
const O_WRONLY: u32 = 0o1;
const O_CREAT: u32 = 0o100;
const O_TRUNC: u32 = 0o1000;

/// read/write and their positional and vectored forms.
fn data_op(op: u32, nr: u64, a: &Args, mut io: IoEvent) {
    let Some(f) = file_info(a.di) else { return };
    if !f.wanted() {
        return;
    }
    let vectored = matches!(nr, READV | WRITEV | PREADV | PWRITEV | PREADV2 | PWRITEV2);
    io.size = if vectored {
        iov_total(a.si, a.dx)
    } else {
        a.dx
    };
    let explicit = match nr {
        PREAD64 | PWRITE64 | PREADV | PWRITEV => Some(a.r10 as i64),
        PREADV2 | PWRITEV2 if a.r10 as i64 != -1 => Some(a.r10 as i64),
        _ => None,
    };
    io.offset = match explicit {
        Some(off) => off,
        // The call advanced f_pos by what it moved (an O_APPEND write first
        // moved it to the end), so the start is the position minus that.
        None => {
            let pos = f.pos();
            if pos < 0 {
                -1
            } else {
                pos - io.ret.max(0)
            }
        }
    };
    io.kind = op;
    io.fd = a.di as i32;
    io.ino = f.ino;
    io.dev = f.dev;
    output_io(&io);
}

/// Most iovecs looked at; a larger vector's size counts its first entries only.
const MAX_IOV: u64 = 64;

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

fn fd_op(op: u32, fd: u64, mut io: IoEvent) {
    let Some(f) = file_info(fd) else { return };
    if !f.wanted() {
        return;
    }
    io.kind = op;
    io.fd = fd as i32;
    io.ino = f.ino;
    io.dev = f.dev;
    output_io(&io);
}

fn open_op(path: u64, dirfd: i32, flags: u32, mut io: IoEvent) {
    if io.ret < 0 {
        return;
    }
    let Some(f) = file_info(io.ret as u64) else {
        return;
    };
    // Directories are sent too: they name the start of later relative paths.
    if !f.wanted() && !f.is_dir() {
        return;
    }
    io.kind = kind::OPEN;
    io.fd = io.ret as i32;
    io.flags = flags;
    io.ino = f.ino;
    io.dev = f.dev;
    let Some(mut entry) = reserve_io::<PathEvent>(io.kind) else {
        return;
    };
    // SAFETY: the reserved record is written field by field, then submitted.
    let ev = unsafe { &mut *entry.as_mut_ptr() };
    ev.io = io;
    ev.mode = f.mode;
    ev.dir2_ino = 0;
    ev.dir2_dev = 0;
    ev.path2[0] = 0;
    let (ino, dev, truncated) = read_path(path, dirfd, &mut ev.path);
    ev.dir_ino = ino;
    ev.dir_dev = dev;
    ev.truncated = truncated;
    submit_io(entry);
}

fn path_op(op: u32, first: (i32, u64), second: Option<(i32, u64)>, flags: u32, mut io: IoEvent) {
    io.kind = op;
    io.flags = flags;
    let Some(mut entry) = reserve_io::<PathEvent>(io.kind) else {
        return;
    };
    // SAFETY: the reserved record is written field by field, then submitted.
    let ev = unsafe { &mut *entry.as_mut_ptr() };
    ev.io = io;
    ev.mode = 0;
    let (ino, dev, t1) = read_path(first.1, first.0, &mut ev.path);
    ev.dir_ino = ino;
    ev.dir_dev = dev;
    let (ino2, dev2, t2) = match second {
        Some((dirfd, p)) => read_path(p, dirfd, &mut ev.path2),
        None => {
            ev.path2[0] = 0;
            (0, 0, 0)
        }
    };
    ev.dir2_ino = ino2;
    ev.dir2_dev = dev2;
    ev.truncated = t1 | (t2 << 1);
    submit_io(entry);
}

/// Copies a user path; returns the start directory (for a relative path) and
/// whether the string was cut.
fn read_path(user: u64, dirfd: i32, buf: &mut [u8; PATH_LEN]) -> (u64, u32, u32) {
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
    let (ino, dev) = dir_of(dirfd);
    (ino, dev, truncated)
}
