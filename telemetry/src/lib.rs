//! Live figures of a long-running capture or replay, for the people watching
//! it: JSON status lines every interval ([`status`], like fio's
//! `--status-interval` or elbencho's `--livejson`) and the same figures in
//! the Prometheus text format over HTTP ([`serve`], with [`encode`] helping
//! each binary describe its figures to `prometheus-client`).
//!
//! What the figures are is each binary's business (the collector counts
//! captured calls and lost records, the replayer bytes, latencies and stall);
//! this crate only carries them out of the process, off the hot path: the
//! lines are written and the endpoint answered from threads of their own.

pub mod encode;
pub mod error;
pub mod options;
pub mod serve;
pub mod status;

pub use error::TelemetryError;
pub use options::LiveOptions;
pub use serve::MetricsServer;
pub use status::{parse_duration, parse_interval, StatusSink};
