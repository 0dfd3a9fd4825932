//! The iorepro trace format and everything that works on traces offline.
//!
//! A trace is a directory holding `manifest.json` and Parquet segment files.
//! [`schema`] names the columns and builds the one Arrow schema; [`event`]
//! turns rows into Arrow batches; [`writer`] streams batches into rotating,
//! always-complete segments and keeps the [`manifest`] current; [`reader`]
//! streams them back in time order, accepting traces written by other tools and
//! normalising them to the canonical schema, which [`columns`] then exposes as
//! typed columns. [`synth`] makes traces from a workload description and
//! [`summary`] aggregates a trace in one streaming pass, building the
//! [`analysis`] timeline that phase detection, [`plot`] and [`compare`] share.
//! Converters move traces in and out of other tools' formats:
//! [`export_fio`] writes fio iologs, [`import_fio`] and [`import_strace`] read
//! fio iologs and strace output (sharing `import_common` to find log files
//! and write the result), and [`merge`] joins per-node captures.

pub mod analysis;
pub mod cli;
pub mod columns;
pub mod compare;
pub mod error;
pub mod event;
pub mod export_fio;
mod import_common;
pub mod import_fio;
pub mod import_strace;
pub mod manifest;
pub mod merge;
pub mod plot;
pub mod reader;
pub mod schema;
mod segment_file;
pub mod summary;
pub mod synth;
pub mod units;
pub mod validate;
pub mod writer;

pub use columns::Events;
pub use error::{TraceError, TraceResult};
pub use event::{EventBatchBuilder, EventRow};
pub use manifest::{Manifest, Source};
pub use reader::TraceReader;
pub use schema::{trace_schema, Op, SCHEMA_VERSION};
pub use writer::{TraceWriter, WriterOptions};
