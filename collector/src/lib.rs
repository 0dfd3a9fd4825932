//! The collector: loads iorepro's eBPF programs, follows a job's process tree
//! (or a cgroup), and turns the kernel's records into rows of an iorepro trace.
//!
//! Pipeline: [`probes`] loads the kernel side (with structure offsets from
//! [`btf`]) → the kernel writes small records into a ring buffer → [`ring`]
//! reads it in batches, every few milliseconds, for [`capture`] → [`decode`]
//! names each record's file ([`files`]), rank ([`procs`]) and thread → [`rows`]
//! reorders rows by time → `iorepro_format::TraceWriter`. [`spawn`] starts
//! the job held until it is traced; [`cgroup`] opens the cgroup a `--cgroup`
//! capture follows; [`cli`] is the command line. If the trace cannot be
//! written (disk full), [`salvage`] keeps what was written readable and the
//! job runs on untraced. [`live`] counts what is written for the
//! `--status-interval` lines and the `--metrics-addr` endpoint.
//! [`request_rows`] puts each object-storage request together from the
//! socket records of its sends and receives, one row a request.
//! [`hashed_rows`] hashes every name on its way to the writer
//! (`--anonymize-key-file`), after the name rules of the roles
//! ([`iorepro_format::path_traits`]) have read what it says.
//!
//! Which room may import which (`cargo xtask imports --rooms` checks it):
//! each only rooms of the lines above its own, and no two files of the
//! crate import each other (`cargo xtask imports`).
//! - `error`, `files`, `mounts`, `procs`, `salvage`, `signals`
//! - `btf`, `cgroup`, `cli`, `ring`, `spawn`
//! - `probes`
//! - `live`
//! - `rows`
//! - `decode`
//! - `capture`
//!
//! # Why these hooks, and what each call costs
//!
//! - **The raw `sys_enter`/`sys_exit` tracepoints, as BTF tracepoints**: one
//!   program per direction, no perf record building, typed saved registers.
//!   Every syscall on the host passes here, so the first test is a bitmap of
//!   the syscall numbers of interest, the second a tgid-indexed array of
//!   traced processes (lookups the verifier inlines); only then does any work
//!   start. Empty programs on these hooks cost about 0.23 µs per read+write
//!   pair here: the floor any tracer on them pays.
//! - **Per-thread state in an array of slots**, two candidate slots per
//!   thread, written in place: no hash-map insert per call.
//! - **Calls on a descriptor find the file at entry**: a call on a file the
//!   trace does not record (a pipe, a socket, /dev/null) costs no timestamp
//!   and leaves no state. A per-process cache of descriptor → file, trusted
//!   while the process's descriptor-table generation has not moved (every
//!   close, dup2/dup3, close_range and exec moves it), spares the walk to the
//!   file on repeated use.
//! - **Exact offsets for plain `read`/`write`/`readv`** come from the kernel,
//!   not from replaying descriptor state in user space: the file position is
//!   read at entry (for an `O_APPEND` write, the position it left at exit,
//!   less what it wrote). This is right across `lseek`, `dup`, descriptions
//!   shared by fork and descriptors opened before the capture began.
//!   Positional calls take their offset argument.
//! - **Files are named by (device, inode)**, read from the descriptor, so
//!   dup/dup2/dup3, fork, exec, descriptor reuse and descriptors passed over
//!   sockets need no tracking; `open` records teach the path. Relative paths
//!   are joined to the inode of their start directory (dirfd or cwd), which
//!   the kernel side reports too.
//! - **Runs**: back-to-back equal-sized reads (or writes) of one thread at
//!   consecutive offsets of one file are one record (a ring reservation costs
//!   about 0.1 µs here, more than the rest of a call) and one row, with every
//!   call's offset and size recoverable (`calls`, `span_ns` in the schema).
//! - **Process tree in the kernel** (`tp_btf` fork/exec/exit; `task_rename`
//!   for thread names): a child is traced before it runs. A `--cgroup`
//!   capture asks the kernel whether `current` is in the cgroup (a cgroup
//!   array), so processes that join later are followed too.
//! - **io_uring** (`io_uring_submit_req`, or `io_uring_submit_sqe` before
//!   6.4; `io_uring_complete` in either of its forms): requests are rows
//!   like syscalls, timed from submission to completion. Where the kernel's
//!   tracepoints pass no request (before 6.0) they are left out, and the
//!   manifest's `capabilities` says so.
//! - **Polling instead of wake-ups**: records are submitted with
//!   `BPF_RB_NO_WAKEUP`; a wake-up per record costs more than the record.
//!   A full buffer is counted per CPU, by the calls lost, and reported.
//! - **Page faults under mmap**: a `fault` row is a page-cache fill (a read
//!   from storage, with its exact folio range) made while no recorded call
//!   was running, i.e. by a fault under a file mapping and the readahead it
//!   started (`filemap:mm_filemap_add_to_page_cache`).
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
//! # Kernels
//!
//! Linux 5.10 or later with BTF. The required programs use nothing newer
//! on their path (ring buffers, BTF tracepoints, global functions with
//! scalar arguments, bounded loops), and each call chain stays within one
//! 512-byte stack, which kernels before 6.13 count for the whole chain (see
//! the kernel side's `work`). [`probes`] attaches the optional hooks the
//! kernel has, records what it left out, and loads in a fixed order so that
//! a refusal always names the same program. `tests/kernel_matrix.rs` boots
//! Debian's 5.10, 6.1 and 6.12 in VMs and runs the ground-truth tests there.
//!
//! Limits: x86_64 syscall numbers; a vectored call's size counts its first
//! IOV_MAX (1,024) iovecs, which is all the kernel takes.

pub mod btf;
pub mod capture;
pub mod cgroup;
pub mod cli;
pub mod decode;
pub mod error;
pub mod files;
pub mod hashed_rows;
pub mod live;
pub mod mounts;
pub mod probes;
pub mod procs;
pub mod request_rows;
pub mod ring;
pub mod rows;
pub mod salvage;
pub mod signals;
pub mod spawn;
pub mod storage_served;
pub mod write_back;

pub use capture::{run, Outcome};
pub use cli::{CaptureOptions, Opts, Target};
pub use error::{CollectError, CollectResult};
