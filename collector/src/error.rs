//! The collector library's errors: each a one-line message naming the file or
//! the missing capability.

use std::path::{Path, PathBuf};

use iorepro_format::TraceError;

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Kernel(String),
    #[error("{0}")]
    Privilege(String),
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Job(String),
    #[error(transparent)]
    Trace(#[from] TraceError),
}

impl CollectError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        CollectError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

pub type CollectResult<T> = Result<T, CollectError>;
