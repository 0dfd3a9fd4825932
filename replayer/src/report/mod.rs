//! Report: what the ranks measured, merged and printed.
pub mod output;
pub mod record;
pub mod record_merge;
pub mod stats;
pub mod summary;
