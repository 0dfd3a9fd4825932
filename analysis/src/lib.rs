//! What a trace says about its job, read through the format
//! (`iorepro-format`), which it never writes. A trace is read in parallel
//! ([`iorepro_format::scan`]), each part counted on its own and the parts
//! merged ([`part_counters`]): the [`histogram`] of request sizes, the [`access`] pattern, the [`timeline`]
//! of bytes per window and the [`activity`] (runs of reads, writes and
//! syncs) that [`phases`] are found from; [`roles`] says what each file is
//! to the job. Merged tallies become the [`overview`] (duration, bytes,
//! peaks, phases) and the full [`summary`]; [`compare`] sets two traces side
//! by side, and [`filter`] cuts a trace by role, path, rank and time;
//! [`anonymize`] rewrites one with its names hashed and their roles kept. The
//! figures are drawn from an overview by `iorepro-plot`; the replayer reads
//! the phases and roles found here.
//!
//! Which room may import which (`cargo xtask imports --rooms` checks it):
//! each only rooms of the lines above its own, and no two files of the
//! crate import each other (`cargo xtask imports`).
//! - `by_op`, `intern`, `access`, `histogram`, `timeline`, `activity`
//! - `phases`, `roles`, `part_counters`
//! - `overview`, `filter`
//! - `compare`, `summary`

pub mod access;
pub mod activity;
pub mod anonymize;
mod by_op;
pub mod compare;
pub mod dlio_workload;
pub mod filter;
pub mod histogram;
mod intern;
pub mod overview;
pub mod part_counters;
pub mod phases;
pub mod requests_by_object;
pub mod roles;
pub mod served;
pub mod summary;
pub mod timeline;
