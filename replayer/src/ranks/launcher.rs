//! Who this process is: its rank and the world size, from the environment a
//! launcher (Slurm, Open MPI, MPICH/PMI, torchrun) sets, or none when the
//! replayer runs all ranks itself as threads.

use iorepro_format::launchers::LAUNCHERS;

use crate::error::{ReplayError, ReplayResult};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchedRank {
    pub launcher: &'static str,
    pub rank: u32,
    pub size: u32,
    /// The variable that gave `size`, for messages.
    pub size_var: &'static str,
    /// Node index when the launcher says (Slurm, torchrun); otherwise derived from host names.
    pub node: Option<u32>,
    pub local_rank: Option<u32>,
    /// Identifies this job, so concurrent or stale runs do not share rendezvous files.
    pub job_id: Option<String>,
}

/// Reads the launcher's variables through `get` (the process environment in
/// production, a map in tests). A half-set environment is an error.
pub fn detect_with(get: impl Fn(&str) -> Option<String>) -> ReplayResult<Option<LaunchedRank>> {
    let num = |k: &str| -> ReplayResult<Option<u32>> {
        match get(k) {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| {
                ReplayError::Usage(format!("environment variable {k}={v:?} is not a number"))
            }),
        }
    };
    // The order is the trace format's (most specific first), so a process
    // has the rank here that the collector gives its I/O.
    for l in &LAUNCHERS {
        let (launcher, rank_var, size_var) = (l.name, l.rank_var, l.size_var);
        let (rank, size) = (num(rank_var)?, num(size_var)?);
        let (rank, size) = match (rank, size) {
            (None, None) => continue,
            (Some(r), Some(s)) => (r, s),
            _ => {
                return Err(ReplayError::Usage(format!(
                    "{launcher} environment is incomplete: need both {rank_var} and {size_var}"
                )))
            }
        };
        if size == 0 || rank >= size {
            return Err(ReplayError::Usage(format!(
                "{launcher} environment: {rank_var}={rank} is not below {size_var}={size}"
            )));
        }
        let job: Vec<String> = l.job_vars.iter().filter_map(|k| get(k)).collect();
        return Ok(Some(LaunchedRank {
            launcher,
            rank,
            size,
            size_var,
            node: l.node_var.map(&num).transpose()?.flatten(),
            local_rank: num(l.local_rank_var)?,
            job_id: (!job.is_empty()).then(|| job.join(".")),
        }));
    }
    Ok(None)
}

pub fn detect() -> ReplayResult<Option<LaunchedRank>> {
    detect_with(|k| std::env::var(k).ok())
}

/// The name of this process's host, for the report.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn each_launcher_is_recognised() {
        let s = detect_with(env(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_NODEID", "1"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "0"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (s.launcher, s.rank, s.size, s.node, s.local_rank),
            ("slurm", 3, 8, Some(1), Some(1))
        );
        assert_eq!(s.job_id.as_deref(), Some("77.0"));
        let o = detect_with(env(&[
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "2"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (o.launcher, o.rank, o.size, o.local_rank),
            ("openmpi", 2, 4, Some(2))
        );
        let p = detect_with(env(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")]))
            .unwrap()
            .unwrap();
        assert_eq!((p.launcher, p.rank, p.size), ("pmi", 1, 2));
        let t = detect_with(env(&[
            ("RANK", "5"),
            ("WORLD_SIZE", "16"),
            ("LOCAL_RANK", "1"),
            ("GROUP_RANK", "2"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (t.launcher, t.rank, t.size, t.node),
            ("torchrun", 5, 16, Some(2))
        );
        assert_eq!(detect_with(env(&[])).unwrap(), None);
    }

    #[test]
    fn a_launcher_inside_a_slurm_allocation_wins_over_it() {
        // A batch script's variables are inherited by what mpirun starts.
        let batch = [
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_JOB_ID", "77"),
        ];
        let mut under_mpirun = batch.to_vec();
        under_mpirun.extend([("OMPI_COMM_WORLD_RANK", "5"), ("OMPI_COMM_WORLD_SIZE", "8")]);
        let o = detect_with(env(&under_mpirun)).unwrap().unwrap();
        assert_eq!(
            (o.launcher, o.rank, o.size_var),
            ("openmpi", 5, "OMPI_COMM_WORLD_SIZE")
        );
        let mut under_torchrun = batch.to_vec();
        under_torchrun.extend([("RANK", "3"), ("WORLD_SIZE", "4")]);
        let t = detect_with(env(&under_torchrun)).unwrap().unwrap();
        assert_eq!((t.launcher, t.rank, t.size), ("torchrun", 3, 4));
    }

    #[test]
    fn inconsistent_environments_are_errors() {
        assert!(detect_with(env(&[("RANK", "5")])).is_err());
        assert!(detect_with(env(&[("RANK", "5"), ("WORLD_SIZE", "4")])).is_err());
        assert!(detect_with(env(&[("PMI_RANK", "x"), ("PMI_SIZE", "4")])).is_err());
    }
}
