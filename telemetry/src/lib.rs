//! Live figures of a long-running capture or replay, for the people watching
//! it: JSON status lines every interval ([`status`], like fio's
//! `--status-interval` or elbencho's `--livejson`) and the same figures in
//! the Prometheus text format over HTTP ([`serve`], with [`encode`] helping
//! each binary describe its figures to `prometheus-client`).
//!
//! The figures both binaries have are kept here once: the per-op [`tally`]
//! of calls, bytes and latency, with its part of a status line and its
//! Prometheus families. What else a binary counts is its own business (the
//! collector rows and lost records, the replayer failures and stall); this
//! crate carries it out of the process, off the hot path: the lines are
//! written and the endpoint answered from threads of their own.
//!
//! Which room may import which (`cargo xtask imports --rooms` checks it):
//! each only rooms of the lines above its own, and no two files of the
//! crate import each other (`cargo xtask imports`).
//! - `error`, `options`, `encode`
//! - `status`, `serve`
//! - `tally`

pub mod encode;
pub mod error;
pub mod options;
pub mod serve;
pub mod status;
pub mod tally;

pub use error::TelemetryError;
pub use options::LiveOptions;
pub use serve::MetricsServer;
pub use status::{parse_duration, parse_interval, StatusSink};
