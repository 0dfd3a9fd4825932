//! I/O: how the replay's calls reach the target, and nothing outside it.
//!
//! [`paths`] is the one place a traced path becomes a path beneath the
//! target (in a rank's own copy, or in a replica of the read-only data);
//! [`confine`] opens, makes and removes it beneath the target directory held
//! open, with `openat2(RESOLVE_BENEATH)`; [`engine`] issues the calls
//! (syscalls, or io_uring requests); [`evict`] drops files read from the
//! page cache after them (`--evict-reads`); [`buffers`] holds the bytes they move
//! (page-aligned, incompressible, stamped per 4 KiB block); [`prepare`]
//! puts the target in the state the traced job found before the clock
//! starts; [`target`] is the one target type, a directory or a bucket,
//! checked, opened and prepared; [`call_tally`] what the calls did, by kind;
//! [`task_io`] what they caused the storage to read and write, as the
//! kernel counts it per thread and per process.
//! [`objects`] is the bucket's side, object storage over the S3 API: its
//! keys, its client, the requests' figures, and its preparation.
//!
//! Takes the survey and the rank map from `plan`; hands `execute` the
//! prepared target ([`target::Opened`]), the engines and the process's
//! buffers, and `ranks` the directory to meet on when no other place is
//! given.
pub mod buffers;
pub mod call_tally;
pub mod confine;
pub mod engine;
pub mod evict;
pub mod objects;
pub mod paths;
pub mod prepare;
pub mod target;
pub mod task_io;
