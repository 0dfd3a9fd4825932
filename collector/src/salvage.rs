//! When the trace cannot be written any more (its disk is full, a quota is
//! reached, the device fails), the capture stops but the job does not: it was
//! started to do its own work, and killing it would turn a tracing problem into
//! a lost training run. What was written stays a readable trace: the unfinished
//! segment (the collector's own, never readable without its footer) is removed,
//! and the manifest is rebuilt from the finished segments, marked incomplete,
//! with the cause recorded. A full disk may leave no room even for that, so a
//! capture sets some space aside when it starts ([`reserve_space`]) and gives
//! it back for the manifest.

use std::path::Path;

use iorepro_format::{Manifest, TraceError};

/// Turns the trace in `dir` into a readable, incomplete one after `err`;
/// returns the one line to print (naming the directory and the cause).
pub fn stop_writing(dir: &Path, err: &TraceError) -> String {
    let cause = cause_of(err);
    release_space(dir);
    remove_unfinished(dir);
    let kept = match iorepro_format::validate::repair(dir) {
        Ok(r) => {
            if let Ok(mut m) = Manifest::load(dir) {
                // An anonymized trace keeps the cause, not the error's
                // text, which may name files.
                let stopped = serde_json::json!({ "error": cause, "detail": err.to_string() });
                let stopped = match m.anonymized {
                    Some(_) => {
                        iorepro_format::keyed_names::manifest::extra("capture_stopped", &stopped)
                    }
                    None => Some(stopped),
                };
                if let Some(v) = stopped {
                    m.extra.insert("capture_stopped".into(), v);
                }
                // Best effort: the rebuilt manifest is already in place.
                let _ = m.store(dir);
            }
            format!(
                "{} events in {} finished segments kept (readable, marked incomplete)",
                r.events,
                r.segments.len()
            )
        }
        Err(e) => format!(
            "the manifest could not be rewritten ({e}); once there is space, \
             `iorepro-trace validate --repair {}` rebuilds it from the finished segments",
            dir.display()
        ),
    };
    format!(
        "{}: {cause}: capture stopped, {kept}; the job keeps running untraced",
        dir.display()
    )
}

/// The file holding the space set aside (hidden: not part of the trace).
const RESERVE: &str = ".space-reserve";
/// Room for a manifest listing about a thousand segments.
const RESERVE_BYTES: usize = 64 << 10;

/// Sets space aside in the trace directory for the manifest a full disk would
/// otherwise leave no room for. Best effort: without it a full disk may leave
/// the manifest to `validate --repair`.
pub fn reserve_space(dir: &Path) {
    let _ = std::fs::write(dir.join(RESERVE), vec![0u8; RESERVE_BYTES]);
}

/// Gives the space back (when the trace is finished, or to write its manifest).
pub fn release_space(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(RESERVE));
}

/// What went wrong, said plainly: the Parquet encoder wraps the system error
/// in its own words, which would read like a corrupt file.
fn cause_of(err: &TraceError) -> String {
    let text = err.to_string();
    let errno = match err {
        TraceError::Io { err, .. } => err.raw_os_error(),
        _ => None,
    };
    if errno == Some(libc::ENOSPC) || text.contains("No space left on device") {
        "trace disk full (ENOSPC: No space left on device)".into()
    } else if errno == Some(libc::EDQUOT) || text.contains("Disk quota exceeded") {
        "disk quota exceeded on the trace's file system (EDQUOT)".into()
    } else {
        format!("writing the trace failed: {text}")
    }
}

/// Removes the segment being written and a half-written manifest copy: files
/// of this collector, unreadable by construction.
fn remove_unfinished(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".parquet.partial") || name == ".manifest.json.tmp" {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
