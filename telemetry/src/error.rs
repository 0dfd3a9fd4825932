//! Errors of setting up the status lines and the metrics endpoint; each names
//! the address or file and why.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("--metrics-addr {addr}: {reason}")]
    Address { addr: String, reason: String },
    #[error("--status-file {path}: {source}")]
    StatusFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("starting the metrics endpoint: {0}")]
    Runtime(std::io::Error),
}
