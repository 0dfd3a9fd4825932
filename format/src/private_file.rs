//! Trace files hold paths and command lines of someone's job, so every file a
//! trace is made of (segments, the manifest) is created readable by its owner
//! and group only. The writer and the manifest both create files this way.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{TraceError, TraceResult};

/// Trace files hold paths and command lines of someone's job: not world-readable.
pub const TRACE_FILE_MODE: u32 = 0o640;

/// Creates (or truncates) a file readable by owner and group only.
pub fn write_private_file(path: &Path, bytes: &[u8]) -> TraceResult<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(TRACE_FILE_MODE)
        .open(path)
        .map_err(|e| TraceError::io(path, e))?;
    f.write_all(bytes).map_err(|e| TraceError::io(path, e))?;
    f.sync_data().map_err(|e| TraceError::io(path, e))
}
