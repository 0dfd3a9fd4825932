//! The records the kernel-side programs hand to the collector, shared by both
//! sides so their layout can never drift apart.
//!
//! Every struct is `#[repr(C)]`, `Copy`, and laid out with explicit padding so
//! that the byte image written by the eBPF program is exactly what user space
//! reads. Records on the I/O ring are told apart by their size:
//! [`IoEvent`] is the fixed, small record of every call on a descriptor;
//! [`PathEvent`] is the header of a call that names paths (open, stat,
//! unlink, rename, mkdir, ...), followed by the path strings themselves, as
//! long as they are (up to `PATH_MAX`); [`NameEvent`] gives a thread's name (`comm`) when the thread is
//! first seen and whenever it changes, so the I/O records need not carry it.
//! [`ProcEvent`] reports the process tree (fork, exec, exit) on its own ring
//! buffer, so an I/O flood can never starve it.
//! The kernel side also reads a few globals set by the loader (structure
//! member offsets from the kernel's BTF, and the capture's settings), named
//! in [`globals`].
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
    /// stat, lstat, fstat, newfstatat, statx.
    pub const STAT: u32 = 13;
    /// access, faccessat, faccessat2.
    pub const ACCESS: u32 = 14;
    pub const MKDIR: u32 = 15;
    pub const RMDIR: u32 = 16;
    /// getdents64 (a directory listing; `size` is the buffer, `ret` the bytes).
    pub const GETDENTS: u32 = 17;
    /// A hard link: `path` the existing name, `path2` the new one.
    pub const LINK: u32 = 18;
    /// A symbolic link: `path` its target as given, `path2` the link.
    pub const SYMLINK: u32 = 19;
    /// Bytes sent on a socket that carries HTTP requests (`write`,
    /// `sendto`): a [`PathEvent`](super::PathEvent) whose "path" is the
    /// head of the bytes (up to [`REQUEST_HEAD`](super::REQUEST_HEAD)),
    /// `ino` the socket's inode. See the kernel side's `sockets`.
    pub const SEND: u32 = 20;
    /// Bytes received on such a socket (`read`, `recvfrom`): the head of
    /// the first answer after a send, none for the rest.
    pub const RECV: u32 = 21;
    /// A page-cache fill made while a recorded call was in flight (read-ahead
    /// it started included): `offset`/`size` in bytes, `ino`/`dev` the file
    /// filled. User space adds it to the row of the thread's call whose time
    /// covers `ts_ns`, so the row says how many of its bytes storage served.
    pub const FILL: u32 = 22;
    /// Bytes a recorded call sent to its file's block device for writing
    /// (a bio queued while the call was in flight: the pages an `fsync`
    /// flushed, an `O_DIRECT` or `O_SYNC` write): `size` in bytes, `dev`
    /// the device. User space adds it to the call's row as [`FILL`] is.
    pub const DEVICE_WRITE: u32 = 23;
    /// Pages of a file the traced job wrote that the kernel's flusher wrote
    /// back to its device later, outside any call of the job's (a save
    /// without `fsync`): `size` in bytes, `ino`/`dev` the file, `pid_tgid`
    /// the thread that last wrote it. A row of its own (`writeback`).
    pub const WRITEBACK: u32 = 24;
}

/// What a [`ProcEvent`] describes.
pub mod proc_kind {
    /// A new process (not a thread) was forked from a traced one.
    pub const FORK: u32 = 1;
    pub const EXEC: u32 = 2;
    /// A thread-group leader exited.
    pub const EXIT: u32 = 3;
    /// A process of the followed cgroup seen for the first time (it may have
    /// joined the cgroup after the capture began).
    pub const JOIN: u32 = 4;
}

/// Bytes of a path string, its terminating NUL included (`PATH_MAX`): a
/// longer one the kernel refuses anyway (ENAMETOOLONG); it is cut and flagged.
pub const PATH_MAX: usize = 4096;
pub const COMM_LEN: usize = 16;

/// Slots of the per-CPU `DROPPED` counter array: lost I/O records are counted
/// under their [`kind`] (so a report can say which ops were lost), by the
/// calls they stood for (a lost run counts all its calls), thread
/// names under `DROPPED_NAME`, process records under `DROPPED_PROC`, and
/// syscalls not followed because both of the thread's slots were busy under
/// `DROPPED_BUSY`.
pub const DROPPED_BUSY: u32 = 29;
pub const DROPPED_NAME: u32 = 30;
pub const DROPPED_PROC: u32 = 31;
pub const DROPPED_SLOTS: u32 = 32;

/// One syscall (or one fault) of a traced process, or a run of `calls`
/// back-to-back calls of one thread that moved the same number of bytes each
/// at consecutive offsets of one file (see [`Run`]).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IoEvent {
    /// `bpf_ktime_get_ns` (CLOCK_MONOTONIC) at syscall entry (the first call's).
    pub ts_ns: u64,
    /// Time inside the call (the sum over a run's calls).
    pub dur_ns: u64,
    /// From the first call's entry to the last call's exit (`dur_ns` for one call).
    pub span_ns: u64,
    /// `bpf_get_current_pid_tgid`: tgid in the upper half, tid in the lower.
    pub pid_tgid: u64,
    /// Return value; for a run, the bytes all its calls moved.
    pub ret: i64,
    /// File offset of the data op (a run's first), or the op's offset
    /// argument; -1 when none.
    pub offset: i64,
    /// Bytes requested (a run's total); for lseek/truncate the length argument.
    pub size: u64,
    /// Inode of the file the descriptor refers to (0 when not looked up).
    pub ino: u64,
    /// Kernel-internal dev_t of the file's superblock (major << 20 | minor).
    pub dev: u32,
    pub fd: i32,
    pub kind: u32,
    /// The op's flags argument (open, mmap, lseek, ...); for a read or a
    /// write, the file's `f_flags` (O_DIRECT among them).
    pub flags: u32,
    /// Syscalls this record stands for: 1, or a run's length.
    pub calls: u32,
    /// How the call was made: [`VIA_SYSCALL`], [`VIA_IO_URING`], or the
    /// call that moved the bytes between two descriptors in the kernel.
    pub via: u32,
}

pub const VIA_SYSCALL: u32 = 0;
/// An io_uring request: `ts_ns` is its submission, `dur_ns` the time to its
/// completion.
pub const VIA_IO_URING: u32 = 1;
/// The read of a copy call's source and the write of its destination (a
/// pipe or socket end has no record): `sendfile`, `copy_file_range`,
/// `splice`. Both records carry the call's time, and `ret` as their size.
pub const VIA_SENDFILE: u32 = 2;
pub const VIA_COPY_FILE_RANGE: u32 = 3;
pub const VIA_SPLICE: u32 = 4;

/// `ret` of the path record an io_uring open or statx sends when it is
/// submitted: the result follows in an [`IoEvent`] at completion, whose
/// `offset` names the request (as the path record's `offset` does).
pub const RET_PENDING: i64 = i64::MIN;

/// A call that names paths: an [`IoEvent`], the directories relative paths
/// start from, and the lengths of the two path strings that follow the
/// header in the record (`path_len` bytes, then `path2_len` bytes, no NULs).
/// `path2` is a rename's or link's new name, or a symlink's own name.
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
    /// Bit 0: `path` was cut at [`PATH_MAX`]; bit 1: `path2` was.
    pub truncated: u16,
    /// Bit 0: `path` is relative to `dir_*`; bit 1: `path2` to `dir2_*`.
    pub relative: u16,
    pub path_len: u32,
    pub path2_len: u32,
}

/// Bytes of the per-CPU buffer a path record is put together in: the
/// header, and room for each path at the most ([`PATH_MAX`]) wherever the
/// first one ends.
pub const PATH_RECORD_MAX: usize = PATH_EVENT_SIZE + 3 * PATH_MAX;

/// A traced thread's name: sent before the thread's first I/O record and
/// again when the name changes (`prctl(PR_SET_NAME)`, exec).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NameEvent {
    pub pid_tgid: u64,
    pub comm: [u8; COMM_LEN],
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

/// `nr` of a [`Slot`] with no syscall in flight.
pub const IDLE: u32 = u32::MAX;

/// Files remembered per thread, by `fd % CACHED_FILES`.
pub const CACHED_FILES: usize = 4;

/// A file a thread used recently (see the kernel side's `slots`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CachedFile {
    pub fd: u32,
    pub mode: u32,
    /// The `struct file *`; 0 for an empty entry.
    pub file: u64,
    /// The process's `TRACED` value when the entry was made.
    pub gen: u64,
    pub ino: u64,
    pub dev: u32,
    /// The file's `f_flags` when the entry was made (O_DIRECT among them;
    /// a later `fcntl(F_SETFL)` is not seen by calls that find the entry).
    pub flags: u32,
}

/// A run being built: back-to-back reads (or writes) of one thread on one
/// descriptor, each moving exactly `size` bytes, each starting where the
/// last ended. It is sent as one [`IoEvent`] when a call does not continue
/// it, when the thread makes any other syscall or exits, or when it spans
/// [`RUN_SPAN_NS`]; user space sends the runs still open when it stops.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub pid_tgid: u64,
    /// Entry of the first call, exit of the last.
    pub ts: u64,
    pub end: u64,
    /// Sum of the calls' durations.
    pub dur: u64,
    pub offset: i64,
    /// Bytes of each call.
    pub size: u64,
    pub ino: u64,
    pub dev: u32,
    pub fd: i32,
    /// `kind::READ` or `kind::WRITE`.
    pub kind: u32,
    /// 0 when no run is open.
    pub calls: u32,
    /// The file's `f_flags` (the same for every call of a run).
    pub flags: u32,
    pub _pad: u32,
}

impl Run {
    /// The record that stands for the run's calls.
    pub fn event(&self) -> IoEvent {
        let total = self.size.wrapping_mul(self.calls as u64);
        IoEvent {
            ts_ns: self.ts,
            dur_ns: self.dur,
            span_ns: self.end.wrapping_sub(self.ts),
            pid_tgid: self.pid_tgid,
            ret: total as i64,
            offset: self.offset,
            size: total,
            ino: self.ino,
            dev: self.dev,
            fd: self.fd,
            kind: self.kind,
            flags: self.flags,
            calls: self.calls,
            via: VIA_SYSCALL,
        }
    }
}

/// The longest a run may last: rows stay fine-grained in time, and a run is
/// never held back long from user space.
pub const RUN_SPAN_NS: u64 = 1_000_000;

/// A thread's state in the kernel side's `SLOTS` array: the syscall in
/// flight (number and entry time, and for calls on a descriptor the file as
/// it was at entry), its open run, and the files it used recently.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    pub tid: u32,
    pub nr: u32,
    pub ts: u64,
    pub file: u64,
    pub ino: u64,
    pub pos: i64,
    pub dev: u32,
    pub file_flags: u32,
    /// A copy call's source file as it was at entry (`file` is then its
    /// destination); `src_file` is 0 when the source is not recorded.
    pub src_file: u64,
    pub src_ino: u64,
    pub src_pos: i64,
    pub src_dev: u32,
    /// Non-zero while the call in flight is one on a socket that carries
    /// HTTP requests (see the kernel side's `sockets`).
    pub socket: u32,
    pub run: Run,
    pub cache: [CachedFile; CACHED_FILES],
    /// Where the kernel side reads windows of kernel structures.
    pub scratch: Scratch,
}

/// Words of a [`Slot`]'s scratch buffer: room for the larger of
/// [`FILE_WINDOW`] and [`INODE_WINDOW`], and for 16 iovecs.
pub const SCRATCH_WORDS: usize = 64;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Scratch(pub [u32; SCRATCH_WORDS]);

/// `flags` of a SEND or RECV record whose bytes went through TLS (the
/// uprobes on OpenSSL, see the kernel side's `tls`): its URL is `https://`.
pub const REQUEST_TLS: u32 = 1;
/// `flags` of a SEND record that only marks a connection whose first send
/// was no HTTP request (it carries no bytes): with [`REQUEST_TLS`], an
/// OpenSSL session of another protocol.
pub const NOT_HTTP: u32 = 2;
/// `flags` of a SEND record that only marks a socket whose first send was
/// a TLS handshake: a process with such sockets and no OpenSSL session
/// speaks TLS through a library the uprobes do not see.
pub const TLS_HELLO: u32 = 4;

/// Bytes of a request's (or an answer's) head copied from a socket call: a
/// request line and the headers of an S3 client (its signature among them)
/// fit. The body is counted, never copied.
pub const REQUEST_HEAD: usize = 2048;

/// Sizes by which user space tells the I/O ring's records apart.
pub const IO_EVENT_SIZE: usize = core::mem::size_of::<IoEvent>();
pub const PATH_EVENT_SIZE: usize = core::mem::size_of::<PathEvent>();
pub const NAME_EVENT_SIZE: usize = core::mem::size_of::<NameEvent>();

/// Bytes of `struct file` read at once, from `FILE_WINDOW_AT`: it must hold
/// `f_inode`, `f_flags` and `f_pos` (the loader checks, from the kernel's BTF).
pub const FILE_WINDOW: usize = 96;
/// Bytes of `struct inode` read at once from its start: `i_mode`, `i_sb`, `i_ino`.
pub const INODE_WINDOW: usize = 128;

/// Names of the read-only globals the kernel side reads (set by the loader).
pub mod globals {
    pub const TASK_FILES: &str = "OFF_TASK_FILES";
    pub const TASK_FS: &str = "OFF_TASK_FS";
    pub const TASK_TGID: &str = "OFF_TASK_TGID";
    pub const TASK_PID: &str = "OFF_TASK_PID";
    pub const TASK_FLAGS: &str = "OFF_TASK_FLAGS";
    pub const FILES_FDT: &str = "OFF_FILES_FDT";
    pub const FDT_MAX_FDS: &str = "OFF_FDT_MAX_FDS";
    pub const FDT_FD: &str = "OFF_FDT_FD";
    /// Where the `struct file` window starts, and its members' places in it.
    pub const FILE_WINDOW_AT: &str = "OFF_FILE_WINDOW_AT";
    pub const FILE_INODE: &str = "OFF_FILE_INODE";
    pub const FILE_FLAGS: &str = "OFF_FILE_FLAGS";
    pub const FILE_POS: &str = "OFF_FILE_POS";
    pub const INODE_MODE: &str = "OFF_INODE_MODE";
    pub const INODE_INO: &str = "OFF_INODE_INO";
    pub const INODE_SB: &str = "OFF_INODE_SB";
    pub const SB_DEV: &str = "OFF_SB_DEV";
    pub const FS_PWD_DENTRY: &str = "OFF_FS_PWD_DENTRY";
    pub const DENTRY_INODE: &str = "OFF_DENTRY_INODE";
    /// Non-zero: trace the cgroup in the `CGROUP` map (and below) instead of a tgid set.
    pub const CGROUP: &str = "TRACE_CGROUP";
    /// Non-zero: record every file type, not regular files only.
    pub const ALL_FILES: &str = "TRACE_ALL_FILES";
    /// Entries of the `SLOTS` map minus one (a power of two minus one).
    pub const SLOT_MASK: &str = "SLOT_MASK";
    /// Non-zero: merge runs of back-to-back calls into one record.
    pub const MERGE_RUNS: &str = "TRACE_MERGE_RUNS";
    /// Non-zero: record the heads of HTTP requests and answers on sockets.
    pub const REQUESTS: &str = "TRACE_REQUESTS";
    /// Members of an io_uring request (`struct io_kiocb`) and of the
    /// per-opcode command data at its start.
    pub const REQ_OPCODE: &str = "OFF_REQ_OPCODE";
    pub const REQ_FD: &str = "OFF_REQ_FD";
    pub const RW_POS: &str = "OFF_RW_POS";
    pub const RW_ADDR: &str = "OFF_RW_ADDR";
    pub const RW_LEN: &str = "OFF_RW_LEN";
    pub const OPEN_DFD: &str = "OFF_OPEN_DFD";
    pub const OPEN_FILENAME: &str = "OFF_OPEN_FILENAME";
    pub const OPEN_FLAGS: &str = "OFF_OPEN_FLAGS";
    pub const STATX_DFD: &str = "OFF_STATX_DFD";
    pub const STATX_FILENAME: &str = "OFF_STATX_FILENAME";
    pub const CLOSE_FD: &str = "OFF_CLOSE_FD";
    pub const FILENAME_NAME: &str = "OFF_FILENAME_NAME";
    pub const CQE_RES: &str = "OFF_CQE_RES";
    /// Fields of the `filemap:mm_filemap_add_to_page_cache` record, from its
    /// format file; `FILL_ORDER` 0 where the kernel has no `order` field.
    pub const FILL_INO: &str = "OFF_FILL_INO";
    pub const FILL_INDEX: &str = "OFF_FILL_INDEX";
    pub const FILL_DEV: &str = "OFF_FILL_DEV";
    pub const FILL_ORDER: &str = "OFF_FILL_ORDER";
    /// Fields of the `block:block_bio_queue` record, from its format file.
    pub const BIO_DEV: &str = "OFF_BIO_DEV";
    pub const BIO_SECTORS: &str = "OFF_BIO_SECTORS";
    pub const BIO_RWBS: &str = "OFF_BIO_RWBS";
    /// Fields of the `writeback:writeback_single_inode` record, from its
    /// format file.
    pub const WB_NAME: &str = "OFF_WB_NAME";
    pub const WB_INO: &str = "OFF_WB_INO";
    pub const WB_WROTE: &str = "OFF_WB_WROTE";
}

/// A file the traced job wrote, as the `WRITTEN` map holds it (keyed by its
/// inode number): who last wrote it, its device as records carry it, and
/// the name of its device's write-back queue (the `bdi` the write-back
/// tracepoint names, such as `8:0` for `/dev/sda1`; all zero to match any,
/// where the file system has no block device), so an inode of the same
/// number on another file system is not taken for it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub pid_tgid: u64,
    pub dev: u32,
    pub _pad: u32,
    pub bdi: [u8; BDI_NAME],
}

/// Bytes of a write-back queue's name compared (`MAJ:MIN` of a disk fits).
pub const BDI_NAME: usize = 16;

/// Per-thread slots: the loader sizes the map to the smallest power of two
/// at least `pid_max`, at most this many.
pub const MAX_SLOTS: u32 = 1 << 16;

/// The two slots a thread may use (`mask`: the map's size minus one): its
/// tid's low bits, or a hash of its tid.
#[inline(always)]
pub fn slot_indexes(tid: u32, mask: u32) -> (u32, u32) {
    let mask = mask & (MAX_SLOTS - 1);
    (tid & mask, (tid.wrapping_mul(0x9E37_79B1) >> 16) & mask)
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` integers and byte arrays with no padding holes.
    unsafe impl aya::Pod for super::IoEvent {}
    unsafe impl aya::Pod for super::PathEvent {}
    unsafe impl aya::Pod for super::NameEvent {}
    unsafe impl aya::Pod for super::ProcEvent {}
    unsafe impl aya::Pod for super::Slot {}
    unsafe impl aya::Pod for super::Written {}
}

const _: () = assert!(IO_EVENT_SIZE == 88);
const _: () = assert!(PATH_EVENT_SIZE == 88 + 40);
const _: () = assert!(core::mem::size_of::<Run>() == 80);
const _: () = assert!(core::mem::size_of::<Slot>() == 48 + 32 + 80 + 40 * CACHED_FILES + 256);
const _: () = assert!(FILE_WINDOW <= SCRATCH_WORDS * 4 && INODE_WINDOW <= SCRATCH_WORDS * 4);
const _: () = assert!(NAME_EVENT_SIZE == 24);
const _: () = assert!(core::mem::size_of::<ProcEvent>() == 24);
