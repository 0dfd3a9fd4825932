//! Where each trace path lands under the target, and which source rank each
//! target rank replays.
//!
//! Target rank `t` replays source rank `t mod R` (which of its ops it
//! makes is the scaling model's, [`crate::plan::scale`]); `t / R` is its replica
//! index. With `--data shard` the ranks share one copy of the data. Files that are only read live under `data/rep-KKKK/` (one copy per
//! replica, so replicas of a source rank do not read data another rank just
//! pulled into a cache) or all under `data/rep-0000/` with `--shared-data`.
//! Files that the trace writes, truncates, renames or unlinks live under
//! `ranks/rank-TTTTT/`, so every target rank works on its own.

use std::path::{Path, PathBuf};

use crate::io::confine::normalise;

#[derive(Debug, Clone)]
pub struct RankMap {
    /// Distinct ranks of the trace, in order; index = source index.
    pub sources: Vec<i32>,
    pub shared_data: bool,
    /// The dataset's reads are shared out over the target ranks
    /// (`--data shard`): one copy, which holds every file any source read.
    pub data_sharded: bool,
}

impl RankMap {
    pub fn source_count(&self) -> u32 {
        self.sources.len() as u32
    }

    /// Index into `sources` replayed by target rank `t`.
    pub fn source_index(&self, target: u32) -> usize {
        (target % self.source_count()) as usize
    }

    pub fn source_rank(&self, target: u32) -> i32 {
        self.sources[self.source_index(target)]
    }

    /// The replica whose copy of the read-only data target rank `t` reads.
    pub fn replica(&self, target: u32) -> u32 {
        if self.shared_data || self.data_sharded {
            0
        } else {
            target / self.source_count()
        }
    }

    /// How many copies of the read-only data a world of `world` ranks reads.
    pub fn replicas(&self, world: u32) -> u32 {
        if self.shared_data || self.data_sharded {
            1
        } else {
            world.div_ceil(self.source_count()).max(1)
        }
    }

    /// Whether target rank `t` exists in a world of `world` for source index `s` and replica `k`.
    pub fn replica_has_source(&self, world: u32, replica: u32, source_index: usize) -> bool {
        if self.data_sharded {
            replica == 0
        } else if self.shared_data {
            (source_index as u32) < world
        } else {
            replica * self.source_count() + (source_index as u32) < world
        }
    }
}

/// The data path of a read-only trace file for one replica.
pub fn data_path(replica: u32, normalised: &Path) -> PathBuf {
    Path::new("data")
        .join(format!("rep-{replica:04}"))
        .join(normalised)
}

/// The private path of a file a target rank writes.
pub fn rank_path(target: u32, normalised: &Path) -> PathBuf {
    Path::new("ranks")
        .join(format!("rank-{target:05}"))
        .join(normalised)
}

/// Where a trace path lands for a target rank; `None` when the trace path is unusable.
pub fn remap(trace_path: &str, written: bool, target: u32, map: &RankMap) -> Option<PathBuf> {
    let n = normalise(trace_path)?;
    Some(if written {
        rank_path(target, &n)
    } else {
        data_path(map.replica(target), &n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_map_to_sources_and_replicas() {
        let m = RankMap {
            sources: vec![0, 1],
            shared_data: false,
            data_sharded: false,
        };
        let got: Vec<(i32, u32)> = (0..5).map(|t| (m.source_rank(t), m.replica(t))).collect();
        assert_eq!(got, vec![(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]);
        assert_eq!(m.replicas(5), 3);
        assert!(m.replica_has_source(5, 2, 0));
        assert!(!m.replica_has_source(5, 2, 1));
        assert_eq!(
            remap("/d/f", false, 3, &m).unwrap(),
            PathBuf::from("data/rep-0001/d/f")
        );
        assert_eq!(
            remap("/c/x.pt", true, 3, &m).unwrap(),
            PathBuf::from("ranks/rank-00003/c/x.pt")
        );
        let shared = RankMap {
            shared_data: true,
            ..m
        };
        assert_eq!(shared.replica(3), 0);
        let sharded = RankMap {
            shared_data: false,
            data_sharded: true,
            ..shared
        };
        assert_eq!((sharded.replica(3), sharded.replicas(5)), (0, 1));
        assert!(
            sharded.replica_has_source(1, 0, 1),
            "a source past the world is read too"
        );
    }
}
