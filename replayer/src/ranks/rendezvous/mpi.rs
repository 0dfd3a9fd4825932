//! Processes started by mpirun or srun meet through MPI (cargo feature
//! `mpi`), and nothing is created on the storage under test: a barrier is
//! an all-reduce with MAX that also hands every rank the largest trace clock
//! (`MPI_Iallreduce`, which is `MPI_Barrier` with a payload), the results
//! travel to rank 0 in one variable-size gather, and a job that cannot go on
//! ends with `MPI_Abort`.
//!
//! Collectives are matched by their order, so a rank that fails does not
//! stop meeting the others: it raises a flag at each remaining barrier
//! (every rank then stops replaying and passes the rest at once) and still
//! sends its result, so rank 0 prints the partial report with the cause.
//! A collective that does not complete within the timeout (a rank hung, or
//! stopped outside MPI) ends the job with `MPI_Abort`, as does a process
//! that fails outside the replay loop ([`Rendezvous::end_job`]).
//!
//! Every call is non-blocking and polled, so each wait has its timeout; the
//! pause between polls is short (at most [`POLL_CAP`]) because the spread
//! of the ranks' release from a checkpoint barrier is part of what the
//! replay reproduces.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
use mpi::environment::{Threading, Universe};
use mpi::request::{Request, Scope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;

use super::{Gathered, Rendezvous};
use crate::error::{ReplayError, ReplayResult};
use crate::ranks::launcher::LaunchedRank;
use crate::report::stats::RankResult;
use crate::report::summary::RendezvousInfo;

/// Polls spin this long before they start to sleep.
const SPIN: Duration = Duration::from_micros(50);
const POLL_FIRST: Duration = Duration::from_micros(20);
const POLL_CAP: Duration = Duration::from_micros(500);
/// Exit status of a job ended because a collective timed out.
const TIMEOUT_STATUS: i32 = 3;

struct World {
    /// Finalizes MPI when dropped, at the end of the run.
    _universe: Universe,
    comm: SimpleCommunicator,
}

// SAFETY: MPI handles are plain identifiers; every call through them is made
// under the mutex that owns this value, one at a time, which the threading
// level negotiated in `start` (at least MPI_THREAD_SERIALIZED) allows.
unsafe impl Send for World {}

pub struct MpiRendezvous {
    world: Mutex<World>,
    rank: u32,
    size: u32,
    timeout: Duration,
    /// Set when this rank failed; raised at every later barrier.
    failed: Mutex<bool>,
}

/// What a rank brings to a barrier: its value, whether it failed, and its
/// rank negated when it did (so MAX yields the lowest failed rank).
type Contribution = [i64; 3];

fn contribution(value: i64, failed: bool, rank: u32) -> Contribution {
    [
        value,
        failed as i64,
        if failed { -(rank as i64) } else { i64::MIN },
    ]
}

impl MpiRendezvous {
    /// Initialises MPI and checks that its world is the launcher's: `srun`
    /// without PMI support starts every process as a singleton that thinks
    /// it is rank 0 of 1. Under MPI the rank is MPI's.
    pub fn start(launched: &mut LaunchedRank, timeout: Duration) -> ReplayResult<MpiRendezvous> {
        let (universe, threading) = mpi::initialize_with_threading(Threading::Multiple)
            .ok_or_else(|| ReplayError::Usage("MPI was already initialised".into()))?;
        if !matches!(threading, Threading::Serialized | Threading::Multiple) {
            return Err(ReplayError::Usage(format!(
                "this MPI library offers only {threading:?} threading; the replayer needs \
                 MPI_THREAD_SERIALIZED (its rank thread and main thread call MPI, one at a time)"
            )));
        }
        let comm = universe.world();
        let (rank, size) = (comm.rank() as u32, comm.size() as u32);
        if size != launched.size {
            let hint = if launched.launcher == "slurm" {
                "srun started the processes without PMI support, so each is an MPI singleton: \
                 run `srun --mpi=pmix` (see `srun --mpi=list`), or meet through files with \
                 --rendezvous-dir DIR"
            } else {
                "the launcher and the MPI library do not agree (an mpirun of another MPI?); \
                 launch with the mpirun of the MPI this replayer was built with, or meet \
                 through files with --rendezvous-dir DIR"
            };
            return Err(ReplayError::Usage(format!(
                "MPI started this process as rank {rank} of {size}, but the {} environment \
                 says the job has {} ranks ({}): {hint}",
                launched.launcher, launched.size, launched.size_var
            )));
        }
        launched.rank = rank;
        Ok(MpiRendezvous {
            world: Mutex::new(World {
                _universe: universe,
                comm,
            }),
            rank,
            size,
            timeout,
            failed: Mutex::new(false),
        })
    }

    /// Polls `req` until it completes; past the timeout, ends the job.
    fn wait<'a, D: ?Sized, S: Scope<'a>>(
        &self,
        comm: &SimpleCommunicator,
        mut req: Request<'a, D, S>,
        what: &str,
    ) {
        let start = Instant::now();
        let mut pause = POLL_FIRST;
        loop {
            match req.test() {
                Ok(_) => return,
                Err(r) => req = r,
            }
            let waited = start.elapsed();
            if waited > self.timeout {
                eprintln!(
                    "Error: rank {}: {what} timed out after {:?}: not every rank arrived (a \
                     process hung, or stopped outside MPI); ending the job",
                    self.rank, self.timeout
                );
                comm.abort(TIMEOUT_STATUS);
            }
            if waited < SPIN {
                std::hint::spin_loop();
                continue;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(POLL_CAP);
        }
    }

    /// Gathers `bytes` from every rank on rank 0 (`None` elsewhere).
    fn gather_bytes(&self, bytes: &[u8]) -> ReplayResult<Option<Vec<Vec<u8>>>> {
        let len = Count::try_from(bytes.len()).map_err(|_| {
            ReplayError::Rendezvous(format!(
                "rank {}: its result ({} bytes) is too large to gather",
                self.rank,
                bytes.len()
            ))
        })?;
        let world = self.world.lock().expect("MPI lock");
        let comm = &world.comm;
        let root = comm.process_at_rank(0);
        if self.rank != 0 {
            mpi::request::scope(|sc| {
                self.wait(
                    comm,
                    root.immediate_gather_into(sc, &len),
                    "gathering results",
                )
            });
            mpi::request::scope(|sc| {
                let req = root.immediate_gather_varcount_into(sc, bytes);
                self.wait(comm, req, "gathering results")
            });
            return Ok(None);
        }
        let mut lens: Vec<Count> = vec![0; self.size as usize];
        mpi::request::scope(|sc| {
            let req = root.immediate_gather_into_root(sc, &len, &mut lens[..]);
            self.wait(comm, req, "gathering results")
        });
        let mut displs: Vec<Count> = Vec::with_capacity(lens.len());
        let mut total: Count = 0;
        for &l in &lens {
            displs.push(total);
            total = total.checked_add(l).ok_or_else(|| {
                ReplayError::Rendezvous(
                    "the ranks' results exceed 2 GiB, more than one MPI gather carries".into(),
                )
            })?;
        }
        let mut all = vec![0u8; total as usize];
        {
            let mut part = PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
            mpi::request::scope(|sc| {
                let req = root.immediate_gather_varcount_into_root(sc, bytes, &mut part);
                self.wait(comm, req, "gathering results")
            });
        }
        Ok(Some(
            lens.iter()
                .zip(&displs)
                .map(|(&l, &d)| all[d as usize..(d + l) as usize].to_vec())
                .collect(),
        ))
    }
}

impl Rendezvous for MpiRendezvous {
    fn barrier_max(&self, rank: u32, _seq: u64, what: &str, value: i64) -> ReplayResult<i64> {
        debug_assert_eq!(rank, self.rank);
        let failed = *self.failed.lock().expect("MPI lock");
        let mine = contribution(value, failed, rank);
        let mut all: Contribution = [0; 3];
        {
            let world = self.world.lock().expect("MPI lock");
            let comm = &world.comm;
            mpi::request::scope(|sc| {
                let req = comm.immediate_all_reduce_into(
                    sc,
                    &mine[..],
                    &mut all[..],
                    SystemOperation::max(),
                );
                self.wait(comm, req, &format!("barrier `{what}`"))
            });
        }
        if all[1] > 0 {
            return Err(ReplayError::Aborted(format!(
                "rank {} failed (its error is in the report)",
                -all[2]
            )));
        }
        Ok(all[0])
    }

    fn abort(&self, _rank: u32, _message: &str) {
        // The message reaches rank 0 with this rank's result; the others
        // learn of the failure at their next barrier.
        *self.failed.lock().expect("MPI lock") = true;
    }

    fn needs_every_barrier(&self) -> bool {
        true
    }

    fn gather(&self, local: Vec<RankResult>) -> ReplayResult<Gathered> {
        let mine = local.into_iter().next().unwrap_or_default();
        let Some(all) = self.gather_bytes(mine.to_json().as_bytes())? else {
            return Ok(Gathered {
                results: None,
                problem: None,
            });
        };
        let mut results = Vec::with_capacity(all.len());
        let mut problems = Vec::new();
        for (r, bytes) in all.iter().enumerate() {
            match std::str::from_utf8(bytes)
                .map_err(|e| e.to_string())
                .and_then(RankResult::from_json)
            {
                Ok(res) => results.push(res),
                Err(e) => problems.push(format!("the result of rank {r} is unreadable: {e}")),
            }
        }
        Ok(Gathered {
            results: Some(results),
            problem: (!problems.is_empty()).then(|| problems.join("; ")),
        })
    }

    fn info(&self) -> RendezvousInfo {
        RendezvousInfo {
            mechanism: "mpi",
            dir: None,
        }
    }

    fn end_job(&self, error: &ReplayError) {
        if matches!(error, ReplayError::Aborted(_)) {
            // Another rank failed and ends the job itself.
            return;
        }
        eprintln!("Error: rank {}: {error}", self.rank);
        let world = self.world.lock().expect("MPI lock");
        world.comm.abort(error.exit_code() as i32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_failed_rank_survives_max() {
        let a = contribution(10, false, 0);
        let b = contribution(30, true, 5);
        let c = contribution(20, true, 2);
        let max: Vec<i64> = (0..3).map(|i| a[i].max(b[i]).max(c[i])).collect();
        assert_eq!(max, vec![30, 1, -2]);
    }
}
