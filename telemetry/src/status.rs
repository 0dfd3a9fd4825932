//! Status lines: one JSON object per line, written whole, to stderr or
//! appended to a file.
//!
//! Each line goes out in one `write` call on a descriptor opened with
//! `O_APPEND`, so processes of one launched job that share a status file
//! (every rank writes its own lines) never interleave within a line on a
//! local file system.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crate::error::TelemetryError;

/// The shortest interval accepted: shorter ones would cost more than they show.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// Parses a duration such as `3s`, `500ms` or `1m` (the format's one
/// duration parser).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    iorepro_format::units::parse_duration(text)
}

/// Parses `--status-interval`: a duration of at least [`MIN_INTERVAL`].
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < MIN_INTERVAL {
        return Err(format!(
            "`{text}`: the interval must be at least {} ms",
            MIN_INTERVAL.as_millis()
        ));
    }
    Ok(d)
}

/// Rounds a figure of a status line: four decimals are plenty.
pub fn round(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// Where status lines go.
pub struct StatusSink {
    file: Option<File>,
}

impl StatusSink {
    /// Lines to `path` (created if missing, appended to), or to stderr.
    pub fn open(path: Option<&Path>) -> Result<StatusSink, TelemetryError> {
        let file = match path {
            None => None,
            Some(p) => Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|source| TelemetryError::StatusFile {
                        path: p.to_path_buf(),
                        source,
                    })?,
            ),
        };
        Ok(StatusSink { file })
    }

    /// Whether lines go to stderr (where a progress bar would garble them).
    pub fn is_stderr(&self) -> bool {
        self.file.is_none()
    }

    /// Writes one line. A line that cannot be written is dropped: the
    /// status of a run must never stop the run.
    pub fn write(&mut self, line: &serde_json::Value) {
        let mut text = line.to_string();
        text.push('\n');
        let _ = match self.file.as_mut() {
            Some(f) => f.write_all(text.as_bytes()),
            None => std::io::stderr().lock().write_all(text.as_bytes()),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_interval("10ms").is_err());
        assert!(parse_interval("soon").is_err());
    }

    #[test]
    fn lines_are_appended_whole() {
        let dir = std::env::temp_dir().join(format!("iorepro-status-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        for i in 0..2 {
            let mut s = StatusSink::open(Some(&dir)).unwrap();
            assert!(!s.is_stderr());
            s.write(&serde_json::json!({ "n": i }));
        }
        let text = std::fs::read_to_string(&dir).unwrap();
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(text, "{\"n\":0}\n{\"n\":1}\n");
    }
}
