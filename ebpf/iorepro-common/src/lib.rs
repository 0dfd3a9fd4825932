//! The records the kernel-side programs hand to the collector, shared by both
//! sides so their layout can never drift apart.
//!
//! Every struct is `#[repr(C)]`, `Copy`, and laid out with explicit padding so
//! that the byte image written by the eBPF program is exactly what user space
//! reads. [`IoEvent`] is the fixed, small record of every data and metadata
//! syscall; [`PathEvent`] extends it with the path strings of `open`,
//! `unlink` and `rename`; [`ProcEvent`] reports the process tree (fork, exec,
//! exit) on its own ring buffer, so an I/O flood can never starve it.
//! The kernel side also reads a few `Offsets` globals (structure member
//! offsets computed by user space from the kernel's BTF), named here.
#![no_std]

/// What an [`IoEvent`] or [`PathEvent`] describes.
pub mod kind {
    pub const OPEN: u32 = 1;
    pub const CLOSE: u32 = 2;
    pub const READ: u32 = 3;
    pub const WRITE: u32 = 4;
    pub const LSEEK: u32 = 5;
    pub const FSYNC: u32 = 6;
    pub const FDATASYNC: u32 = 7;
    pub const TRUNCATE: u32 = 8;
    pub const UNLINK: u32 = 9;
    pub const RENAME: u32 = 10;
    pub const MMAP: u32 = 11;
    /// A page-cache fill under a file mapping (`offset`/`size` in bytes).
    pub const FAULT: u32 = 12;
}

/// What a [`ProcEvent`] describes.
pub mod proc_kind {
    /// A new process (not a thread) was forked from a traced one.
    pub const FORK: u32 = 1;
    pub const EXEC: u32 = 2;
    /// A thread-group leader exited.
    pub const EXIT: u32 = 3;
}

/// Bytes of a path kept per string; longer paths are cut (flagged in `truncated`).
pub const PATH_LEN: usize = 256;
pub const COMM_LEN: usize = 16;

/// Slots of the per-CPU `DROPPED` counter array: I/O records are counted
/// under their [`kind`] (so a report can say which ops were lost), process
/// records under `DROPPED_PROC`.
pub const DROPPED_PROC: u32 = 15;
pub const DROPPED_SLOTS: u32 = 16;

/// One syscall (or one fault) of a traced process.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IoEvent {
    /// `bpf_ktime_get_ns` (CLOCK_MONOTONIC) at syscall entry.
    pub ts_ns: u64,
    pub dur_ns: u64,
    /// `bpf_get_current_pid_tgid`: tgid in the upper half, tid in the lower.
    pub pid_tgid: u64,
    pub ret: i64,
    /// File offset of the data op, or the op's offset argument; -1 when none.
    pub offset: i64,
    /// Bytes requested; for lseek/truncate the length argument.
    pub size: u64,
    /// Inode of the file the descriptor refers to (0 when not looked up).
    pub ino: u64,
    /// Kernel-internal dev_t of the file's superblock (major << 20 | minor).
    pub dev: u32,
    pub fd: i32,
    pub kind: u32,
    pub flags: u32,
    pub comm: [u8; COMM_LEN],
}

/// `open`, `unlink`, `rename`: an [`IoEvent`] plus the path arguments as the
/// process passed them, and the directories relative paths start from.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PathEvent {
    pub io: IoEvent,
    /// Inode of the directory `path` is relative to (dirfd or cwd); 0 when absolute.
    pub dir_ino: u64,
    pub dir2_ino: u64,
    pub dir_dev: u32,
    pub dir2_dev: u32,
    /// `S_IF*` type bits of the opened file (open only).
    pub mode: u32,
    /// Bit 0: `path` was cut at PATH_LEN; bit 1: `path2` was.
    pub truncated: u32,
    pub path: [u8; PATH_LEN],
    /// The new name of a rename.
    pub path2: [u8; PATH_LEN],
}

/// A change in the traced process tree.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProcEvent {
    pub ts_ns: u64,
    pub kind: u32,
    pub tgid: u32,
    /// For FORK the parent's tgid; otherwise 0.
    pub parent_tgid: u32,
    pub _pad: u32,
}

/// Size of the common prefix user space reads first to tell the records apart.
pub const IO_EVENT_SIZE: usize = core::mem::size_of::<IoEvent>();
pub const PATH_EVENT_SIZE: usize = core::mem::size_of::<PathEvent>();

/// Names of the read-only globals the kernel side reads its structure member
/// offsets from (set by the loader from `/sys/kernel/btf/vmlinux`).
pub mod globals {
    pub const TASK_FILES: &str = "OFF_TASK_FILES";
    pub const TASK_FS: &str = "OFF_TASK_FS";
    pub const TASK_TGID: &str = "OFF_TASK_TGID";
    pub const TASK_PID: &str = "OFF_TASK_PID";
    pub const FILES_FDT: &str = "OFF_FILES_FDT";
    pub const FDT_MAX_FDS: &str = "OFF_FDT_MAX_FDS";
    pub const FDT_FD: &str = "OFF_FDT_FD";
    pub const FILE_INODE: &str = "OFF_FILE_INODE";
    pub const FILE_POS: &str = "OFF_FILE_POS";
    pub const INODE_MODE: &str = "OFF_INODE_MODE";
    pub const INODE_INO: &str = "OFF_INODE_INO";
    pub const INODE_SB: &str = "OFF_INODE_SB";
    pub const SB_DEV: &str = "OFF_SB_DEV";
    pub const FS_PWD_DENTRY: &str = "OFF_FS_PWD_DENTRY";
    pub const DENTRY_INODE: &str = "OFF_DENTRY_INODE";
    /// Non-zero: trace by cgroup (this id, at `CGROUP_LEVEL`) instead of by tgid.
    pub const CGROUP_ID: &str = "TRACE_CGROUP_ID";
    pub const CGROUP_LEVEL: &str = "TRACE_CGROUP_LEVEL";
    /// Non-zero: record every file type, not regular files only.
    pub const ALL_FILES: &str = "TRACE_ALL_FILES";
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` integers and byte arrays with no padding holes.
    unsafe impl aya::Pod for super::IoEvent {}
    unsafe impl aya::Pod for super::PathEvent {}
    unsafe impl aya::Pod for super::ProcEvent {}
}

const _: () = assert!(IO_EVENT_SIZE == 88);
const _: () = assert!(PATH_EVENT_SIZE == 88 + 32 + 2 * PATH_LEN);
const _: () = assert!(core::mem::size_of::<ProcEvent>() == 24);
