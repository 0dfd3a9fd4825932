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

use aya_ebpf::helpers::generated::bpf_probe_read_user_str;
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
        Some(Name::At(dirfd, user)) => (dirfd as i64, user),
        Some(Name::Verbatim(user)) => (VERBATIM, user),
        None => (VERBATIM, 0),
    };
    let mut args = PathArgs {
        io: *io,
        first: encode(Some(first)),
        second: encode(second),
        mode: mode as u64,
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
    let decode = |(dirfd, user): (i64, u64)| match dirfd {
        VERBATIM => Name::Verbatim(user),
        d => Name::At(d as i32, user),
    };
    let Some(buf) = PATH_BUF.get_ptr_mut(0) else {
        records::count_drop(io.kind);
        return 0;
    };
    // SAFETY: a per-CPU map value, used by one program at a time.
    let buf = unsafe { &mut *buf };
    let a = read(buf, PATH_EVENT_SIZE, decode(args.first), scratch);
    let at2 = PATH_EVENT_SIZE + a.len;
    let b = if args.second.1 != 0 {
        read(buf, at2, decode(args.second), scratch)
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
    let mut r = Read {
        len: 0,
        truncated: false,
        relative: false,
        dir: (0, 0),
    };
    if at > PATH_EVENT_SIZE + PATH_MAX {
        return r;
    }
    let (dirfd, user) = match name {
        Name::At(dirfd, user) => (Some(dirfd), user),
        Name::Verbatim(user) => (None, user),
    };
    // SAFETY: at most PATH_MAX bytes at `at`, inside the buffer (checked above).
    let n = unsafe {
        bpf_probe_read_user_str(
            buf.as_mut_ptr().add(at).cast(),
            PATH_MAX as u32,
            user as *const core::ffi::c_void,
        )
    };
    if n <= 0 {
        return r;
    }
    r.len = (n as usize - 1).min(PATH_MAX - 1);
    r.truncated = n as usize >= PATH_MAX;
    if let Some(dirfd) = dirfd {
        if r.len > 0 && buf[at] != b'/' {
            r.relative = true;
            r.dir = dir_of(dirfd, scratch);
        }
    }
    r
}
