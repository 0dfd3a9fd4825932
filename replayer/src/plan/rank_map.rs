//! Which source rank each target rank replays, and which replica's copy of
//! the read-only data it reads.
//!
//! Target rank `t` replays source rank `t mod R` (which of its ops it
//! makes is the scaling model's, [`crate::plan::scale`]); `t / R` is its replica
//! index. With `--data shard` or `--shared-data` the ranks share one copy
//! of the data. Where each copy's paths land beneath the target is
//! [`crate::io::paths`]' to say.

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
