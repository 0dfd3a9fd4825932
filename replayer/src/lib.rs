//! Replays the file I/O of a trace, scaled to N ranks on M nodes, against a
//! target directory, and reports how the storage kept up.
//!
//! The source is laid out in rooms, one per role, in the order the replay
//! goes through them:
//!
//! 1. [`plan`] reads the trace and settles what the replay will do before a
//!    file is touched: the survey of its ranks, files and phases (found by
//!    the trace analysis' one detector; checkpoints are where all ranks
//!    meet), which files' calls are replayed, which source rank each target
//!    rank replays, the scaling model of what N ranks do, each rank's
//!    schedule, and the stream that reads the trace a second time into
//!    bounded per-rank channels.
//! 2. [`io`] is how calls reach the target, the one type of which
//!    ([`io::target`]) is a directory or a bucket: each traced path
//!    resolved to one beneath it in one place, opened confined there, the
//!    calls issued as syscalls or io_uring requests with the process's
//!    buffers, or as requests by the bucket's client (which keeps their
//!    figures), and the target prepared as the traced job found it.
//! 3. [`execute`] is each rank's loop: it takes its ops from the stream,
//!    makes them through `io` on the plan's schedule, on whichever kind of
//!    target the run has, and measures them.
//! 4. [`ranks`] says who this process is (a launcher's rank, or every rank
//!    as a thread) and where the ranks meet: barriers, the abort of a
//!    failed run, and the gathering of their results (threads, files or MPI).
//! 5. [`report`] merges what the ranks measured into the report, prints it
//!    (a table, our JSON, fio's or MLPerf Storage's layout), and writes what
//!    was done as a trace (`--record-ops`).
//!
//! Beside them, [`live`] shows the ranks' figures while they run: status
//! lines every `--status-interval`, a Prometheus endpoint
//! (`--metrics-addr`), the progress bar. [`cli`] checks the command line
//! into [`Options`], [`run`](mod@run) goes through the rooms in order, and [`error`]
//! is shared by all.
//!
//! No two rooms import each other, and no two files anywhere in the crate
//! (`cargo xtask imports`). Which room may import which (`cargo xtask
//! imports --rooms` checks it):
//! - `plan`: no other room
//! - `io`: `plan`
//! - `report`: `plan`, `io`
//! - `ranks`: `io`, `report`
//! - `live`: `io`, `report`
//! - `execute`: every room

pub mod cli;
pub mod error;
pub mod execute;
pub mod io;
pub mod live;
pub mod plan;
pub mod ranks;
pub mod report;
pub mod run;

pub use cli::Options;
pub use error::{ReplayError, ReplayResult};
pub use report::summary::Report;
pub use run::{run, Outcome};
