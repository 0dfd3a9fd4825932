//! Execute: one target rank's replay loop. A [`Worker`] takes the ops the
//! plan's stream sends it ([`crate::plan::stream::Chunk`]) in order,
//! crosses phase boundaries (meeting the other ranks at checkpoints through
//! [`crate::ranks`]), and makes each call through the [`crate::io`] room
//! on files opened beneath the target, measuring it. What it hands on is
//! its [`RankResult`], which the ranks gather and [`crate::report`] merges
//! (and, with `--record-ops`, the calls it made, to the report's record).
//!
//! Here the loop and its phases, and where a traced path lands for the
//! rank; `calls` one call made and measured, on whichever kind of target
//! the run has; `files` the calls on files beneath a directory target,
//! with `metadata` its metadata calls and `copies` the copies the kernel
//! made for the job; `objects` what the calls become on
//! an object-storage target; `outcome` what a call came to, on either.

mod calls;
mod copies;
mod files;
mod metadata;
mod objects;
mod outcome;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Instant;

use calls::Calls;

use crate::error::{ReplayError, ReplayResult};
use crate::io::buffers::{PrivateCopies, SharedData};
use crate::io::engine::{DirectIo, EngineKind};
use crate::io::paths::{resolve, Place};
use crate::io::target::Opened;
use crate::io::task_io::{StorageBytes, TaskIo};
use crate::live::{LiveRanks, RankLive};
use crate::plan::rank_map::RankMap;
use crate::plan::stream::Chunk;
use crate::plan::survey::Survey;
use crate::plan::timing::{Schedule, Timing};
use crate::ranks::rendezvous::Rendezvous;
use crate::report::record::{RankRecorder, Recorder};
use crate::report::stats::{thread_cpu_ns, unix_ns, BarrierStamp, PhaseStats, RankResult};
use iorepro_analysis::phases::Phase;

/// How each call is made: `--timing`, `--direct`, `--evict-reads` and
/// `--engine`.
#[derive(Debug, Clone, Copy)]
pub struct CallOptions {
    pub timing: Timing,
    pub direct: DirectIo,
    pub evict_reads: bool,
    pub engine: EngineKind,
}

/// What all local ranks share.
pub struct Shared {
    /// Where the calls land: a directory, or a bucket.
    pub target: Opened,
    pub survey: Arc<Survey>,
    pub map: RankMap,
    pub phase_selected: Vec<bool>,
    pub timing: Timing,
    /// Per source index: how many target ranks share its dataset reads,
    /// each making that share of its steps (see [`crate::plan::timing`]).
    pub read_sharers: Vec<u32>,
    pub direct: DirectIo,
    /// Drops each file read-only from the page cache after its close
    /// (`--evict-reads`).
    pub evictor: Option<crate::io::evict::Evictor>,
    pub engine: EngineKind,
    pub rendezvous: Arc<dyn Rendezvous>,
    pub progress: Arc<AtomicU64>,
    /// Every local rank's figures so far, for status lines and metrics.
    pub live: Arc<LiveRanks>,
    pub recorder: Option<Recorder>,
    pub host: String,
    /// The data buffer every rank of this process reads into and writes from.
    pub data: SharedData,
    /// Private copies for writes too large to gather, and for O_DIRECT.
    pub copies: PrivateCopies,
}

impl Shared {
    fn phases(&self) -> &[Phase] {
        &self.survey.phases
    }

    /// Trace time at which the replay's clock starts: the start of the first
    /// phase replayed (the trace's start unless `--phases` skips some).
    fn origin_ns(&self) -> i64 {
        self.phases()
            .iter()
            .zip(&self.phase_selected)
            .find(|(_, &on)| on)
            .map_or(self.survey.start_ns, |(p, _)| p.start_unix_ns)
    }

    /// A save replayed at which the traced ranks met.
    fn is_barrier_phase(&self, i: usize) -> bool {
        self.survey.ranks_meet_at(i, &self.phase_selected)
    }

    /// A training step's compute at the replay's pace (the traced pause
    /// between a rank's bursts of reading, times `--timing`'s factor);
    /// `None` with `afap` or where the trace shows no steps.
    fn step_compute_ns(&self) -> Option<u64> {
        let Timing::Scaled(f) = self.timing else {
            return None;
        };
        let ns = (self.survey.step_compute_s * f * 1e9) as u64;
        (ns > 0).then_some(ns)
    }

    /// A phase in which ranks make their steps.
    fn has_steps(&self, i: usize) -> bool {
        self.survey.has_steps(i)
    }

    /// Barriers every rank meets in a full replay: the start, and the start
    /// and end of every save replayed at which the ranks meet.
    fn barrier_count(&self) -> u64 {
        let checkpoints = (0..self.phases().len())
            .filter(|&i| self.is_barrier_phase(i))
            .count() as u64;
        1 + 2 * checkpoints
    }

    /// After rank `rank` failed having met `met` barriers, meets the rest
    /// where the mechanism needs every rank at every barrier (MPI), so the
    /// others are not left waiting; the results do not matter any more.
    pub fn skip_remaining_barriers(&self, rank: u32, met: u64) {
        if !self.rendezvous.needs_every_barrier() {
            return;
        }
        for seq in met..self.barrier_count() {
            let _ = self
                .rendezvous
                .barrier_max(rank, seq, "after a failure", i64::MIN);
        }
    }
}

/// Where this rank's copy of each traced path lands, relative to the
/// target: resolved at the path's first call, then remembered.
struct Places<'s> {
    shared: &'s Shared,
    rank: u32,
    rel: HashMap<u32, PathBuf>,
}

impl<'s> Places<'s> {
    fn new(shared: &'s Shared, rank: u32) -> Self {
        Places {
            shared,
            rank,
            rel: HashMap::new(),
        }
    }

    /// Where trace path `id` lands for this rank.
    fn rel_path(&mut self, id: u32) -> ReplayResult<PathBuf> {
        if let Some(p) = self.rel.get(&id) {
            return Ok(p.clone());
        }
        let info = &self.shared.survey.paths[id as usize];
        let place = Place::of_call(info, self.rank, &self.shared.map);
        let rel = resolve(&info.path, place).ok_or_else(|| {
            ReplayError::Usage(format!(
                "refused trace path {:?}: it names no file under the target",
                &*info.path
            ))
        })?;
        self.rel.insert(id, rel.clone());
        Ok(rel)
    }

    /// How messages and the record name the copy of trace path `id`, once
    /// a call has resolved it.
    fn shown(&self, id: u32) -> Option<PathBuf> {
        self.rel.get(&id).map(|rel| self.shared.target.display(rel))
    }
}

/// Where a rank stood when it made a traced process's first op.
#[derive(Debug, Clone, Copy)]
struct ProcessBegan {
    issued: Instant,
    /// The schedule's compute and ideal time then.
    clock: (u64, u64),
}

pub struct Worker<'s> {
    shared: &'s Shared,
    rank: u32,
    /// The rank's calls on the target, with what they hold open there.
    calls: Calls<'s>,
    /// Traced processes this rank has made an op of, and where the rank
    /// stood when it made each one's first.
    processes: HashMap<i32, ProcessBegan>,
    /// When the source rank's first traced process made its first call.
    rank_start: Option<i64>,
    /// The rank's op figures, kept where status lines and metrics read them.
    live: Arc<RankLive>,
    result: RankResult,
    sched: Schedule,
    phase: usize,
    phase_entered: Instant,
    /// The schedule's compute and ideal time when the phase was entered.
    phase_clock: (u64, u64),
    barriers: u64,
    /// In a checkpoint phase until its first write: the schedule's compute
    /// time when the rank left the barrier.
    awaiting_first_write: Option<u64>,
    started: Instant,
    /// The rank's thread's CPU time when its replay started.
    cpu_started: u64,
    /// The kernel's count of what the rank's thread caused the storage to
    /// read and write, held open for the rank's life (`None` where the
    /// kernel keeps none), and the count when the last phase closed.
    storage: Option<TaskIo>,
    storage_mark: Option<StorageBytes>,
    record: Option<RankRecorder>,
}

impl<'s> Worker<'s> {
    pub fn new(shared: &'s Shared, rank: u32, node: u32) -> ReplayResult<Self> {
        let live = shared.live.rank(rank);
        let calls = Calls::open(shared, rank, &live)?;
        let now = Instant::now();
        let source_rank = shared.map.source_rank(rank);
        let result = RankResult {
            rank,
            source_rank,
            node,
            host: shared.host.clone(),
            phases: vec![PhaseStats::default(); shared.phases().len()],
            ..Default::default()
        };
        Ok(Worker {
            shared,
            rank,
            calls,
            processes: HashMap::new(),
            rank_start: shared.survey.rank_start(source_rank),
            live,
            result,
            sched: Schedule::new(shared.timing, now, shared.origin_ns()),
            phase: 0,
            phase_entered: now,
            phase_clock: (0, 0),
            barriers: 0,
            awaiting_first_write: None,
            started: now,
            cpu_started: thread_cpu_ns(),
            // Opened here, on the rank's own thread: `thread-self` is the
            // thread that opens it.
            storage: TaskIo::this_thread(),
            storage_mark: None,
            record: shared.recorder.as_ref().map(|r| r.for_rank(rank)),
        })
    }

    /// Replays every op from `rx`; errors end the rank's replay and are in the result.
    pub fn run(mut self, rx: Receiver<Chunk>) -> RankResult {
        if let Err(e) = self.replay(rx) {
            self.calls.abandon();
            let msg = format!("rank {}: {e}", self.rank);
            if !matches!(e, ReplayError::Aborted(_)) {
                self.shared.rendezvous.abort(self.rank, &msg);
            }
            self.result.errors.push(msg);
            self.result.elapsed_ns = self.started.elapsed().as_nanos() as u64;
            self.shared
                .skip_remaining_barriers(self.rank, self.barriers);
        }
        if let Some(requests) = self.calls.request_stats() {
            self.result.requests = requests;
        }
        self.result.copies = self.calls.copies();
        self.result.ops = self.live.ops();
        self.live.finished(self.result.elapsed_ns);
        self.result.ideal_ns = self.sched.ideal_ns;
        self.result.compute_ns = self.sched.compute_ns;
        self.result.cpu_ns = thread_cpu_ns().saturating_sub(self.cpu_started);
        if let Some(r) = self.record.take() {
            r.finish();
        }
        self.result
    }

    fn barrier(&mut self, what: &str) -> ReplayResult<()> {
        self.barrier_max(what, 0).map(|_| ())
    }

    /// A barrier that also tells how far through the trace the last rank
    /// to arrive was (see [`Schedule::resume`]).
    fn barrier_max(&mut self, what: &str, value: i64) -> ReplayResult<i64> {
        let seq = self.barriers;
        self.barriers += 1;
        let arrive_unix_ns = unix_ns();
        let r = self
            .shared
            .rendezvous
            .barrier_max(self.rank, seq, what, value);
        self.result.barriers.push(BarrierStamp {
            arrive_unix_ns,
            leave_unix_ns: unix_ns(),
        });
        r
    }

    fn replay(&mut self, rx: Receiver<Chunk>) -> ReplayResult<()> {
        self.barrier("start")?;
        // The clock starts when the first ops arrive, so the time the reader
        // takes to decode the first batch is not counted against the storage.
        let mut chunks = rx.into_iter().peekable();
        chunks.peek();
        self.started = Instant::now();
        self.cpu_started = thread_cpu_ns();
        self.storage_mark = self.storage.as_ref().and_then(TaskIo::read);
        self.live.started(self.started);
        self.sched = Schedule::new(self.shared.timing, self.started, self.shared.origin_ns());
        self.enter(0)?;
        for chunk in chunks {
            for op in &chunk.ops {
                self.advance_to(op.phase)?;
                self.execute(op)?;
            }
            self.advance_to(chunk.then_phase)?;
        }
        self.calls.finish()?;
        // Phases after the rank's last call: it computes through them as
        // the traced rank did (the steps it had read ahead for) and meets
        // the others at their barriers.
        let last = self.shared.phases().len().saturating_sub(1);
        self.advance_to(last as u16)?;
        self.leave()?;
        self.result.elapsed_ns = self.started.elapsed().as_nanos() as u64;
        Ok(())
    }

    /// Leaves the phases before `phase` and enters it, through their
    /// barriers.
    fn advance_to(&mut self, phase: u16) -> ReplayResult<()> {
        while self.phase < phase as usize {
            // The trace's time before the next phase begins is the phase
            // being left's: a job's start-up is not its first epoch, and a
            // rank whose last reads of a stretch came early (read ahead)
            // computes on them until the checkpoint, as the traced rank
            // did, before it meets the others at the checkpoint's barrier.
            let next = self.phase + 1;
            // A save the ranks meet at ends at its closing barrier, on the
            // clock of the last rank there: a rank that made none of its
            // calls goes straight to it. Waiting for the traced end here
            // would hold it for the traced save's whole length however fast
            // the writers saved at N, and leave the storage idle meanwhile.
            let sat_out =
                self.shared.is_barrier_phase(self.phase) && self.result.phases[self.phase].ops == 0;
            if !sat_out {
                self.sched
                    .wait_for(self.shared.phases()[next].start_unix_ns);
            }
            self.leave()?;
            self.enter(self.phase + 1)?;
        }
        Ok(())
    }

    fn enter(&mut self, i: usize) -> ReplayResult<()> {
        self.phase = i;
        self.awaiting_first_write = None;
        // In read phases (and saves read on through) the rank makes its
        // share of the steps at the traced pace per step; elsewhere it keeps
        // the traced clock.
        let reads = self.shared.has_steps(i);
        let sharers = self.shared.read_sharers[self.shared.map.source_index(self.rank)];
        self.sched
            .set_speedup(if reads { sharers as f64 } else { 1.0 });
        if self.shared.is_barrier_phase(i) {
            let ready = self.barrier_max(
                &format!("start of phase {i} (checkpoint)"),
                self.sched.trace_clock(),
            )?;
            self.sched.resume(Instant::now(), ready);
            // A rank through its steps early waits here for the slowest
            // one's data: its accelerator idles, and the job's epoch runs
            // to the meeting. The wait is the stretch's, so its AU and
            // stall count it (`phase_entered` is still the stretch's).
            if let Some(stretch) = i.checked_sub(1) {
                if !self.shared.is_barrier_phase(stretch) {
                    self.result.phases[stretch].duration_ns =
                        self.phase_entered.elapsed().as_nanos() as u64;
                }
            }
            self.awaiting_first_write = Some(self.sched.compute_ns);
        }
        self.phase_entered = Instant::now();
        self.phase_clock = (self.sched.compute_ns, self.sched.ideal_ns);
        Ok(())
    }

    fn leave(&mut self) -> ReplayResult<()> {
        let i = self.phase;
        let storage = self.storage_since_mark();
        let ph = &mut self.result.phases[i];
        ph.duration_ns = self.phase_entered.elapsed().as_nanos() as u64;
        ph.compute_ns = self.sched.compute_ns - self.phase_clock.0;
        ph.ideal_ns = self.sched.ideal_ns - self.phase_clock.1;
        ph.storage_read_bytes = storage.map(|s| s.read_bytes);
        ph.storage_write_bytes = storage.map(|s| s.write_bytes);
        if self.shared.is_barrier_phase(i) {
            let done = self.barrier_max(
                &format!("end of phase {i} (checkpoint)"),
                self.sched.trace_clock(),
            )?;
            self.sched.resume(Instant::now(), done);
        }
        Ok(())
    }

    /// What the rank caused the storage to read and write since the last
    /// phase closed (the phases tile the rank's run, its waits at meetings
    /// included, so their sum is its whole), the mark moved to now; `None`
    /// where its thread's count does not hold it
    /// ([`Calls::counted_by_thread`]).
    fn storage_since_mark(&mut self) -> Option<StorageBytes> {
        let now = self.storage.as_ref().and_then(TaskIo::read);
        let before = std::mem::replace(&mut self.storage_mark, now);
        if !self.calls.counted_by_thread() {
            return None;
        }
        Some(now?.since(before?))
    }
}
