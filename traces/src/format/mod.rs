//! What a trace is. [`schema`] names the columns and builds the one Arrow
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
//! environment variables give the `rank` column.

pub mod columns;
pub mod event;
pub mod launchers;
pub mod manifest;
pub mod mounts;
pub mod partitions;
pub mod private_file;
pub mod reader;
pub mod runs;
pub mod scan;
pub mod schema;
pub(crate) mod segment_file;
pub mod writer;
