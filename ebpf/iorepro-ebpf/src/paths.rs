//! Records of calls that name paths: open, stat, access, mkdir, rmdir,
//! unlink, rename, link, symlink, truncate. Failures are recorded too (a
//! loader probing for files that do not exist is load on a metadata server),
//! with the error in `ret`.
//!
//! A record is put together in a per-CPU buffer: the [`PathEvent`] header,
//! then the path strings back to back, each as long as it is (up to
//! `PATH_MAX`), and handed to the ring with its real length. A fixed-size
//! reservation would either cut long paths or move 8 KiB for every open.
//! The programs run with preemption off, so nothing else on the CPU uses the
//! buffer meanwhile.

use aya_ebpf::helpers::generated::{bpf_probe_read_kernel_str, bpf_probe_read_user_str};
use iorepro_common::{IoEvent, PathEvent, PATH_EVENT_SIZE, PATH_MAX, PATH_RECORD_MAX};

use crate::kernel::{dir_of, Scratch};
use crate::records;
use crate::PATH_BUF;

/// How a path argument is to be read.
#[derive(Clone, Copy)]
pub enum Name {
    /// A path resolved by the kernel: absolute, or relative to `dirfd`
    /// (`AT_FDCWD` for the working directory).
    At(i32, u64),
    /// A string the kernel stores as it is (a symlink's target).
    Verbatim(u64),
    /// A path already copied into the kernel (an io_uring request's), and
    /// the directory descriptor it is relative to.
    Kernel(i32, u64),
}

/// What reading one path into the buffer gave.
struct Read {
    len: usize,
    truncated: bool,
    relative: bool,
    dir: (u64, u32),
}

/// Sends a path record: `io` with `first` and, for rename, link and
/// symlink, `second`; `mode` is the `S_IF*` type of an opened file.
#[inline(always)]
pub fn record(io: &IoEvent, first: Name, second: Option<Name>, mode: u32, scratch: &mut Scratch) {
    let encode = |n: Option<Name>| match n {
        Some(Name::At(dirfd, user)) | Some(Name::Kernel(dirfd, user)) => (dirfd as i64, user),
        Some(Name::Verbatim(user)) => (VERBATIM, user),
        None => (VERBATIM, 0),
    };
    let in_kernel = |n: Option<Name>| matches!(n, Some(Name::Kernel(..))) as u64;
    let mut args = PathArgs {
        io: *io,
        first: encode(Some(first)),
        second: encode(second),
        mode: mode as u64,
        kernel: in_kernel(Some(first)) | in_kernel(second) << 1,
    };
    path_record(&mut args, scratch);
}

/// A `dirfd` no call uses: the name is a verbatim string.
const VERBATIM: i64 = i64::MIN;

/// The arguments of [`path_record`], which a BPF function (five registers)
/// cannot take one by one.
#[repr(C)]
pub struct PathArgs {
    io: IoEvent,
    /// (dirfd or VERBATIM, user pointer; 0 for none).
    first: (i64, u64),
    second: (i64, u64),
    mode: u64,
    /// Bit 0: `first` is a kernel string; bit 1: `second` is.
    kernel: u64,
}

/// [`record`] as a global function: the verifier checks it once, on its
/// own, instead of once for every call that makes a path record.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn path_record(args: *mut PathArgs, scratch: *mut Scratch) -> i64 {
    if args.is_null() || scratch.is_null() {
        return 0;
    }
    // SAFETY: checked non-null; the caller's stack and its slot's scratch.
    let (args, scratch) = unsafe { (&*args, &mut *scratch) };
    let io = &args.io;
    let decode = |(dirfd, user): (i64, u64), kernel: bool| match dirfd {
        VERBATIM => Name::Verbatim(user),
        d if kernel => Name::Kernel(d as i32, user),
        d => Name::At(d as i32, user),
    };
    let Some(buf) = PATH_BUF.get_ptr_mut(0) else {
        records::count_drop(io.kind);
        return 0;
    };
    // SAFETY: a per-CPU map value, used by one program at a time.
    let buf = unsafe { &mut *buf };
    let a = read(
        buf,
        PATH_EVENT_SIZE,
        decode(args.first, args.kernel & 1 != 0),
        scratch,
    );
    let at2 = PATH_EVENT_SIZE + a.len;
    let b = if args.second.1 != 0 {
        read(buf, at2, decode(args.second, args.kernel & 2 != 0), scratch)
    } else {
        Read {
            len: 0,
            truncated: false,
            relative: false,
            dir: (0, 0),
        }
    };
    let header = PathEvent {
        io: *io,
        dir_ino: a.dir.0,
        dir2_ino: b.dir.0,
        dir_dev: a.dir.1,
        dir2_dev: b.dir.1,
        mode: args.mode as u32,
        truncated: a.truncated as u16 | (b.truncated as u16) << 1,
        relative: a.relative as u16 | (b.relative as u16) << 1,
        path_len: a.len as u32,
        path2_len: b.len as u32,
    };
    // SAFETY: the buffer starts 8-aligned and holds a header.
    unsafe { core::ptr::write_unaligned(buf.as_mut_ptr() as *mut PathEvent, header) };
    let total = at2 + b.len;
    if let Some(record) = buf.get(..total.min(PATH_RECORD_MAX)) {
        records::bytes(record, io.kind, io.calls as u64);
    }
    0
}

/// Reads a path argument into `buf` at `at` (without its NUL).
#[inline(always)]
fn read(buf: &mut [u8; PATH_RECORD_MAX], at: usize, name: Name, scratch: &mut Scratch) -> Read {
    let (dirfd, src, how) = match name {
        Name::At(dirfd, user) => (dirfd as i64, user, READ_USER),
        Name::Verbatim(user) => (VERBATIM, user, READ_USER),
        Name::Kernel(dirfd, addr) => (dirfd as i64, addr, READ_KERNEL),
    };
    let mut out = ReadOut {
        len: 0,
        flags: 0,
        dir_ino: 0,
        dir_dev: 0,
    };
    let mut args = ReadArgs {
        at: at as u64,
        dirfd,
        src,
        how,
    };
    read_name(buf, &mut args, scratch, &mut out);
    Read {
        len: (out.len as usize).min(PATH_MAX - 1),
        truncated: out.flags & TRUNCATED != 0,
        relative: out.flags & RELATIVE != 0,
        dir: (out.dir_ino, out.dir_dev),
    }
}

const READ_USER: u64 = 0;
const READ_KERNEL: u64 = 1;
const TRUNCATED: u64 = 1;
const RELATIVE: u64 = 2;

#[repr(C)]
pub struct ReadArgs {
    at: u64,
    /// The directory descriptor, or VERBATIM.
    dirfd: i64,
    src: u64,
    /// READ_USER or READ_KERNEL.
    how: u64,
}

#[repr(C)]
pub struct ReadOut {
    len: u64,
    flags: u64,
    dir_ino: u64,
    dir_dev: u32,
}

/// The reading of one path argument, as a global function: checked once by
/// the verifier, not once per path a record has.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn read_name(
    buf: *mut [u8; PATH_RECORD_MAX],
    args: *mut ReadArgs,
    scratch: *mut Scratch,
    out: *mut ReadOut,
) -> i64 {
    if buf.is_null() || args.is_null() || scratch.is_null() || out.is_null() {
        return 0;
    }
    // SAFETY: checked non-null; the per-CPU buffer, the caller's stack and
    // a scratch buffer.
    let (buf, args, scratch, out) = unsafe { (&mut *buf, &*args, &mut *scratch, &mut *out) };
    let at = args.at as usize;
    if at > PATH_EVENT_SIZE + PATH_MAX {
        return 0;
    }
    let dst = buf.as_mut_ptr().wrapping_add(at).cast();
    let src = args.src as *const core::ffi::c_void;
    // SAFETY: at most PATH_MAX bytes at `at`, inside the buffer (checked above).
    let n = unsafe {
        if args.how == READ_KERNEL {
            bpf_probe_read_kernel_str(dst, PATH_MAX as u32, src)
        } else {
            bpf_probe_read_user_str(dst, PATH_MAX as u32, src)
        }
    };
    if n <= 0 {
        return 0;
    }
    out.len = (n as u64 - 1).min(PATH_MAX as u64 - 1);
    if n as usize >= PATH_MAX {
        out.flags |= TRUNCATED;
    }
    if args.dirfd != VERBATIM && out.len > 0 && buf[at] != b'/' {
        out.flags |= RELATIVE;
        let (ino, dev) = dir_of(args.dirfd as i32, scratch);
        out.dir_ino = ino;
        out.dir_dev = dev;
    }
    0
}
