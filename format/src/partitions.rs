//! A trace of several nodes, without merging: per-node captures side by side
//! as hive partitions of one directory,
//!
//! ```text
//! TRACE/host=node0/manifest.json, seg-000000.parquet, ...
//! TRACE/host=node1/manifest.json, seg-000000.parquet, ...
//! ```
//!
//! Each `host=NAME/` is a complete trace of its own (what `iorepro-collect
//! --out TRACE/host=NAME` writes on that node), so nodes never coordinate and
//! a partition can be validated or repaired alone. There is no manifest at
//! the top: readers find the partitions and combine their manifests (hosts
//! and counts added up, the time range spanning all). DuckDB reads the same
//! directory as one table with `read_parquet('TRACE/**/*.parquet',
//! hive_partitioning = true)`; NAME should be the node's hostname as its rows
//! record it, so the partition column and the `host` column agree.

use std::path::{Path, PathBuf};

use crate::error::{TraceError, TraceResult};
use crate::manifest::{Anonymized, Manifest, Source, MANIFEST_FILE};

/// Directory name prefix of a node's partition.
pub const PARTITION_PREFIX: &str = "host=";

/// The partitions of `dir` (sorted by name), when it is a partitioned trace:
/// no manifest of its own, and at least one `host=NAME/` subdirectory.
pub fn partitions(dir: &Path) -> TraceResult<Option<Vec<PathBuf>>> {
    if !dir.is_dir() || dir.join(MANIFEST_FILE).exists() {
        return Ok(None);
    }
    let mut parts: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| TraceError::io(dir, e))?
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(PARTITION_PREFIX)
        })
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    parts.sort();
    Ok((!parts.is_empty()).then_some(parts))
}

/// The partition's directory name (`host=NAME`).
pub fn partition_name(part: &Path) -> String {
    part.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// One manifest for the whole trace: segments named relative to the top
/// (`host=NAME/seg-000000.parquet`), hosts, counts and lost events added up,
/// complete when every partition is.
pub fn combine(parts: &[(String, Manifest)]) -> Manifest {
    let source = match parts.first() {
        Some((_, first)) if parts.iter().all(|(_, m)| m.source == first.source) => first.source,
        _ => Source::Import,
    };
    let mut m = Manifest::new(source);
    m.complete = true;
    m.start_unix_ns = i64::MAX;
    m.end_unix_ns = i64::MIN;
    for (name, p) in parts {
        for h in &p.hosts {
            if !m.hosts.contains(h) {
                m.hosts.push(h.clone());
            }
        }
        m.events += p.events;
        m.dropped_events += p.dropped_events;
        if p.events > 0 {
            m.start_unix_ns = m.start_unix_ns.min(p.start_unix_ns);
            m.end_unix_ns = m.end_unix_ns.max(p.end_unix_ns);
        }
        m.complete &= p.complete;
        if let Some(mounts) = &p.mounts {
            crate::mounts::union(m.mounts.get_or_insert_with(Vec::new), mounts.clone());
        }
        m.segments
            .extend(p.segments.iter().map(|s| format!("{name}/{s}")));
    }
    if m.events == 0 {
        m.start_unix_ns = 0;
        m.end_unix_ns = 0;
    }
    m.anonymized = Anonymized::of_all(parts.iter().map(|(_, p)| p));
    m.process_starts = crate::processes::of_all(
        parts
            .iter()
            .map(|(_, p)| (p.hosts.as_slice(), p.process_starts.as_slice())),
    );
    m.extra.insert(
        "partitions".into(),
        serde_json::json!(parts.iter().map(|(n, _)| n).collect::<Vec<_>>()),
    );
    m
}
