//! What the user asked to see while a capture or replay runs: the same four
//! options on both binaries.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveOptions {
    /// A status line every this long.
    pub status_interval: Option<Duration>,
    /// Lines appended here instead of stderr.
    pub status_file: Option<PathBuf>,
    /// `HOST:PORT` of the Prometheus endpoint.
    pub metrics_addr: Option<String>,
    /// How long the endpoint keeps serving the final figures.
    pub metrics_linger: Duration,
}

impl LiveOptions {
    /// Whether status lines go to stderr (where a progress bar would garble them).
    pub fn lines_on_stderr(&self) -> bool {
        self.status_interval.is_some() && self.status_file.is_none()
    }

    /// Whether anything is to be shown at all.
    pub fn any(&self) -> bool {
        self.status_interval.is_some() || self.metrics_addr.is_some()
    }
}
