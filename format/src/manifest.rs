//! `manifest.json`: what a trace is, where it came from, what it holds and what
//! was lost. The writer rewrites it atomically after every finished segment, so
//! a trace whose writer was killed is still readable up to its last segment.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{one_line, TraceError, TraceResult};
use crate::mounts::Mount;
use crate::processes::ProcessStart;
use crate::schema::{FORMAT_NAME, SCHEMA_VERSION};

pub const MANIFEST_FILE: &str = "manifest.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Ebpf,
    Synth,
    Replay,
    Import,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub schema_version: u64,
    pub tool_version: String,
    pub source: Source,
    pub hosts: Vec<String>,
    pub start_unix_ns: i64,
    pub end_unix_ns: i64,
    /// Rows.
    pub events: u64,
    /// Syscalls the rows stand for (more than `events` when rows stand for
    /// runs of calls); absent in traces written before runs existed, where
    /// every row is one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// Calls the kernel side could not deliver (ring buffer full, …): counted, never silent.
    pub dropped_events: u64,
    pub segments: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// The file systems of the traced job's mount namespace (see
    /// [`crate::mounts`]); absent in traces captured before mounts
    /// were recorded and in traces not captured. A table of another shape
    /// (another tool's key of the same name) is ignored, not an error.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_mounts"
    )]
    pub mounts: Option<Vec<Mount>>,
    /// When each traced process that made a row was forked, and by which
    /// parent (see [`crate::processes`]); empty in traces captured before
    /// starts were recorded, and where no traced process was forked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub process_starts: Vec<ProcessStart>,
    /// False while a writer is still appending (or was killed before closing).
    #[serde(default = "default_true")]
    pub complete: bool,
    /// Present when every name in the trace is a keyed hash (see
    /// [`crate::keyed_names`]): with which scheme, never with which key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anonymized: Option<Anonymized>,
    /// Keys written by other versions or tools, kept on rewrite. The
    /// collector writes, among others, `capabilities`: `{kernel, hooks,
    /// missing: [{what, effect, why}]}`, the kernel release, the hooks
    /// attached, and what this kernel did not let it capture (`io_uring`,
    /// `page_faults`) with the reason; a trace with no `missing` entry lacks
    /// nothing the collector can record.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// How a trace was anonymized (the manifest's `anonymized`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anonymized {
    /// The hashing scheme, [`crate::keyed_names::SCHEME`]: names hashed with
    /// the same scheme and key are equal exactly when the originals were.
    pub scheme: String,
    /// `capture` (by the collector: no name ever reached the disk) or
    /// `trace` (an existing trace rewritten).
    pub at: String,
    /// The program name of the command line was kept (by request); the
    /// rest of the command line is never kept.
    pub program_name_kept: bool,
    /// Manifest keys of the original left out (they may hold names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_keys: Vec<String>,
}

impl Anonymized {
    /// What a trace made of these traces' rows (per-node partitions, a
    /// merge) is: anonymized only when every one of them is.
    pub fn of_all<'a>(parts: impl IntoIterator<Item = &'a Manifest>) -> Option<Anonymized> {
        parts
            .into_iter()
            .map(|m| m.anonymized.clone())
            .reduce(|a, b| {
                let (mut a, b) = (a?, b?);
                for k in b.dropped_keys {
                    if !a.dropped_keys.contains(&k) {
                        a.dropped_keys.push(k);
                    }
                }
                Some(a)
            })
            .flatten()
    }
}

fn lenient_mounts<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<Mount>>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(v).ok())
}

fn default_true() -> bool {
    true
}

impl Manifest {
    pub fn new(source: Source) -> Self {
        Manifest {
            format: FORMAT_NAME.to_string(),
            schema_version: SCHEMA_VERSION as u64,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            source,
            hosts: Vec::new(),
            start_unix_ns: 0,
            end_unix_ns: 0,
            events: 0,
            calls: None,
            dropped_events: 0,
            segments: Vec::new(),
            command: None,
            mounts: None,
            process_starts: Vec::new(),
            complete: false,
            anonymized: None,
            extra: serde_json::Map::new(),
        }
    }

    /// Reads and checks a manifest: the right format, a schema version this
    /// library understands, and segment names that stay inside the trace.
    pub fn load(dir: &Path) -> TraceResult<Self> {
        let path = dir.join(MANIFEST_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(TraceError::MissingManifest {
                    dir: dir.to_path_buf(),
                })
            }
            Err(e) => return Err(TraceError::io(&path, e)),
        };
        let bad = |problem: String| TraceError::BadManifest {
            path: path.clone(),
            problem,
        };
        // Check the version before the full shape, so a newer trace gets the
        // "upgrade" message rather than a confusing missing-key one.
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(one_line(&e.to_string())))?;
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT_NAME) {
            return Err(bad(format!("`format` is not \"{FORMAT_NAME}\"")));
        }
        match value.get("schema_version").and_then(|v| v.as_u64()) {
            Some(v) if v > SCHEMA_VERSION as u64 => {
                return Err(TraceError::NewerSchema {
                    path,
                    found: v,
                    supported: SCHEMA_VERSION,
                })
            }
            Some(0) | None => {
                return Err(bad(
                    "`schema_version` missing or not a positive integer".into()
                ))
            }
            Some(_) => {}
        }
        let m: Manifest =
            serde_json::from_value(value).map_err(|e| bad(one_line(&e.to_string())))?;
        for seg in &m.segments {
            let p = Path::new(seg);
            let plain = p.components().count() == 1
                && matches!(p.components().next(), Some(std::path::Component::Normal(_)));
            if !plain || !seg.ends_with(".parquet") {
                return Err(bad(format!(
                    "segment `{seg}` is not a .parquet file name inside the trace directory"
                )));
            }
        }
        Ok(m)
    }

    /// Writes the manifest atomically (temp file + rename): a reader never sees half of it.
    pub fn store(&self, dir: &Path) -> TraceResult<()> {
        let path = dir.join(MANIFEST_FILE);
        let tmp = dir.join(".manifest.json.tmp");
        let text = serde_json::to_string_pretty(self).expect("manifest serializes");
        crate::private_file::write_private_file(&tmp, text.as_bytes())?;
        std::fs::rename(&tmp, &path).map_err(|e| TraceError::io(&path, e))
    }

    pub fn duration_s(&self) -> f64 {
        (self.end_unix_ns - self.start_unix_ns).max(0) as f64 / 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_without_process_starts_reads_as_none_and_none_are_written() {
        let dir = tempfile::tempdir().unwrap();
        Manifest::new(Source::Ebpf).store(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(MANIFEST_FILE)).unwrap();
        assert!(!text.contains("process_starts"), "{text}");
        assert!(Manifest::load(dir.path())
            .unwrap()
            .process_starts
            .is_empty());
    }
}
