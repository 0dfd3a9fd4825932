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
use aya_ebpf::macros::map;
use aya_ebpf::maps::PerCpuArray;
use iorepro_common::{IoEvent, PathEvent, PATH_EVENT_SIZE, PATH_MAX, PATH_RECORD_MAX};

use crate::kernel::dir_of;
use crate::records;
use crate::work::{self, ReadOut};

/// Where a path record is put together before it goes to the ring.
#[map]
static PATH_BUF: PerCpuArray<[u8; PATH_RECORD_MAX]> = PerCpuArray::with_max_entries(1, 0);

/// Starts a record in the buffer: its call and, for an open, the file's
/// type; no directories, no paths yet.
///
/// # Safety
/// `header` is the start of this CPU's record buffer ([`buffer`]).
#[inline(always)]
pub unsafe fn begin(header: *mut PathEvent, io: IoEvent, mode: u32) {
    // SAFETY: as the caller says.
    unsafe {
        (*header).io = io;
        (*header).mode = mode;
        (*header).truncated = 0;
        (*header).relative = 0;
        (*header).dir_ino = 0;
        (*header).dir2_ino = 0;
        (*header).dir_dev = 0;
        (*header).dir2_dev = 0;
        (*header).path_len = 0;
        (*header).path2_len = 0;
    }
}

/// This CPU's record buffer, shared with the socket records (`sockets`),
/// which are put together the same way.
#[inline(always)]
pub fn buffer() -> Option<*mut [u8; PATH_RECORD_MAX]> {
    PATH_BUF.get_ptr_mut(0)
}

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

/// Sends a path record: `io` with `first` and, for rename, link and
/// symlink, `second`; `mode` is the `S_IF*` type of an opened file. `area`
/// is the caller's work area (see `work`).
#[inline(always)]
pub fn record(io: &IoEvent, first: Name, second: Option<Name>, mode: u32, area: u64) {
    if let Some(call) = call(area) {
        *call = *io;
        send(first, second, mode, area);
    }
}

/// The call a path record describes, filled in place in the work area
/// `area` (no copy on the stack, which a call chain shares with its
/// callees) and then sent with [`send`].
#[inline(always)]
pub fn call(area: u64) -> Option<&'static mut IoEvent> {
    // SAFETY: this CPU's work area, used by one program at a time.
    work::area(area).map(|w| unsafe { &mut (*w).path.io })
}

/// Sends the path record of the call left in the work area by [`call`].
#[inline(always)]
pub fn send(first: Name, second: Option<Name>, mode: u32, area: u64) {
    let encode = |n: Option<Name>| match n {
        Some(Name::At(dirfd, user)) | Some(Name::Kernel(dirfd, user)) => (dirfd as i64, user),
        Some(Name::Verbatim(user)) => (VERBATIM, user),
        None => (VERBATIM, 0),
    };
    let in_kernel = |n: Option<Name>| matches!(n, Some(Name::Kernel(..))) as u64;
    let Some(w) = work::area(area) else {
        return;
    };
    // SAFETY: this CPU's work area, used by one program at a time.
    unsafe {
        let a = &mut (*w).path;
        a.first = encode(Some(first));
        a.second = encode(second);
        a.mode = mode as u64;
        a.kernel = in_kernel(Some(first)) | in_kernel(second) << 1;
    }
    path_record(area);
}

/// A `dirfd` no call uses: the name is a verbatim string.
const VERBATIM: i64 = i64::MIN;

/// [`send`] as a global function: the verifier checks it once, on its
/// own, instead of once for every call that makes a path record. The
/// header is written in place in the buffer, member by member.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn path_record(area: u64) -> i64 {
    let Some(w) = work::area(area) else {
        return 0;
    };
    let Some(buf) = PATH_BUF.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: the per-CPU buffer (8-aligned, it holds a header) and this
    // CPU's work area, each used by one program at a time; `read_name`
    // writes only the work area's `read` and `scratch`, and the buffer
    // past the header.
    unsafe {
        let header = buf as *mut PathEvent;
        let args = &(*w).path;
        begin(header, args.io, args.mode as u32);
        let kernel = args.kernel;
        let second = args.second;
        let len = read(
            header,
            0,
            PATH_EVENT_SIZE,
            args.first,
            kernel & 1 != 0,
            area,
        );
        (*header).path_len = len as u32;
        let mut total = PATH_EVENT_SIZE + len;
        if second.1 != 0 {
            let len2 = read(header, 1, total, second, kernel & 2 != 0, area);
            (*header).path2_len = len2 as u32;
            total += len2;
        }
        let (kind, calls) = ((*header).io.kind, (*header).io.calls);
        if let Some(record) = (*buf).get(..total.min(PATH_RECORD_MAX)) {
            records::bytes(record, kind, calls as u64);
        }
    }
    0
}

/// Reads path argument `which` (0 or 1) of `header`'s record into the
/// buffer at `at` (without its NUL) and notes in the header how it went;
/// returns its length.
///
/// # Safety
/// `header` is the start of `PATH_BUF`.
#[inline(always)]
unsafe fn read(
    header: *mut PathEvent,
    which: u16,
    at: usize,
    (dirfd, src): (i64, u64),
    kernel: bool,
    area: u64,
) -> usize {
    let how = if kernel { READ_KERNEL } else { READ_USER };
    read_name(at as u64, dirfd, src, how, area);
    let Some(w) = work::area(area) else {
        return 0;
    };
    // SAFETY: this CPU's work area, just written by `read_name`; the header
    // as the caller says.
    unsafe {
        let out = &(*w).read;
        (*header).truncated |= ((out.flags & TRUNCATED != 0) as u16) << which;
        (*header).relative |= ((out.flags & RELATIVE != 0) as u16) << which;
        if which == 0 {
            (*header).dir_ino = out.dir_ino;
            (*header).dir_dev = out.dir_dev;
        } else {
            (*header).dir2_ino = out.dir_ino;
            (*header).dir2_dev = out.dir_dev;
        }
        (out.len as usize).min(PATH_MAX - 1)
    }
}

const READ_USER: u64 = 0;
const READ_KERNEL: u64 = 1;
const TRUNCATED: u64 = 1;
const RELATIVE: u64 = 2;

/// The reading of one path argument into `PATH_BUF` at `at`, as a global
/// function: checked once by the verifier, not once per path a record has.
/// `dirfd` is the directory descriptor or VERBATIM; `how` READ_USER or
/// READ_KERNEL.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn read_name(at: u64, dirfd: i64, src: u64, how: u64, area: u64) -> i64 {
    let Some(w) = work::area(area) else {
        return 0;
    };
    // SAFETY: this CPU's work area, used by one program at a time.
    let out = unsafe { &mut (*w).read };
    *out = ReadOut {
        len: 0,
        flags: 0,
        dir_ino: 0,
        dir_dev: 0,
        _pad: 0,
    };
    let Some(buf) = PATH_BUF.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: a per-CPU map value, used by one program at a time.
    let buf = unsafe { &mut *buf };
    let at = at as usize;
    if at > PATH_EVENT_SIZE + PATH_MAX {
        return 0;
    }
    let dst = buf.as_mut_ptr().wrapping_add(at).cast();
    let src = src as *const core::ffi::c_void;
    // SAFETY: at most PATH_MAX bytes at `at`, inside the buffer (checked above).
    let n = unsafe {
        if how == READ_KERNEL {
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
    if dirfd != VERBATIM && out.len > 0 && buf[at] != b'/' {
        out.flags |= RELATIVE;
        let (ino, dev) = dir_of(dirfd as i32, area);
        // SAFETY: as above; `dir_of` wrote other members of the area.
        let out = unsafe { &mut (*w).read };
        out.dir_ino = ino;
        out.dir_dev = dev;
    }
    0
}
