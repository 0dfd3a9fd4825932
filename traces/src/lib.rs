//! The `iorepro-trace` command ([`cli`]) and one door to everything that
//! works on traces offline, each part a crate of its own along the
//! pipeline:
//!
//! - [`format`] (`iorepro-format`): what a trace is, a directory of
//!   `manifest.json` and Parquet segments: its schema, writer, reader,
//!   validation and repair. The collector links it alone.
//! - [`analysis`] (`iorepro-analysis`): what a trace says about its job,
//!   read through the format: tallies, phases, file roles, summary,
//!   compare, and [`filter`] to cut a trace by role, path, rank and time.
//! - [`plot`] (`iorepro-plot`): figures drawn from the analysis.
//! - [`interchange`] (`iorepro-interchange`): traces in and out of other
//!   tools' formats (fio, strace, Perfetto), per-node merge, and [`synth`]
//!   traces from a workload description.
//!
//! Analysis and interchange depend on the format, never on each other; the
//! names below keep the paths the tests and tools have always used.

pub mod cli;

pub use iorepro_analysis as analysis;
pub use iorepro_analysis::filter;
pub use iorepro_format as format;
pub use iorepro_format::{error, units, validate};
pub use iorepro_interchange as interchange;
pub use iorepro_interchange::synth;
pub use iorepro_plot as plot;

pub use analysis::roles::{FileRole, FileRoles, MountTotals, Role, RoleTotals};
pub use error::{TraceError, TraceResult};
pub use format::columns::Events;
pub use format::event::{EventBatchBuilder, EventRow};
pub use format::manifest::{Manifest, Source};
pub use format::mounts::{Mount, MountTable};
pub use format::reader::TraceReader;
pub use format::runs::{Call, Run};
pub use format::schema::{trace_schema, Op, SCHEMA_VERSION};
pub use format::writer::{TraceWriter, WriterOptions};
