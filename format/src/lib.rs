//! What a trace is, and nothing else: the crate every part of iorepro that
//! reads or writes a trace depends on, and the only one the collector needs.
//! [`schema`] names the columns and builds the one Arrow
//! schema; [`event`] turns rows into Arrow batches; [`writer`] streams batches
//! into rotating, always-complete segments and keeps the [`manifest`] current;
//! [`partitions`] lets per-node traces sit side by side as one;
//! [`reader`] streams them back in time order, accepting traces written by
//! other tools and normalising them to the canonical schema, which [`columns`]
//! then exposes as typed columns; [`runs`] expands a row that stands for a
//! run of calls back into its calls; [`scan`] reads the row groups of a trace
//! in parallel for analyses that merge partial results. [`segment_file`] holds the reader's defences
//! against hostile segment files, and [`private_file`] creates the files a
//! trace is made of with owner-and-group permissions. [`launchers`] says which
//! environment variables give the `rank` column. [`validate`] checks a
//! trace and repairs a damaged one (the collector salvages its own with it),
//! [`error`] is the one error type, [`units`] the byte and time units,
//! [`paths`] the one spelling of a path, [`object_requests`] what an
//! object-storage request row did, and [`host`] the one question
//! iorepro asks of the machine (is it root). [`path_traits`] says what a
//! path's name says about its file (code, a checkpoint, a log...), by the
//! rules the analysis judges roles by. [`keyed_names`] hashes the
//! names of a trace under the owner's key, for both the collector and
//! `iorepro-trace anonymize`.
//!
//! Which room may import which (`cargo xtask imports --rooms` checks it):
//! each only rooms of the lines above its own, and no two files of the
//! crate import each other (`cargo xtask imports`).
//! - `error`, `schema`, `units`, `host`, `launchers`, `mounts`, `runs`, `paths`,
//!   `object_requests`
//! - `event`, `columns`, `canonical_columns`, `segment_file`, `private_file`, `path_traits`
//! - `manifest`, `batches`
//! - `partitions`, `writer`, `keyed_names`
//! - `reader`
//! - `scan`, `repair`
//! - `validate`

pub mod batches;
pub(crate) mod canonical_columns;
pub mod columns;
pub mod error;
pub mod event;
pub mod host;
pub mod keyed_names;
pub mod launchers;
pub mod manifest;
pub mod mounts;
pub mod object_requests;
pub mod partitions;
pub mod path_traits;
pub mod paths;
pub mod private_file;
pub mod processes;
pub mod reader;
pub mod repair;
pub mod runs;
pub mod scan;
pub mod schema;
pub(crate) mod segment_file;
pub mod units;
pub mod validate;
pub mod writer;

pub use columns::Events;
pub use error::{TraceError, TraceResult};
pub use event::{EventBatchBuilder, EventRow, Exchange, FromStorage, RowTraits};
pub use manifest::{Anonymized, Manifest, Source};
pub use mounts::{Mount, MountTable};
pub use reader::TraceReader;
pub use runs::{Call, Run};
pub use schema::{trace_schema, Op, SCHEMA_VERSION};
pub use writer::{TraceWriter, WriterOptions};
