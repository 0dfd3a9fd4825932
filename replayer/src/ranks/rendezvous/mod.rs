//! Where ranks meet: barriers (data prepared, run start, checkpoint start and
//! end), the abort of a failed run, and the gathering of results on the rank
//! that reports. Three mechanisms behind one trait, so the rest of the
//! replayer never asks which one runs:
//!
//! - [`threads`]: the ranks are threads of this process (no launcher);
//! - [`files`]: processes of a launcher without MPI (torchrun, bare srun)
//!   meet through files in a rendezvous directory, on a shared path off the
//!   target (`--rendezvous-dir`) or, by default, on the target itself;
//! - `mpi` (cargo feature `mpi`): processes of mpirun or srun meet through
//!   MPI collectives and create nothing on the storage under test.
//!
//! Every wait has a timeout whose error says what was awaited.

pub mod files;
mod liveness;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod threads;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{ReplayError, ReplayResult};
use crate::io::confine::Confined;
use crate::io::target::NO_MEETING_ON_A_BUCKET;
use crate::ranks::launcher::LaunchedRank;
use crate::report::stats::RankResult;
use crate::report::summary::RendezvousInfo;

pub use files::FileRendezvous;
pub use threads::ThreadRendezvous;

/// Directory (relative to the target) holding the rendezvous files of
/// multi-process runs when no `--rendezvous-dir` is given.
pub const ON_TARGET_DIR: &str = ".iorepro-rendezvous";

pub trait Rendezvous: Send + Sync {
    /// Waits until every rank has reached barrier number `seq`; `what` names it in errors.
    fn barrier(&self, rank: u32, seq: u64, what: &str) -> ReplayResult<()> {
        self.barrier_max(rank, seq, what, 0).map(|_| ())
    }
    /// A barrier at which each rank brings a value (how far through the
    /// trace it is) and all leave with the largest: the trace time at which
    /// the last rank was ready.
    fn barrier_max(&self, rank: u32, seq: u64, what: &str, value: i64) -> ReplayResult<i64>;
    /// Tells every other rank to stop at its next wait.
    fn abort(&self, rank: u32, message: &str);
    /// Whether every rank must still make each of its barrier calls, in
    /// order, after a failure (MPI collectives are matched by their order);
    /// elsewhere a rank that failed simply stops meeting the others.
    fn needs_every_barrier(&self) -> bool {
        false
    }
    /// Brings the results of this process's ranks to the reporting process.
    fn gather(&self, local: Vec<RankResult>) -> ReplayResult<Gathered>;
    /// Which mechanism this is, for the report.
    fn info(&self) -> RendezvousInfo;
    /// Ends the whole job after this process failed outside the replay
    /// loop (under MPI the others would wait for it at the next collective;
    /// `MPI_Abort` stops them). Elsewhere the error is just returned.
    fn end_job(&self, _error: &ReplayError) {}
}

/// What [`Rendezvous::gather`] brought: every rank's result on the reporting
/// process (`None` on the others), and a line naming ranks that never reported.
pub struct Gathered {
    pub results: Option<Vec<RankResult>>,
    pub problem: Option<String>,
}

/// Which mechanism a process uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Threads,
    Files,
    Mpi,
}

impl Mechanism {
    /// Threads without a launcher; MPI under mpirun, srun or a PMI launcher
    /// when this binary has it and no `--rendezvous-dir` asks for files;
    /// files otherwise (torchrun sets up no MPI world).
    pub fn choose(launched: Option<&LaunchedRank>, rendezvous_dir: bool) -> Mechanism {
        match launched {
            None => Mechanism::Threads,
            Some(_) if rendezvous_dir => Mechanism::Files,
            Some(l) if cfg!(feature = "mpi") && l.launcher != "torchrun" => Mechanism::Mpi,
            Some(_) => Mechanism::Files,
        }
    }
}

/// Starts MPI when this process is to meet the others through it, and
/// takes its rank from the MPI world. `Ok(None)` for the other mechanisms.
pub fn start_mpi(
    launched: &mut Option<LaunchedRank>,
    rendezvous_dir: bool,
    timeout: Duration,
) -> ReplayResult<Option<Arc<dyn Rendezvous>>> {
    if Mechanism::choose(launched.as_ref(), rendezvous_dir) != Mechanism::Mpi {
        return Ok(None);
    }
    #[cfg(feature = "mpi")]
    {
        let l = launched.as_mut().expect("MPI is chosen under a launcher");
        let m = mpi::MpiRendezvous::start(l, timeout)?;
        Ok(Some(Arc::new(m)))
    }
    #[cfg(not(feature = "mpi"))]
    {
        let _ = timeout;
        unreachable!("MPI is never chosen without the mpi feature")
    }
}

/// Where and how long launched processes meet when not through MPI.
#[derive(Debug, Clone)]
pub struct MeetOptions {
    /// `--rendezvous-dir`: a shared directory off the target.
    pub dir: Option<PathBuf>,
    /// `--run-id`: names the rendezvous when the launcher gives no job id.
    pub run_id: Option<String>,
    /// `--timeout`: the longest any rank waits for the others.
    pub timeout: Duration,
}

/// What the files and threads mechanisms need to start.
pub struct Setup<'a> {
    pub launched: Option<&'a LaunchedRank>,
    /// The ranks this process runs (threads: all of them).
    pub local_ranks: Vec<u32>,
    /// The target directory, where the ranks meet by default; `None` on a
    /// bucket, which cannot hold the rendezvous files.
    pub target: Option<&'a Arc<Confined>>,
    pub options: &'a MeetOptions,
}

/// The threads or files mechanism for this process (MPI is started earlier
/// by [`start_mpi`]).
pub fn connect(s: Setup<'_>) -> ReplayResult<Arc<dyn Rendezvous>> {
    let timeout = s.options.timeout;
    let Some(l) = s.launched else {
        return Ok(Arc::new(ThreadRendezvous::new(s.local_ranks, timeout)));
    };
    let id = l
        .job_id
        .clone()
        .or_else(|| s.options.run_id.clone())
        .unwrap_or_else(|| "default".into());
    let job = PathBuf::from(safe_id(&id));
    let (conf, rel) = match (s.options.dir.as_deref(), s.target) {
        (Some(dir), _) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| ReplayError::io("creating rendezvous directory", dir, e))?;
            let conf = Confined::open_root(dir)
                .map_err(|e| ReplayError::io("opening rendezvous directory", dir, e))?;
            (Arc::new(conf), job)
        }
        (None, None) => return Err(ReplayError::Usage(NO_MEETING_ON_A_BUCKET.into())),
        (None, Some(target)) => {
            let rel = PathBuf::from(ON_TARGET_DIR).join(job);
            if l.rank == 0 {
                eprintln!(
                    "note: the ranks meet through files in {}, on the storage under test, and \
                     their polling adds to the measured metadata load; pass --rendezvous-dir DIR \
                     (a shared path off the target){}",
                    target.display(&rel).display(),
                    if cfg!(feature = "mpi") {
                        ""
                    } else {
                        ", or use a build with MPI (cargo feature `mpi`) under mpirun or srun"
                    }
                );
            }
            (target.clone(), rel)
        }
    };
    let f = FileRendezvous::new(conf, rel, l.rank, l.size, timeout)?;
    f.announce()?;
    Ok(Arc::new(f))
}

/// A job id made safe as one path component.
fn safe_id(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s == "." || s == ".." {
        format!("_{s}")
    } else {
        s
    }
}

/// Up to 16 rank numbers for an error line, then how many more.
pub(crate) fn missing_list(missing: &[u32]) -> String {
    let shown: Vec<String> = missing.iter().take(16).map(|r| r.to_string()).collect();
    let more = missing.len().saturating_sub(16);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launched(launcher: &'static str) -> LaunchedRank {
        LaunchedRank {
            launcher,
            rank: 0,
            size: 2,
            size_var: "SIZE",
            node: None,
            local_rank: None,
            job_id: None,
        }
    }

    #[test]
    fn the_mechanism_follows_the_launcher_and_the_options() {
        assert_eq!(Mechanism::choose(None, false), Mechanism::Threads);
        assert_eq!(Mechanism::choose(None, true), Mechanism::Threads);
        let torchrun = launched("torchrun");
        assert_eq!(Mechanism::choose(Some(&torchrun), false), Mechanism::Files);
        let mpirun = launched("openmpi");
        assert_eq!(
            Mechanism::choose(Some(&mpirun), true),
            Mechanism::Files,
            "--rendezvous-dir asks for files"
        );
        let expected = if cfg!(feature = "mpi") {
            Mechanism::Mpi
        } else {
            Mechanism::Files
        };
        assert_eq!(Mechanism::choose(Some(&mpirun), false), expected);
        assert_eq!(Mechanism::choose(Some(&launched("slurm")), false), expected);
    }

    #[test]
    fn job_ids_become_one_path_component() {
        assert_eq!(safe_id("77.0"), "77.0");
        assert_eq!(safe_id("../x/y"), ".._x_y");
        assert_eq!(safe_id(".."), "_..");
    }
}
