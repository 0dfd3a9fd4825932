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

/// The ranks and nodes the command line asks for (`--ranks`, `--nodes`,
/// `--ranks-per-node`); a launcher's world decides where there is one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Asked {
    pub ranks: Option<u32>,
    pub nodes: Option<u32>,
    pub ranks_per_node: Option<u32>,
}

/// How many ranks a replay has: the launcher's world size under a launcher
/// (`--ranks`, if given, must agree), else `--ranks`, else the trace's
/// `sources` ranks. The one decision, so that `--plan-only` plans for the
/// world the replay would run.
pub fn world_size(
    launched: Option<&LaunchedRank>,
    ranks: Option<u32>,
    sources: u32,
) -> ReplayResult<u32> {
    match launched {
        Some(l) => match ranks.filter(|&n| n != l.size) {
            Some(n) => Err(ReplayError::Usage(format!(
                "--ranks {n} contradicts the {} launcher's world size {}; under a launcher each process is one rank",
                l.launcher, l.size
            ))),
            None => Ok(l.size),
        },
        None => Ok(ranks.unwrap_or(sources)),
    }
}

impl Layout {
    /// The layout `--ranks`, `--nodes` and `--ranks-per-node` ask for (the
    /// world is [`world_size`]), or the launcher's.
    pub fn of(launched: Option<&LaunchedRank>, asked: Asked, sources: u32) -> ReplayResult<Layout> {
        let Asked {
            ranks,
            nodes,
            ranks_per_node,
        } = asked;
        let world = world_size(launched, ranks, sources)?;
        if let Some(l) = launched {
            let node = l.node.unwrap_or(0);
            // 0 = count the distinct hosts the gathered results come from.
            return Ok(Layout {
                world,
                local: vec![(l.rank, node)],
                nodes: nodes.unwrap_or(0),
            });
        }
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
        let asked = |ranks, nodes, ranks_per_node| Asked {
            ranks,
            nodes,
            ranks_per_node,
        };
        let l = Layout::of(None, asked(Some(5), Some(2), None), 2).unwrap();
        assert_eq!((l.world, l.nodes), (5, 2));
        assert_eq!(l.local, vec![(0, 0), (1, 0), (2, 0), (3, 1), (4, 1)]);
        assert_eq!(Layout::of(None, Asked::default(), 3).unwrap().world, 3);
        assert!(Layout::of(None, asked(Some(5), Some(2), Some(2)), 2).is_err());
    }

    #[test]
    fn the_launcher_decides_the_world_and_ranks_must_agree() {
        let launched = crate::ranks::launcher::detect_with(|k| match k {
            "OMPI_COMM_WORLD_RANK" => Some("1".into()),
            "OMPI_COMM_WORLD_SIZE" => Some("4".into()),
            _ => None,
        })
        .unwrap()
        .unwrap();
        let l = Some(&launched);
        assert_eq!(world_size(l, None, 2).unwrap(), 4);
        assert_eq!(world_size(l, Some(4), 2).unwrap(), 4);
        let e = world_size(l, Some(8), 2).unwrap_err().to_string();
        assert!(e.contains("contradicts"), "{e}");
        assert_eq!(world_size(None, None, 2).unwrap(), 2);
        assert_eq!(world_size(None, Some(8), 2).unwrap(), 8);
        let lay = Layout::of(l, Asked::default(), 2).unwrap();
        assert_eq!((lay.world, lay.local.clone()), (4, vec![(1, 0)]));
    }
}
