//! Reading kernel structures: which tasks are traced, and what file a
//! descriptor refers to.
//!
//! Member offsets are read-only globals that the loader fills in from the
//! running kernel's BTF. The loader freezes them before the programs are
//! verified, so the verifier knows each one as a constant: starting from the
//! BTF-typed `current` task, `task->files->fdt` is then walked with plain
//! loads, checked against the kernel's types, instead of a helper call per
//! pointer (each costs about 30 ns). Only where BTF stops typing the chain
//! (the `struct file *` array, and what hangs off a `struct file`) are
//! `bpf_probe_read_kernel` calls left, and they read whole windows of a
//! structure at once rather than one member each.

use aya_ebpf::helpers::{
    bpf_get_current_ancestor_cgroup_id, bpf_get_current_task_btf, bpf_probe_read_kernel,
};
use core::ptr::read_volatile;
use iorepro_common::{FILE_WINDOW, INODE_WINDOW};

use crate::TRACED;

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
    TRACE_CGROUP_ID,
    TRACE_CGROUP_LEVEL,
    TRACE_ALL_FILES,
    SLOT_MASK,
    TRACE_MERGE_RUNS,
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
    global(&TRACE_CGROUP_ID) != 0
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
    let cgroup = global(&TRACE_CGROUP_ID);
    if cgroup != 0 {
        let level = global(&TRACE_CGROUP_LEVEL) as i32;
        // SAFETY: helper without pointer arguments.
        if unsafe { bpf_get_current_ancestor_cgroup_id(level) } != cgroup {
            return 0;
        }
        return match TRACED.get_ptr_mut(tgid) {
            Some(t) => {
                // SAFETY: array values are valid memory.
                unsafe {
                    if *t == 0 {
                        *t = TRACED_BIT;
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
pub const O_APPEND: u32 = 0o2000;

/// The `struct file *` installed at descriptor `fd` of the current task.
#[inline(always)]
pub fn file_of(fd: u64) -> Option<u64> {
    // SAFETY: `current` is BTF-typed; each member offset is the kernel's own
    // and the verifier checks every load against the member's type.
    unsafe {
        let task = bpf_get_current_task_btf() as *const u8;
        let files: *const u8 = member(task, global(&OFF_TASK_FILES));
        if files.is_null() {
            return None;
        }
        let fdt: *const u8 = member(files, global(&OFF_FILES_FDT));
        if fdt.is_null() {
            return None;
        }
        let max_fds: u32 = member(fdt, global(&OFF_FDT_MAX_FDS));
        if fd >= max_fds as u64 {
            return None;
        }
        let table: u64 = member(fdt, global(&OFF_FDT_FD));
        let file: u64 = probe(table.wrapping_add(fd * 8))?;
        (file != 0).then_some(file)
    }
}

/// What one read of a `struct file` tells: its inode, open flags and position.
pub struct FileWindow {
    pub inode: u64,
    pub flags: u32,
    pub pos: i64,
}

#[inline(always)]
pub fn file_window(file: u64) -> Option<FileWindow> {
    let at = global(&OFF_FILE_WINDOW_AT);
    let w: Words<{ FILE_WINDOW / 4 }> = probe(file.wrapping_add(at))?;
    Some(FileWindow {
        inode: w.u64_at(global(&OFF_FILE_INODE).wrapping_sub(at)),
        flags: w.u32_at(global(&OFF_FILE_FLAGS).wrapping_sub(at)),
        pos: w.u64_at(global(&OFF_FILE_POS).wrapping_sub(at)) as i64,
    })
}

/// A window of a kernel structure, read at once; members are picked out by
/// their byte offset in the window (always a constant to the verifier).
#[repr(C)]
struct Words<const N: usize>([u32; N]);

impl<const N: usize> Words<N> {
    #[inline(always)]
    fn u32_at(&self, off: u64) -> u32 {
        self.0[(off as usize / 4).min(N - 1)]
    }

    /// An 8-byte member (8-aligned in the structure, as the window's start is).
    #[inline(always)]
    fn u64_at(&self, off: u64) -> u64 {
        let i = (off as usize / 4).min(N - 2);
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

    /// Regular files, or everything when asked to record all file types.
    pub fn wanted(&self) -> bool {
        self.mode & S_IFMT == S_IFREG || global(&TRACE_ALL_FILES) != 0
    }
}

/// `(ino, dev, mode)` of an inode: one read of its head, one of its superblock's dev.
#[inline(always)]
pub fn identity(inode: u64) -> Option<Identity> {
    if inode == 0 {
        return None;
    }
    let w: Words<{ INODE_WINDOW / 4 }> = probe(inode)?;
    let mode = w.u16_at(global(&OFF_INODE_MODE)) as u32;
    let ino = w.u64_at(global(&OFF_INODE_INO));
    let sb = w.u64_at(global(&OFF_INODE_SB));
    let dev: u32 = probe(sb.wrapping_add(global(&OFF_SB_DEV)))?;
    Some(Identity { ino, dev, mode })
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
pub fn dir_of(dirfd: i32) -> (u64, u32) {
    let inode = if dirfd == AT_FDCWD {
        cwd_inode()
    } else if dirfd >= 0 {
        file_of(dirfd as u64).and_then(file_window).map(|w| w.inode)
    } else {
        None
    };
    inode
        .and_then(identity)
        .map(|i| (i.ino, i.dev))
        .unwrap_or((0, 0))
}

fn cwd_inode() -> Option<u64> {
    // SAFETY: BTF-typed walk from `current`, as in `file_of`.
    unsafe {
        let task = bpf_get_current_task_btf() as *const u8;
        let fs: *const u8 = member(task, global(&OFF_TASK_FS));
        if fs.is_null() {
            return None;
        }
        let dentry: *const u8 = member(fs, global(&OFF_FS_PWD_DENTRY));
        if dentry.is_null() {
            return None;
        }
        let inode: u64 = member(dentry, global(&OFF_DENTRY_INODE));
        Some(inode)
    }
}
