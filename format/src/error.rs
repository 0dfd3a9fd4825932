//! Errors of the trace library. Every variant names the file it is about, so a
//! CLI can print it on one line and a user knows where to look.

use std::path::PathBuf;

pub type TraceResult<T> = Result<T, TraceError>;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{dir}: not a trace: no manifest.json (a trace is a directory with manifest.json and *.parquet segments, or a single .parquet file)")]
    MissingManifest { dir: PathBuf },
    #[error("{path}: bad manifest: {problem}")]
    BadManifest { path: PathBuf, problem: String },
    #[error("{path}: trace schema_version {found} is newer than this iorepro understands ({supported}); upgrade iorepro")]
    NewerSchema {
        path: PathBuf,
        found: u64,
        supported: u32,
    },
    #[error("{path}: not a readable Parquet file: {problem}")]
    Parquet { path: PathBuf, problem: String },
    #[error("{path}: column `{column}`: {problem}")]
    Column {
        path: PathBuf,
        column: String,
        problem: String,
    },
    #[error("{path}: bad workload: {problem}")]
    Workload { path: PathBuf, problem: String },
    #[error("{path}: bad key file: {problem}")]
    BadKey { path: PathBuf, problem: String },
    #[error("{path}: {problem}")]
    Invalid { path: PathBuf, problem: String },
}

impl TraceError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TraceError::Io {
            path: path.into(),
            err: source,
        }
    }

    pub fn parquet(path: impl Into<PathBuf>, err: impl std::fmt::Display) -> Self {
        TraceError::Parquet {
            path: path.into(),
            problem: one_line(&err.to_string()),
        }
    }

    pub fn column(path: impl Into<PathBuf>, column: &str, problem: impl Into<String>) -> Self {
        TraceError::Column {
            path: path.into(),
            column: column.to_string(),
            problem: problem.into(),
        }
    }

    pub fn invalid(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        TraceError::Invalid {
            path: path.into(),
            problem: problem.into(),
        }
    }
}

/// Library messages (parquet, serde) sometimes span lines; a CLI error must not.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
