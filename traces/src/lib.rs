//! Everything that works on iorepro traces offline.
//!
//! The folders are the parts. [`format`] (the `iorepro-format` crate) is what
//! a trace is: a directory of `manifest.json` and Parquet segments, its
//! schema, writer, reader and validation.
//! [`analysis`] works on a trace read through the format: summary, phases,
//! plots and comparisons. [`interchange`] moves traces in and out of other
//! tools' formats (fio, strace) and joins per-node captures. Beside them,
//! [`synth`] makes traces from a workload description, [`filter`] cuts a trace by role,
//! path, rank and time, and [`cli`] is the `iorepro-trace` command
//! line over all of it. The format depends on nothing else here; analysis and
//! interchange depend on the format, never on each other.

pub mod analysis;
pub mod cli;
pub mod filter;
pub mod interchange;
pub mod synth;

/// The format, its error type, units and validation live in their own crate
/// (`iorepro-format`), which the collector uses alone; they are named here
/// as they always were.
pub use iorepro_format as format;
pub use iorepro_format::{error, units, validate};

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
