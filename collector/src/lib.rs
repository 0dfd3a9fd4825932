//! The collector: loads iorepro's eBPF programs, follows a job's process tree,
//! and turns the kernel's records into rows of an iorepro trace.
//!
//! Pipeline: [`probes`] loads the kernel side (with structure offsets from
//! [`btf`]) → the kernel writes small fixed records into a ring buffer →
//! [`capture`] drains it every few milliseconds → [`files`] names the file of
//! each record and [`procs`] its rank → [`rows`] maps it onto the trace's op
//! vocabulary and reorders by time → `iorepro_traces::TraceWriter`.
//! [`spawn`] starts the job held until it is traced; [`cli`] is the command line.
//! If the trace cannot be written (disk full), [`salvage`] keeps what was
//! written readable and the job runs on untraced.
//!
//! # Why these hooks
//!
//! - **Raw tracepoints `sys_enter`/`sys_exit`**, not per-syscall tracepoints:
//!   one cheap program per direction, no perf record building. The first test
//!   is the syscall number (a register compare), the second the traced set, so
//!   untraced processes pay almost nothing. Entry stores only a timestamp per
//!   thread; the exit reads the arguments back from the saved user registers.
//!   fentry/fexit and kprobes are not needed (and not available everywhere).
//! - **Exact offsets for plain `read`/`write`/`readv`** come from the kernel,
//!   not from replaying descriptor state in user space: at syscall exit the
//!   program reads `f_pos` of the open file (`task->files->fdt->fd[fd]`), and
//!   the call started at `f_pos - ret`. This is right across `lseek`, `dup`,
//!   descriptions shared by fork, `O_APPEND` and descriptors opened before the
//!   capture began, which a user-space model would each have to get right.
//!   Positional calls take their offset argument.
//! - **Files are named by (device, inode)**, read from the descriptor at the
//!   call, so dup/dup2/dup3, fork, exec, descriptor reuse and descriptors
//!   passed over sockets need no tracking; `open` records teach the path.
//!   Relative paths are joined to the inode of their start directory (dirfd or
//!   cwd), which the kernel side reports too.
//! - **Regular files only** is decided in the kernel (`S_ISREG` of the inode),
//!   so pipes and sockets cost no ring-buffer space.
//! - **Process tree in the kernel** (`tp_btf` fork/exec/exit): a child is in
//!   the traced set before it runs. The job itself is forked held on a pipe
//!   until its pid is traced.
//! - **Polling instead of wake-ups**: records are submitted with
//!   `BPF_RB_NO_WAKEUP`; a wake-up per record costs more than the record.
//!   A full buffer is counted per CPU and reported, never silent.
//! - **Page faults under mmap**: a `fault` row is a page-cache fill (a read
//!   from storage, with its exact folio range) made while no recorded syscall
//!   was running, i.e. by a fault under a file mapping and the readahead it
//!   started (`filemap:mm_filemap_add_to_page_cache`). Pages already cached
//!   cost no I/O and make no row; the mapping tracepoints were not used
//!   because they under-report large folios.
//!
//! # The kernel-side object
//!
//! The programs in `ebpf/iorepro-ebpf` are compiled once, by `cargo xtask
//! build-ebpf` with the nightly pinned in `ebpf/rust-toolchain.toml` and
//! bpf-linker, into `collector/bpf/iorepro.bpf.o`, which is committed and
//! embedded here. So this crate builds on stable Rust alone, and a production
//! node needs no nightly, LLVM or bpf-linker (`cargo install --path
//! collector`). That build is reproducible (paths are trimmed, and no absolute
//! path reaches cargo's build hashes), so "the committed object matches its
//! sources" is a byte compare: `cargo xtask test` rebuilds the object and fails
//! if it differs from the committed file. After changing `ebpf/`, run `cargo
//! xtask build-ebpf` and commit the object with the sources.
//!
//! Limits: x86_64 syscall numbers; path arguments are cut at 255 bytes; a
//! vectored call's size counts its first 64 iovecs; failed opens are not
//! recorded; a rename row's `path` is the old name.

pub mod btf;
pub mod capture;
pub mod cgroup;
pub mod cli;
pub mod decode;
pub mod error;
pub mod files;
pub mod probes;
pub mod procs;
pub mod ring;
pub mod rows;
pub mod salvage;
pub mod signals;
pub mod spawn;

pub use capture::{run, Outcome};
pub use cli::{CaptureOptions, Opts, Target};
pub use error::{CollectError, CollectResult};
