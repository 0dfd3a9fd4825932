//! Errors of the replayer. Each one says what was being done, to which file,
//! and why it failed, so a storage engineer can act on the one line printed.

use std::path::PathBuf;

use iorepro_format::TraceError;

pub type ReplayResult<T> = Result<T, ReplayError>;

/// What [`ReplayError::Io`] says it was doing when the replay made a
/// directory of its own.
pub const CREATING_DIRECTORY: &str = "creating directory";

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The trace cannot be used (missing, corrupt, wrong schema).
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// Options that contradict each other or the environment.
    #[error("{0}")]
    Usage(String),
    /// A replayed or preparing operation failed on the target.
    #[error("{what} {path}: {err}")]
    Io {
        what: &'static str,
        path: PathBuf,
        err: std::io::Error,
    },
    /// A path from the trace that would leave the target (symlink planted there).
    #[error("refused {path}: it resolves outside the target (a symlink or mount point inside the target leads out)")]
    Escape { path: PathBuf },
    /// A rendezvous wait that did not complete in time, naming who was missing.
    #[error("{0}")]
    Rendezvous(String),
    /// A step that needs a privilege this process lacks (named in the message).
    #[error("{0}")]
    Privilege(String),
    /// Another rank failed, so this one stopped.
    #[error("stopped because another rank failed: {0}")]
    Aborted(String),
}

impl ReplayError {
    pub fn io(what: &'static str, path: impl Into<PathBuf>, err: std::io::Error) -> Self {
        let path = path.into();
        // RESOLVE_BENEATH reports an escape as EXDEV; name it for what it is.
        if err.raw_os_error() == Some(libc::EXDEV) {
            return ReplayError::Escape { path };
        }
        ReplayError::Io { what, path, err }
    }

    /// The errno of an error that says only that a call met another outcome
    /// than the traced one (a file the launcher made and the replay did not,
    /// a name that is a directory here, a file shorter than the trace read):
    /// the call is counted as differing and the run goes on. Errors of the
    /// target itself (no space, no permission on it, a read-only or
    /// vanished mount, an I/O error, an escape) are not, and stop the run.
    ///
    /// Making the replay's own directories is never a difference: a name in
    /// the way there is the target's fault, not the trace's.
    pub fn differs_only(&self) -> Option<i32> {
        let ReplayError::Io { err, what, .. } = self else {
            return None;
        };
        if *what == CREATING_DIRECTORY {
            return None;
        }
        if err.kind() == std::io::ErrorKind::UnexpectedEof {
            return Some(libc::ENODATA);
        }
        err.raw_os_error().filter(|e| {
            matches!(
                *e,
                libc::ENOENT
                    | libc::ENOTDIR
                    | libc::EISDIR
                    | libc::EEXIST
                    | libc::ENOTEMPTY
                    | libc::ELOOP
                    | libc::ENXIO
                    | libc::ETXTBSY
                    | libc::EBADF
            )
        })
    }

    /// Bad input (or a missing privilege) exits 2 (as in `iorepro-trace`); a failed replay 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            ReplayError::Trace(_) | ReplayError::Usage(_) | ReplayError::Privilege(_) => 2,
            _ => 1,
        }
    }
}
