//! Reading kernel structures: which tasks are traced, and what file a
//! descriptor refers to.
//!
//! Member offsets are read-only globals that the loader fills in from the
//! running kernel's BTF; the loader freezes them before the programs are
//! verified, so the verifier knows each one as a constant. Structures are
//! read with `bpf_probe_read_kernel`, in whole windows where several members
//! are needed (one helper call instead of one per member); plain loads are
//! used only on the small BTF-typed tracepoint arguments (`pt_regs`, a task
//! at fork), which are cheap to verify.

use aya_ebpf::helpers::{bpf_get_current_task, bpf_probe_read_kernel};
use aya_ebpf::macros::map;
use aya_ebpf::maps::{Array, CgroupArray};
use core::ptr::read_volatile;
use iorepro_common::{FILE_WINDOW, INODE_WINDOW, SCRATCH_WORDS};

use crate::work::{self, Looked};

/// Traced processes, indexed by tgid: 0 untraced, else a [`Traced`]
/// value. The loader sizes it to `pid_max`.
#[map]
pub static TRACED: Array<Traced> = Array::with_max_entries(1 << 22, 0);

/// The cgroup a cgroup capture follows (a directory descriptor, set by the loader).
#[map]
static CGROUP: CgroupArray = CgroupArray::with_max_entries(1, 0);

macro_rules! globals {
    ($($name:ident),* $(,)?) => {
        $(
            #[unsafe(no_mangle)]
            pub static $name: u64 = 0;
        )*
    };
}

globals!(
    OFF_TASK_FILES,
    OFF_TASK_FS,
    OFF_TASK_TGID,
    OFF_TASK_PID,
    OFF_TASK_FLAGS,
    OFF_FILES_FDT,
    OFF_FDT_MAX_FDS,
    OFF_FDT_FD,
    OFF_FILE_WINDOW_AT,
    OFF_FILE_INODE,
    OFF_FILE_FLAGS,
    OFF_FILE_POS,
    OFF_INODE_MODE,
    OFF_INODE_INO,
    OFF_INODE_SB,
    OFF_SB_DEV,
    OFF_FS_PWD_DENTRY,
    OFF_DENTRY_INODE,
    TRACE_CGROUP,
    TRACE_ALL_FILES,
    SLOT_MASK,
    TRACE_MERGE_RUNS,
    TRACE_REQUESTS,
    OFF_REQ_OPCODE,
    OFF_REQ_FD,
    OFF_RW_POS,
    OFF_RW_ADDR,
    OFF_RW_LEN,
    OFF_OPEN_DFD,
    OFF_OPEN_FILENAME,
    OFF_OPEN_FLAGS,
    OFF_STATX_DFD,
    OFF_STATX_FILENAME,
    OFF_CLOSE_FD,
    OFF_FILENAME_NAME,
    OFF_CQE_RES,
    OFF_FILL_INO,
    OFF_FILL_INDEX,
    OFF_FILL_DEV,
    OFF_FILL_ORDER,
    OFF_BIO_DEV,
    OFF_BIO_SECTORS,
    OFF_BIO_RWBS,
    OFF_WB_NAME,
    OFF_WB_INO,
    OFF_WB_WROTE,
);

#[inline(always)]
pub fn global(v: &'static u64) -> u64 {
    // SAFETY: a read of a read-only global the loader may have rewritten.
    unsafe { read_volatile(v) }
}

#[inline(always)]
pub fn slot_mask() -> u32 {
    global(&SLOT_MASK) as u32
}

#[inline(always)]
pub fn tracing_cgroup() -> bool {
    global(&TRACE_CGROUP) != 0
}

/// The `TRACED` value of a traced process: bit 0 set, bit 1 when its
/// descriptor table is shared with another process (no file cache then), and
/// above them its descriptor-table generation (see `slots`).
pub type Traced = u64;
pub const TRACED_BIT: u64 = 1;
pub const SHARED_FILES: u64 = 2;
pub const GEN_STEP: u64 = 4;

/// The current task's `TRACED` value, 0 when it is not traced. A
/// tgid-indexed array, whose lookup the verifier inlines; in a cgroup capture
/// membership is the cgroup's, and the array only keeps the generation.
#[inline(always)]
pub fn traced(pid_tgid: u64) -> Traced {
    let tgid = (pid_tgid >> 32) as u32;
    if tracing_cgroup() {
        // The cgroup is a directory's descriptor in the `CGROUP` array: the
        // helper asks the kernel whether `current` is in it or below, so
        // processes that join it after the capture began are followed too,
        // and no cgroup level (which a cgroup namespace hides) is needed.
        if !CGROUP.current_task_under_cgroup(0).unwrap_or(false) {
            return 0;
        }
        return match TRACED.get_ptr_mut(tgid) {
            Some(t) => {
                // SAFETY: array values are valid memory.
                unsafe {
                    if *t == 0 {
                        *t = TRACED_BIT;
                        // User space looks at it now, while it surely runs.
                        crate::records::process(iorepro_common::proc_kind::JOIN, tgid, 0);
                    }
                    *t
                }
            }
            None => TRACED_BIT | SHARED_FILES,
        };
    }
    tgid_traced(tgid)
}

#[inline(always)]
pub fn is_traced(pid_tgid: u64) -> bool {
    traced(pid_tgid) != 0
}

#[inline(always)]
pub fn tgid_traced(tgid: u32) -> Traced {
    TRACED.get(tgid).copied().unwrap_or(0)
}

/// A member of a BTF-typed kernel object, read with a plain load.
///
/// # Safety
/// `base` must be a pointer the verifier knows by its BTF type, and `offset`
/// a member of that type of size `size_of::<T>()`.
#[inline(always)]
unsafe fn member<T: Copy>(base: *const u8, offset: u64) -> T {
    unsafe { read_volatile(base.wrapping_add(offset as usize) as *const T) }
}

/// Reads `T` at `addr` with the fault-safe helper (for memory BTF cannot type).
#[inline(always)]
fn probe<T>(addr: u64) -> Option<T> {
    // SAFETY: bpf_probe_read_kernel faults safely on a bad address.
    unsafe { bpf_probe_read_kernel(addr as *const T).ok() }
}

pub const S_IFMT: u32 = 0o170000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFDIR: u32 = 0o040000;
pub const S_IFSOCK: u32 = 0o140000;
pub const O_APPEND: u32 = 0o2000;

/// The `struct file *` installed at descriptor `fd` of the current task.
/// (Only on a file-cache miss: four helper reads. Plain loads from the
/// BTF-typed `current` would save them, but checking each load against
/// `task_struct`'s type made the programs several times slower to verify,
/// and a capture's start-up with them.)
#[inline(always)]
pub fn file_of(fd: u64) -> Option<u64> {
    // SAFETY: helper without arguments.
    let task = unsafe { bpf_get_current_task() };
    let files: u64 = probe(task.wrapping_add(global(&OFF_TASK_FILES)))?;
    let fdt: u64 = probe(files.wrapping_add(global(&OFF_FILES_FDT)))?;
    if files == 0 || fdt == 0 {
        return None;
    }
    let max_fds: u32 = probe(fdt.wrapping_add(global(&OFF_FDT_MAX_FDS)))?;
    if fd >= max_fds as u64 {
        return None;
    }
    let table: u64 = probe(fdt.wrapping_add(global(&OFF_FDT_FD)))?;
    let file: u64 = probe(table.wrapping_add(fd * 8))?;
    (file != 0).then_some(file)
}

/// What one read of a `struct file` tells: its inode, open flags and position.
pub struct FileWindow {
    pub inode: u64,
    pub flags: u32,
    pub pos: i64,
}

/// Reads the window of `file` that holds its inode, flags and position into
/// `scratch` (a per-thread buffer in map memory: a stack buffer would make
/// every verifier state larger, and slower to compare).
#[inline(always)]
pub fn file_window(file: u64, scratch: &mut Scratch) -> Option<FileWindow> {
    let at = global(&OFF_FILE_WINDOW_AT);
    read_into(file.wrapping_add(at), &mut scratch.0[..FILE_WINDOW / 4])?;
    Some(FileWindow {
        inode: scratch.u64_at(global(&OFF_FILE_INODE).wrapping_sub(at)),
        flags: scratch.u32_at(global(&OFF_FILE_FLAGS).wrapping_sub(at)),
        pos: scratch.u64_at(global(&OFF_FILE_POS).wrapping_sub(at)) as i64,
    })
}

/// Fills `buf` from kernel memory at `addr`.
#[inline(always)]
fn read_into(addr: u64, buf: &mut [u32]) -> Option<()> {
    // SAFETY: the helper writes at most `buf`'s length and faults safely.
    let r = unsafe {
        aya_ebpf::helpers::generated::bpf_probe_read_kernel(
            buf.as_mut_ptr().cast(),
            (buf.len() * 4) as u32,
            addr as *const core::ffi::c_void,
        )
    };
    (r == 0).then_some(())
}

/// A window of a kernel structure, read at once; members are picked out by
/// their byte offset in the window (always a constant to the verifier).
pub use iorepro_common::Scratch;

trait Members {
    fn u32_at(&self, off: u64) -> u32;
    fn u64_at(&self, off: u64) -> u64;
    fn u16_at(&self, off: u64) -> u16;
}

impl Members for Scratch {
    #[inline(always)]
    fn u32_at(&self, off: u64) -> u32 {
        self.0[(off as usize / 4).min(SCRATCH_WORDS - 1)]
    }

    /// An 8-byte member (8-aligned in the structure, as the window's start is).
    #[inline(always)]
    fn u64_at(&self, off: u64) -> u64 {
        let i = (off as usize / 4).min(SCRATCH_WORDS - 2);
        self.0[i] as u64 | (self.0[i + 1] as u64) << 32
    }

    /// A 2-byte member at any even offset.
    #[inline(always)]
    fn u16_at(&self, off: u64) -> u16 {
        (self.u32_at(off) >> ((off as u32 & 2) * 8)) as u16
    }
}

/// The file position now: where an O_APPEND write left it, read at its exit.
#[inline(always)]
pub fn position(file: u64) -> Option<i64> {
    probe(file.wrapping_add(global(&OFF_FILE_POS)))
}

/// A file's identity as the trace records it.
#[derive(Clone, Copy)]
pub struct Identity {
    pub ino: u64,
    pub dev: u32,
    pub mode: u32,
}

impl Identity {
    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }

    pub fn is_socket(&self) -> bool {
        self.mode & S_IFMT == S_IFSOCK
    }

    /// Regular files, or everything when asked to record all file types.
    pub fn wanted(&self) -> bool {
        self.mode & S_IFMT == S_IFREG || global(&TRACE_ALL_FILES) != 0
    }
}

/// `(ino, dev, mode)` of an inode: one read of its head, one of its superblock's dev.
#[inline(always)]
pub fn identity(inode: u64, scratch: &mut Scratch) -> Option<Identity> {
    if inode == 0 {
        return None;
    }
    read_into(inode, &mut scratch.0[..INODE_WINDOW / 4])?;
    let mode = scratch.u16_at(global(&OFF_INODE_MODE)) as u32;
    let ino = scratch.u64_at(global(&OFF_INODE_INO));
    let sb = scratch.u64_at(global(&OFF_INODE_SB));
    let dev: u32 = probe(sb.wrapping_add(global(&OFF_SB_DEV)))?;
    Some(Identity { ino, dev, mode })
}

/// Whether the current task is one of io_uring's workers (`PF_IO_WORKER`),
/// whose page-cache fills serve ring requests rather than faults.
#[inline(always)]
pub fn io_worker() -> bool {
    const PF_IO_WORKER: u32 = 0x10;
    // SAFETY: helper without arguments.
    let task = unsafe { bpf_get_current_task() };
    probe::<u32>(task.wrapping_add(global(&OFF_TASK_FLAGS))).is_some_and(|f| f & PF_IO_WORKER != 0)
}

/// A file's identity (and whether it is one), for callers that need nothing
/// else from the file: a global function, so the verifier checks the walk
/// once rather than at every place it is used. `file` 0 means "the file at
/// descriptor `fd` of the current task". The result is left in the work
/// area `area` (see `work`).

#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn look_up_file(file: u64, fd: i64, area: u64) -> i64 {
    let Some(w) = work::area(area) else {
        return 0;
    };
    // SAFETY: this CPU's work area, used by one program at a time.
    let w = unsafe { &mut *w };
    let file = if file != 0 {
        Some(file)
    } else if fd >= 0 {
        file_of(fd as u64)
    } else {
        None
    };
    let Some(window) = file.and_then(|f| file_window(f, &mut w.scratch)) else {
        return 0;
    };
    match identity(window.inode, &mut w.scratch) {
        Some(id) => {
            w.looked = Looked {
                ino: id.ino,
                dev: id.dev,
                mode: id.mode,
            };
            1
        }
        None => 0,
    }
}

/// [`look_up_file`] as an `Identity`.
#[inline(always)]
pub fn file_identity(file: u64, fd: i64, area: u64) -> Option<Identity> {
    if look_up_file(file, fd, area) == 0 {
        return None;
    }
    // SAFETY: this CPU's work area, just written by `look_up_file`.
    let l = unsafe { &(*work::area(area)?).looked };
    Some(Identity {
        ino: l.ino,
        dev: l.dev,
        mode: l.mode,
    })
}

/// The descriptor table of a BTF-typed task.
///
/// # Safety
/// `task` must be a `struct task_struct *` the verifier knows by type.
#[inline(always)]
pub unsafe fn files_of(task: *const u8) -> u64 {
    unsafe { member(task, global(&OFF_TASK_FILES)) }
}

/// `(tgid, pid)` of a BTF-typed task.
///
/// # Safety
/// `task` must be a `struct task_struct *` the verifier knows by type.
#[inline(always)]
pub unsafe fn task_ids(task: *const u8) -> (u32, u32) {
    unsafe {
        (
            member(task, global(&OFF_TASK_TGID)),
            member(task, global(&OFF_TASK_PID)),
        )
    }
}

const AT_FDCWD: i32 = -100;

/// (inode, dev) of the directory a relative path starts from: `dirfd`'s
/// file, or the current working directory for `AT_FDCWD`.
#[inline(always)]
pub fn dir_of(dirfd: i32, area: u64) -> (u64, u32) {
    let ino = dir_identity(dirfd as i64, area);
    // SAFETY: this CPU's work area, just written by `dir_identity`.
    let dev = work::area(area).map_or(0, |w| unsafe { (*w).dir_dev });
    (ino, dev as u32)
}

/// [`dir_of`] as a global function: the verifier checks it once, on its
/// own, instead of at every place a path record is made (each of which
/// multiplied the states it explored). Returns the inode and leaves the
/// device in the work area's `dir_dev`; 0 when unknown.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn dir_identity(dirfd: i64, area: u64) -> u64 {
    let Some(w) = work::area(area) else {
        return 0;
    };
    // SAFETY: this CPU's work area, used by one program at a time.
    let w = unsafe { &mut *w };
    w.dir_dev = 0;
    let dirfd = dirfd as i32;
    let inode = if dirfd == AT_FDCWD {
        cwd_inode()
    } else if dirfd >= 0 {
        file_of(dirfd as u64)
            .and_then(|f| file_window(f, &mut w.scratch))
            .map(|window| window.inode)
    } else {
        None
    };
    match inode.and_then(|i| identity(i, &mut w.scratch)) {
        Some(id) => {
            w.dir_dev = id.dev as u64;
            id.ino
        }
        None => 0,
    }
}

fn cwd_inode() -> Option<u64> {
    // SAFETY: helper without arguments.
    let task = unsafe { bpf_get_current_task() };
    let fs: u64 = probe(task.wrapping_add(global(&OFF_TASK_FS)))?;
    let dentry: u64 = probe(fs.wrapping_add(global(&OFF_FS_PWD_DENTRY)))?;
    probe(dentry.wrapping_add(global(&OFF_DENTRY_INODE)))
}
