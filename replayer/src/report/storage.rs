//! Where the replay's bytes came from: how many of the bytes it read the
//! storage served, and how many it will have written there, as the kernel
//! counts them ([`crate::io::task_io`]), against what the ranks' calls
//! moved. A replay reading back the data its node just made, or its own
//! dataset a second time, is served from the page cache, and its figures
//! are then the memory's, not the storage's.
//!
//! The count is each rank's thread's, per phase, where those hold all the
//! rank caused; with io_uring, whose worker threads do part of it, each
//! process's whole count over its ranks' run instead, which gives the
//! run's totals but no epoch's.

use serde::Serialize;

use super::stats::{sum_known, RankResult};

/// The replay's totals.
#[derive(Debug, Clone, Serialize)]
pub struct StorageReport {
    /// Bytes the replay caused the storage to read (read-ahead included)
    /// and to write; `null` where not counted (`note` says why).
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    /// The share of the bytes the ranks read that were not fetched from
    /// the storage: served from memory (the page cache), in percent.
    pub cache_served_percent: Option<f64>,
    /// Whose counts: `ranks` (each rank's thread, per phase: the epochs
    /// and saves have theirs) or `processes` (each process's whole count
    /// over its ranks' run: totals only).
    pub counted_per: Option<&'static str>,
    /// Why the figures are missing, or only totals.
    pub note: Option<String>,
}

/// The share of `read_bytes` not fetched from the storage, which fetched
/// `storage_read_bytes` for them (read-ahead can fetch more than was read:
/// then none came from memory). `None` without reads.
pub fn cache_served_percent(read_bytes: u64, storage_read_bytes: u64) -> Option<f64> {
    (read_bytes > 0)
        .then(|| 100.0 * read_bytes.saturating_sub(storage_read_bytes) as f64 / read_bytes as f64)
}

/// Why a bucket's replay has no count.
const ON_A_BUCKET: &str = "an object-storage target: the store's own storage is not ours to count";

impl StorageReport {
    /// The totals of `results`, which read `read_bytes` in their calls;
    /// `bucket`: the target is one.
    pub fn of(results: &[RankResult], read_bytes: u64, bucket: bool) -> StorageReport {
        let (counts, counted_per, note) = match (bucket, per_rank(results), per_process(results)) {
            (true, _, _) => (None, None, Some(ON_A_BUCKET.to_string())),
            (false, Some(c), _) => (Some(c), Some("ranks"), None),
            (false, None, Some(c)) => (
                Some(c),
                Some("processes"),
                Some(
                    "a rank's own count missed part of what it caused (its calls went \
                     through io_uring, whose worker threads do part of them, or it stopped \
                     early): each process's whole count over its ranks' run, no epoch's or \
                     save's"
                        .to_string(),
                ),
            ),
            (false, None, None) => (
                None,
                None,
                Some(
                    "this kernel keeps no per-task I/O accounting (CONFIG_TASK_IO_ACCOUNTING)"
                        .to_string(),
                ),
            ),
        };
        StorageReport {
            read_bytes: counts.map(|c| c.0),
            write_bytes: counts.map(|c| c.1),
            cache_served_percent: counts.and_then(|c| cache_served_percent(read_bytes, c.0)),
            counted_per,
            note,
        }
    }
}

/// Every rank's phases summed, where every one was counted.
fn per_rank(results: &[RankResult]) -> Option<(u64, u64)> {
    let phases = || results.iter().flat_map(|r| &r.phases);
    Some((
        sum_known(phases().map(|p| p.storage_read_bytes))?,
        sum_known(phases().map(|p| p.storage_write_bytes))?,
    ))
}

/// Every process's count summed, where every rank's process gave one.
fn per_process(results: &[RankResult]) -> Option<(u64, u64)> {
    let counts: Vec<_> = results.iter().filter_map(|r| r.process_storage).collect();
    let ranks: u64 = counts.iter().map(|c| u64::from(c.ranks)).sum();
    (!results.is_empty() && ranks == results.len() as u64).then(|| {
        counts.iter().fold((0, 0), |(r, w), c| {
            (r + c.bytes.read_bytes, w + c.bytes.write_bytes)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::task_io::StorageBytes;
    use crate::report::stats::{PhaseStats, ProcessStorage};

    fn rank(storage_read_bytes: Option<u64>, process: Option<ProcessStorage>) -> RankResult {
        RankResult {
            phases: vec![PhaseStats {
                storage_read_bytes,
                storage_write_bytes: storage_read_bytes.map(|_| 10),
                ..Default::default()
            }],
            process_storage: process,
            ..Default::default()
        }
    }

    #[test]
    fn the_ranks_counts_are_summed_and_the_rest_came_from_memory() {
        let r = StorageReport::of(&[rank(Some(300), None), rank(Some(100), None)], 1000, false);
        assert_eq!((r.read_bytes, r.write_bytes), (Some(400), Some(20)));
        assert_eq!(r.cache_served_percent, Some(60.0));
        assert_eq!(r.counted_per, Some("ranks"));
        // Read-ahead fetched more than was read: nothing came from memory.
        assert_eq!(cache_served_percent(100, 120), Some(0.0));
        assert_eq!(cache_served_percent(0, 120), None);
    }

    #[test]
    fn without_every_ranks_count_the_processes_stand_for_the_run() {
        let process = ProcessStorage {
            bytes: StorageBytes {
                read_bytes: 900,
                write_bytes: 5,
            },
            ranks: 2,
        };
        let r = StorageReport::of(&[rank(None, Some(process)), rank(None, None)], 1000, false);
        assert_eq!(
            (r.read_bytes, r.counted_per),
            (Some(900), Some("processes"))
        );
        assert!((r.cache_served_percent.unwrap() - 10.0).abs() < 1e-9);
        // A process that gave none leaves the run uncounted.
        let r = StorageReport::of(
            &[
                rank(None, Some(process)),
                rank(None, None),
                rank(None, None),
            ],
            1000,
            false,
        );
        assert_eq!((r.read_bytes, r.counted_per), (None, None));
        let r = StorageReport::of(&[rank(Some(1), None)], 1000, true);
        assert_eq!(r.read_bytes, None);
        assert!(r.note.unwrap().contains("object-storage"));
    }
}
