//! Offline analysis. A trace is read in parallel ([`crate::format::scan`])
//! and each part counted into a [`tally`]: the [`histogram`] of request
//! sizes, the [`access`] pattern, the [`timeline`] of bytes per window and
//! the [`activity`] (runs of reads, writes and syncs) that [`phases`] are
//! found from; [`roles`] says what each file is to the job. Merged tallies become the [`overview`] (duration, bytes,
//! peaks, phases) and the full [`summary`]; [`plot`] draws an overview and
//! [`compare`] sets two side by side.

pub mod access;
pub mod activity;
pub mod compare;
pub mod histogram;
pub mod overview;
pub mod phases;
pub mod plot;
pub mod roles;
pub mod summary;
pub mod tally;
pub mod timeline;
