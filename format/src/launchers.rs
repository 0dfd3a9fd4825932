//! Where a process's rank comes from: the variables each launcher sets. The
//! `rank` column is defined by this table, so the collector (reading a traced
//! process's environment) and the replayer (reading its own) agree on who a
//! process is.
//!
//! Most specific first: mpirun and torchrun set their variables for each
//! process they start, while Slurm's are also inherited by everything a batch
//! script runs (an `mpirun` or `torchrun` inside an allocation included), so
//! under `srun` + `mpirun` Open MPI's rank is the process's own.

/// One launcher's variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launcher {
    pub name: &'static str,
    /// The process's global rank.
    pub rank_var: &'static str,
    /// How many ranks the job has.
    pub size_var: &'static str,
    /// The rank among those on the same node.
    pub local_rank_var: &'static str,
    /// The node's index, where the launcher says.
    pub node_var: Option<&'static str>,
    /// Variables that identify the job (joined, they tell concurrent runs apart).
    pub job_vars: &'static [&'static str],
}

/// Every launcher whose ranks iorepro reads, most specific first.
pub const LAUNCHERS: [Launcher; 4] = [
    Launcher {
        name: "openmpi",
        rank_var: "OMPI_COMM_WORLD_RANK",
        size_var: "OMPI_COMM_WORLD_SIZE",
        local_rank_var: "OMPI_COMM_WORLD_LOCAL_RANK",
        node_var: None,
        job_vars: &["PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"],
    },
    Launcher {
        name: "pmi",
        rank_var: "PMI_RANK",
        size_var: "PMI_SIZE",
        local_rank_var: "MPI_LOCALRANKID",
        node_var: None,
        job_vars: &["PMI_KVSNAME", "PMIX_NAMESPACE"],
    },
    Launcher {
        name: "torchrun",
        rank_var: "RANK",
        size_var: "WORLD_SIZE",
        local_rank_var: "LOCAL_RANK",
        node_var: Some("GROUP_RANK"),
        job_vars: &["TORCHELASTIC_RUN_ID", "MASTER_PORT"],
    },
    Launcher {
        name: "slurm",
        rank_var: "SLURM_PROCID",
        size_var: "SLURM_NTASKS",
        local_rank_var: "SLURM_LOCALID",
        node_var: Some("SLURM_NODEID"),
        job_vars: &["SLURM_JOB_ID", "SLURM_STEP_ID"],
    },
];

/// The rank a process with this environment has: the first launcher's rank
/// variable that is set to a number. `get` reads one variable.
pub fn rank_from(get: impl Fn(&str) -> Option<String>) -> Option<i32> {
    LAUNCHERS
        .iter()
        .find_map(|l| get(l.rank_var)?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_launcher_that_started_the_process_wins_over_slurm() {
        assert_eq!(
            rank_from(env(&[("SLURM_PROCID", "7"), ("RANK", "3")])),
            Some(3)
        );
        assert_eq!(
            rank_from(env(&[("SLURM_PROCID", "0"), ("OMPI_COMM_WORLD_RANK", "5")])),
            Some(5)
        );
        assert_eq!(
            rank_from(env(&[("PMI_RANK", "5"), ("SLURM_PROCID", "5")])),
            Some(5)
        );
        assert_eq!(
            rank_from(env(&[("RANK", "abc"), ("PMI_RANK", "4")])),
            Some(4)
        );
        assert_eq!(rank_from(env(&[("RANKS", "1")])), None);
    }
}
