//! Reading kernel structures: which tasks are traced, and what file a
//! descriptor refers to. Member offsets are globals that the loader fills in
//! from the running kernel's BTF.

use aya_ebpf::helpers::{
    bpf_get_current_ancestor_cgroup_id, bpf_get_current_comm, bpf_get_current_task,
    bpf_probe_read_kernel,
};
use core::ptr::read_volatile;
use iorepro_common::COMM_LEN;

use crate::TRACED;

macro_rules! offsets {
    ($($name:ident),* $(,)?) => {
        $(
            #[unsafe(no_mangle)]
            static $name: u64 = 0;
        )*
    };
}

offsets!(
    OFF_TASK_FILES,
    OFF_TASK_FS,
    OFF_TASK_TGID,
    OFF_TASK_PID,
    OFF_FILES_FDT,
    OFF_FDT_MAX_FDS,
    OFF_FDT_FD,
    OFF_FILE_INODE,
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
);

#[inline(always)]
fn global(v: &'static u64) -> u64 {
    // SAFETY: a read of a read-only global the loader may have rewritten.
    unsafe { read_volatile(v) }
}

#[inline(always)]
pub fn tracing_cgroup() -> bool {
    global(&TRACE_CGROUP_ID) != 0
}

/// The first check of every program: is the current task in the traced set?
#[inline(always)]
pub fn is_traced(pid_tgid: u64) -> bool {
    let cgroup = global(&TRACE_CGROUP_ID);
    if cgroup != 0 {
        let level = global(&TRACE_CGROUP_LEVEL) as i32;
        // SAFETY: helper without pointer arguments.
        return unsafe { bpf_get_current_ancestor_cgroup_id(level) } == cgroup;
    }
    let tgid = (pid_tgid >> 32) as u32;
    TRACED.get_ptr(tgid).is_some()
}

#[inline(always)]
pub fn current_comm() -> [u8; COMM_LEN] {
    bpf_get_current_comm().unwrap_or([0; COMM_LEN])
}

#[inline(always)]
fn read<T>(base: *const u8, offset: u64) -> Option<T> {
    // SAFETY: bpf_probe_read_kernel faults safely on a bad address.
    unsafe { bpf_probe_read_kernel(base.wrapping_add(offset as usize) as *const T).ok() }
}

/// `(tgid, pid)` of a task.
#[inline(always)]
pub fn task_ids(task: *const u8) -> Option<(u32, u32)> {
    let tgid = read::<u32>(task, global(&OFF_TASK_TGID))?;
    let pid = read::<u32>(task, global(&OFF_TASK_PID))?;
    Some((tgid, pid))
}

/// What the verifier-friendly lookups below learn about an open file.
pub struct FileInfo {
    pub file: *const u8,
    pub ino: u64,
    pub dev: u32,
    pub mode: u32,
}

pub const S_IFMT: u32 = 0o170000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFDIR: u32 = 0o040000;

impl FileInfo {
    pub fn is_regular(&self) -> bool {
        self.mode & S_IFMT == S_IFREG
    }

    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }

    /// Regular files, or everything when asked to record all file types.
    pub fn wanted(&self) -> bool {
        self.is_regular() || global(&TRACE_ALL_FILES) != 0
    }

    /// The file position (`f_pos`) as it is now.
    pub fn pos(&self) -> i64 {
        read::<i64>(self.file, global(&OFF_FILE_POS)).unwrap_or(-1)
    }
}

fn current_task() -> *const u8 {
    // SAFETY: helper without arguments.
    unsafe { bpf_get_current_task() as *const u8 }
}

/// `current->files->fdt->fd[fd]` and its inode.
pub fn file_info(fd: u64) -> Option<FileInfo> {
    let files = read::<*const u8>(current_task(), global(&OFF_TASK_FILES))?;
    let fdt = read::<*const u8>(files, global(&OFF_FILES_FDT))?;
    let max_fds = read::<u32>(fdt, global(&OFF_FDT_MAX_FDS))?;
    if fd >= max_fds as u64 {
        return None;
    }
    let table = read::<*const u8>(fdt, global(&OFF_FDT_FD))?;
    let file = read::<*const u8>(table, fd * 8)?;
    if file.is_null() {
        return None;
    }
    let inode = read::<*const u8>(file, global(&OFF_FILE_INODE))?;
    let (ino, dev, mode) = inode_info(inode)?;
    Some(FileInfo {
        file,
        ino,
        dev,
        mode,
    })
}

fn inode_info(inode: *const u8) -> Option<(u64, u32, u32)> {
    if inode.is_null() {
        return None;
    }
    let mode = read::<u16>(inode, global(&OFF_INODE_MODE))? as u32;
    let ino = read::<u64>(inode, global(&OFF_INODE_INO))?;
    let sb = read::<*const u8>(inode, global(&OFF_INODE_SB))?;
    let dev = read::<u32>(sb, global(&OFF_SB_DEV))?;
    Some((ino, dev, mode))
}

const AT_FDCWD: i32 = -100;

/// (inode, dev) of the directory a relative path starts from: `dirfd`'s
/// file, or the current working directory for `AT_FDCWD`.
pub fn dir_of(dirfd: i32) -> (u64, u32) {
    if dirfd == AT_FDCWD {
        cwd().unwrap_or((0, 0))
    } else if dirfd >= 0 {
        file_info(dirfd as u64)
            .map(|f| (f.ino, f.dev))
            .unwrap_or((0, 0))
    } else {
        (0, 0)
    }
}

fn cwd() -> Option<(u64, u32)> {
    let fs = read::<*const u8>(current_task(), global(&OFF_TASK_FS))?;
    let dentry = read::<*const u8>(fs, global(&OFF_FS_PWD_DENTRY))?;
    let inode = read::<*const u8>(dentry, global(&OFF_DENTRY_INODE))?;
    let (ino, dev, _) = inode_info(inode)?;
    Some((ino, dev))
}
