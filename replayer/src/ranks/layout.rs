//! Which ranks this process runs: the one the launcher gave it, or, without
//! a launcher, every rank of the world as threads, spread over nodes for
//! the report.

use crate::error::{ReplayError, ReplayResult};
use crate::ranks::launcher::LaunchedRank;

/// The ranks this process runs, the world size, and each local rank's node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub world: u32,
    /// (target rank, node) of each rank this process runs.
    pub local: Vec<(u32, u32)>,
    /// Nodes of the world; 0 = count the distinct hosts the gathered
    /// results come from.
    pub nodes: u32,
}

impl Layout {
    /// The layout `--ranks`, `--nodes` and `--ranks-per-node` ask for (the
    /// world defaults to the trace's `sources` ranks), or the launcher's.
    pub fn of(
        launched: Option<&LaunchedRank>,
        ranks: Option<u32>,
        nodes: Option<u32>,
        ranks_per_node: Option<u32>,
        sources: u32,
    ) -> ReplayResult<Layout> {
        if let Some(l) = launched {
            if let Some(n) = ranks.filter(|&n| n != l.size) {
                return Err(ReplayError::Usage(format!(
                    "--ranks {n} contradicts the {} launcher's world size {}; under a launcher each process is one rank",
                    l.launcher, l.size
                )));
            }
            let node = l.node.unwrap_or(0);
            // 0 = count the distinct hosts the gathered results come from.
            return Ok(Layout {
                world: l.size,
                local: vec![(l.rank, node)],
                nodes: nodes.unwrap_or(0),
            });
        }
        let world = ranks.unwrap_or(sources);
        let (nodes, per_node) = match (nodes, ranks_per_node) {
            (Some(m), Some(k)) => {
                if m * k < world {
                    return Err(ReplayError::Usage(format!(
                        "--nodes {m} x --ranks-per-node {k} holds fewer than {world} ranks"
                    )));
                }
                (m, k)
            }
            (Some(m), None) => (m, world.div_ceil(m)),
            (None, Some(k)) => (world.div_ceil(k), k),
            (None, None) => (1, world),
        };
        Ok(Layout {
            world,
            local: (0..world).map(|t| (t, t / per_node.max(1))).collect(),
            nodes,
        })
    }

    /// The rank that speaks for this process (its first).
    pub fn my_rank(&self) -> u32 {
        self.local[0].0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_spread_over_the_nodes_asked_for() {
        let l = Layout::of(None, Some(5), Some(2), None, 2).unwrap();
        assert_eq!((l.world, l.nodes), (5, 2));
        assert_eq!(l.local, vec![(0, 0), (1, 0), (2, 0), (3, 1), (4, 1)]);
        assert_eq!(Layout::of(None, None, None, None, 3).unwrap().world, 3);
        assert!(Layout::of(None, Some(5), Some(2), Some(2), 2).is_err());
    }
}
