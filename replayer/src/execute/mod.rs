//! Execute: one target rank's replay loop. A [`Worker`] takes the ops the
//! plan's stream sends it ([`crate::plan::stream::Chunk`]) in order,
//! crosses phase boundaries (meeting the other ranks at checkpoints through
//! [`crate::ranks`]), and makes each call through the [`crate::io`] room
//! on files opened beneath the target, measuring it. What it hands on is
//! its [`RankResult`], which the ranks gather and [`crate::report`] merges
//! (and, with `--record-ops`, the calls it made, to the report's record).
//!
//! Here the loop and its phases; `files` where a traced path lands for
//! the rank and how its files are opened; `calls` one call made and
//! measured; `metadata` the metadata calls; `objects` what the calls
//! become on an object-storage target.

mod calls;
mod files;
mod metadata;
mod objects;

pub use objects::ObjectShared;

use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Instant;

use crate::error::{ReplayError, ReplayResult};
use crate::io::buffers::{PrivateCopies, SharedData, StampedWrite};
use crate::io::confine::Confined;
use crate::io::engine::{new_engine, DirectIo, Engine, EngineKind};
use crate::live::{LiveRanks, RankLive};
use crate::plan::rank_map::RankMap;
use crate::plan::stream::Chunk;
use crate::plan::survey::Survey;
use crate::plan::timing::{Schedule, Timing};
use crate::ranks::rendezvous::Rendezvous;
use crate::report::record::{RankRecorder, Recorder};
use crate::report::stats::{unix_ns, BarrierStamp, PhaseStats, RankResult};
use iorepro_analysis::phases::{Phase, PhaseKind};

/// What all local ranks share.
pub struct Shared {
    pub conf: Arc<Confined>,
    pub survey: Arc<Survey>,
    pub map: RankMap,
    pub phase_selected: Vec<bool>,
    pub timing: Timing,
    /// Per source index: how many target ranks share its dataset reads,
    /// each making that share of its steps (see [`crate::plan::timing`]).
    pub read_sharers: Vec<u32>,
    pub direct: DirectIo,
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
    /// Set when the target is object storage: the calls become requests
    /// there, and `conf` only holds what the ranks meet on.
    pub objects: Option<ObjectShared>,
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

    fn is_barrier_phase(&self, i: usize) -> bool {
        self.phases()[i].kind == PhaseKind::Checkpoint && self.phase_selected[i]
    }

    /// Barriers every rank meets in a full replay: the start, and the start
    /// and end of every checkpoint phase replayed.
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

struct OpenFile {
    /// The trace path it was opened for ([`crate::plan::survey::NO_PATH`] if unknown).
    id: u32,
    fd: OwnedFd,
    direct: Option<OwnedFd>,
    rel: PathBuf,
    flags: i32,
    /// The traced job opened it with O_DIRECT.
    traced_direct: bool,
    pos: u64,
}

pub struct Worker<'s> {
    shared: &'s Shared,
    rank: u32,
    engine: Box<dyn Engine>,
    /// io_uring for the trace's io_uring requests under `--engine auto`
    /// (made at the first; while one is made it swaps places with `engine`).
    uring: Option<Box<dyn Engine>>,
    files: HashMap<(i32, i32), OpenFile>,
    /// The rank's client and objects, on an object-storage target.
    objects: Option<objects::ObjectRank>,
    /// Directories that metadata calls name entries in, held open; dropped
    /// when this rank removes or renames a directory.
    parents: HashMap<PathBuf, Arc<OwnedFd>>,
    /// Where a directory listing lands (never looked at).
    listing: Vec<std::mem::MaybeUninit<u8>>,
    paths: HashMap<u32, PathBuf>,
    dirs: HashSet<PathBuf>,
    /// Traced processes this rank has made an op of.
    processes: HashSet<i32>,
    /// The rank's own stamps for buffered writes from [`Shared::data`].
    stamped: StampedWrite,
    write_tag: u64,
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
    record: Option<RankRecorder>,
}

impl<'s> Worker<'s> {
    pub fn new(shared: &'s Shared, rank: u32, node: u32) -> ReplayResult<Self> {
        let engine = new_engine(shared.engine).map_err(|e| {
            ReplayError::Usage(format!("cannot start the {:?} engine: {e}", shared.engine))
        })?;
        let live = shared.live.rank(rank);
        let objects = match &shared.objects {
            Some(o) => Some(
                objects::ObjectRank::connect(o, live.requests.clone())
                    .map_err(ReplayError::Usage)?,
            ),
            None => None,
        };
        let now = Instant::now();
        let result = RankResult {
            rank,
            source_rank: shared.map.source_rank(rank),
            node,
            host: shared.host.clone(),
            phases: vec![PhaseStats::default(); shared.phases().len()],
            ..Default::default()
        };
        Ok(Worker {
            shared,
            rank,
            engine,
            uring: None,
            files: HashMap::new(),
            objects,
            parents: HashMap::new(),
            listing: Vec::new(),
            paths: HashMap::new(),
            dirs: HashSet::new(),
            processes: HashSet::new(),
            stamped: StampedWrite::default(),
            write_tag: (rank as u64) << 40,
            live,
            result,
            sched: Schedule::new(shared.timing, now, shared.origin_ns()),
            phase: 0,
            phase_entered: now,
            phase_clock: (0, 0),
            barriers: 0,
            awaiting_first_write: None,
            started: now,
            record: shared.recorder.as_ref().map(|r| r.for_rank(rank)),
        })
    }

    /// Replays every op from `rx`; errors end the rank's replay and are in the result.
    pub fn run(mut self, rx: Receiver<Chunk>) -> RankResult {
        if let Err(e) = self.replay(rx) {
            self.abort_uploads();
            let msg = format!("rank {}: {e}", self.rank);
            if !matches!(e, ReplayError::Aborted(_)) {
                self.shared.rendezvous.abort(self.rank, &msg);
            }
            self.result.errors.push(msg);
            self.result.elapsed_ns = self.started.elapsed().as_nanos() as u64;
            self.shared
                .skip_remaining_barriers(self.rank, self.barriers);
        }
        self.take_request_stats();
        self.result.ops = self.live.ops();
        self.live.finished(self.result.elapsed_ns);
        self.result.ideal_ns = self.sched.ideal_ns;
        self.result.compute_ns = self.sched.compute_ns;
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
        self.finish_objects()?;
        self.leave()?;
        while self.phase + 1 < self.shared.phases().len() {
            self.enter(self.phase + 1)?;
            self.leave()?;
        }
        self.result.elapsed_ns = self.started.elapsed().as_nanos() as u64;
        Ok(())
    }

    /// Leaves the phases before `phase` and enters it, through their
    /// barriers.
    fn advance_to(&mut self, phase: u16) -> ReplayResult<()> {
        while self.phase < phase as usize {
            // The trace's time before the next phase begins is the phase
            // being left's (a job's start-up is not its first epoch). A
            // checkpoint's ranks meet at its barrier instead.
            let next = self.phase + 1;
            if !self.shared.is_barrier_phase(next) {
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
        // In read phases the rank makes its share of the steps at the traced
        // pace per step; elsewhere it keeps the traced clock.
        let reads = matches!(
            self.shared.phases()[i].kind,
            PhaseKind::Load | PhaseKind::Read
        );
        let sharers = self.shared.read_sharers[self.shared.map.source_index(self.rank)];
        self.sched
            .set_speedup(if reads { sharers as f64 } else { 1.0 });
        if self.shared.is_barrier_phase(i) {
            let ready = self.barrier_max(
                &format!("start of phase {i} (checkpoint)"),
                self.sched.trace_clock(),
            )?;
            self.sched.resume(Instant::now(), ready);
            self.awaiting_first_write = Some(self.sched.compute_ns);
        }
        self.phase_entered = Instant::now();
        self.phase_clock = (self.sched.compute_ns, self.sched.ideal_ns);
        Ok(())
    }

    fn leave(&mut self) -> ReplayResult<()> {
        let i = self.phase;
        let ph = &mut self.result.phases[i];
        ph.duration_ns = self.phase_entered.elapsed().as_nanos() as u64;
        ph.compute_ns = self.sched.compute_ns - self.phase_clock.0;
        ph.ideal_ns = self.sched.ideal_ns - self.phase_clock.1;
        if self.shared.is_barrier_phase(i) {
            let done = self.barrier_max(
                &format!("end of phase {i} (checkpoint)"),
                self.sched.trace_clock(),
            )?;
            self.sched.resume(Instant::now(), done);
        }
        Ok(())
    }
}
