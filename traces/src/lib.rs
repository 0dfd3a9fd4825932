//! The `iorepro-trace` command ([`cli`]): one small function per
//! subcommand over the crates that work on traces offline, each a crate of
//! its own along the pipeline, used here and by tests directly:
//!
//! - `iorepro-format`: what a trace is, a directory of `manifest.json` and
//!   Parquet segments: its schema, writer, reader, validation and repair.
//!   The collector links it alone.
//! - `iorepro-analysis`: what a trace says about its job, read through the
//!   format: tallies, phases, file roles, summary, compare, and the filter
//!   that cuts a trace by role, path, rank and time.
//! - `iorepro-plot`: figures drawn from the analysis.
//! - `iorepro-interchange`: traces in and out of other tools' formats (fio,
//!   strace, Perfetto), per-node merge, and synthetic traces from a workload
//!   description.
//!
//! Analysis and interchange depend on the format, never on each other.
//!
//! The crate is one room, [`cli`], whose files (`inspect`, `figures`,
//! `report`, `convert`) are each one group of subcommands; `convert` takes
//! `inspect`'s JSON line, `report` the name `figures` gives a trace, and no
//! two files import each other (`cargo xtask imports`).

pub mod cli;
