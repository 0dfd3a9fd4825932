//! One traced call, made and measured: waits for its start on the rank's
//! schedule, makes it on the run's kind of target ([`Calls`]: files beneath
//! a directory, or requests to a bucket), and counts it in the rank's
//! figures and its record.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::time::Instant;

use iorepro_analysis::roles::Role;
use iorepro_format::Op;

use super::files::FileCalls;
use super::objects::ObjectCalls;
use super::outcome::CallOutcome;
use super::{Places, ProcessBegan, Shared, Worker};
use crate::error::ReplayResult;
use crate::io::engine::EngineKind;
use crate::io::objects::RequestStats;
use crate::io::target::Opened;
use crate::live::RankLive;
use crate::plan::ops::{PlannedOp, Via};
use crate::report::record::Made;
use crate::report::stats::{unix_ns, CopyCounts, FirstStep, Lead};

/// A rank's calls on the run's target, with what it holds open there.
// One per rank, made once and never moved: the variants' sizes cost nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Calls<'s> {
    /// Files beneath a directory, through the engine.
    Files(FileCalls<'s>),
    /// Requests to a bucket, through the rank's client.
    Objects(ObjectCalls<'s>),
}

impl<'s> Calls<'s> {
    /// The rank's calls on `shared`'s target: its engine, or its client
    /// (counting into the rank's live request figures).
    pub fn open(shared: &'s Shared, rank: u32, live: &RankLive) -> ReplayResult<Self> {
        let places = Places::new(shared, rank);
        Ok(match &shared.target {
            Opened::Dir(conf) => Calls::Files(FileCalls::new(shared, conf, rank, places)?),
            Opened::Bucket(bucket) => Calls::Objects(ObjectCalls::connect(
                shared,
                bucket,
                places,
                live.requests.clone(),
            )?),
        })
    }

    fn make(&mut self, op: &PlannedOp) -> ReplayResult<CallOutcome> {
        match self {
            Calls::Files(f) => f.make(op),
            Calls::Objects(o) => o.make(op),
        }
    }

    fn places(&self) -> &Places<'s> {
        match self {
            Calls::Files(f) => &f.places,
            Calls::Objects(o) => &o.places,
        }
    }

    /// The descriptor the replay holds for a traced one (files only).
    fn fd_of(&self, key: (i32, i32)) -> Option<RawFd> {
        match self {
            Calls::Files(f) => f.fd_of(key),
            Calls::Objects(_) => None,
        }
    }

    /// At the rank's end: what is still being written is completed, as a
    /// closing job's would be (objects: nothing written is left unsent).
    pub fn finish(&mut self) -> ReplayResult<()> {
        match self {
            Calls::Files(f) => f.finish_copies(),
            Calls::Objects(o) => o.finish(),
        }
    }

    /// After the rank failed: what it had under way on the target is
    /// abandoned (no multipart upload's parts are left on a store).
    pub fn abandon(&mut self) {
        if let Calls::Objects(o) = self {
            o.abort_uploads();
        }
    }

    /// How the rank made the traced copies.
    pub fn copies(&self) -> CopyCounts {
        match self {
            Calls::Files(f) => f.copies,
            Calls::Objects(o) => o.copies,
        }
    }

    /// Whether the rank's thread's own I/O accounting holds everything
    /// its calls caused the storage to do: not on a bucket (no block
    /// storage of ours behind it), and not once a call went through
    /// io_uring. io_uring hands a request it cannot complete at once to a
    /// worker thread of the submitting thread's (`iou-wrk-<tid>`), whose
    /// own count then holds what it submits and dirties. Adding the rank's
    /// workers' counts to its own would not do either: a worker idle a few
    /// seconds exits, and its count joins the process's, where no rank's
    /// is told apart. The process's whole count stands for such a run's
    /// totals instead.
    pub fn counted_by_thread(&self) -> bool {
        match self {
            Calls::Files(f) => !f.through_io_uring(),
            Calls::Objects(_) => false,
        }
    }

    /// The rank's request figures, on a bucket.
    pub fn request_stats(&self) -> Option<RequestStats> {
        match self {
            Calls::Files(_) => None,
            Calls::Objects(o) => Some(o.request_stats()),
        }
    }
}

impl Worker<'_> {
    /// When the traced process `pid` of this rank's source rank made its
    /// first call.
    fn process_start(&self, pid: i32) -> Option<i64> {
        self.shared
            .survey
            .process_start(self.result.source_rank, pid)
    }

    /// Makes `op` on the target at its time on the rank's schedule, and
    /// measures and records it.
    pub(super) fn execute(&mut self, op: &PlannedOp) -> ReplayResult<()> {
        let began = !self.processes.contains_key(&op.pid);
        let intended = self.wait_for_start(op, began);
        // Latency counts from the intended start (no coordinated omission);
        // the recorded trace says what the replay did: when it issued the call
        // and how long the call took.
        let issued = Instant::now();
        if began {
            let clock = (self.sched.compute_ns, self.sched.ideal_ns);
            self.processes
                .insert(op.pid, ProcessBegan { issued, clock });
        }
        if op.op == Op::Write {
            self.note_first_write();
        }
        let key = (op.pid, op.fd);
        let outcome = self.calls.make(op);
        // A call that met another outcome than the traced one is counted,
        // and the first few are described; only the target failing stops.
        let mut difference = None;
        let CallOutcome { bytes, made, errno } = match outcome {
            Ok(o) => o,
            Err(e) => match e.differs_only() {
                Some(errno) => {
                    difference = Some(e.to_string());
                    CallOutcome::failed(errno)
                }
                None => return Err(e),
            },
        };
        let end = Instant::now();
        self.sched.finished(intended, issued, end);
        self.live.advanced(self.sched.ideal_ns, end);
        let Ok(succeeded) = made else {
            self.result.tolerated_errors += 1;
            return Ok(());
        };
        let latency = end.saturating_duration_since(intended);
        let differed = succeeded == op.failed;
        if differed && self.keeps_differences() {
            self.note_difference(op, difference, errno);
        }
        self.live
            .record(op.op, bytes, latency.as_nanos() as u64, succeeded, differed);
        if op.via.from_request() && op.op.is_metadata() {
            self.result.request_metadata_calls += 1;
        }
        self.count_in_phase(op, bytes, succeeded, issued);
        self.shared.progress.fetch_add(1, Ordering::Relaxed);
        if self.record.is_some() {
            self.record_call(op, key, (issued, end), bytes, errno);
        }
        Ok(())
    }

    /// Waits for `op`'s start on the rank's schedule and returns it. A
    /// process's first call keeps the traced pace from the process's own
    /// start (see [`crate::plan::timing::Schedule::start_of_process`]); any
    /// other follows the call before it, and may be a step's first.
    #[inline]
    fn wait_for_start(&mut self, op: &PlannedOp, began: bool) -> Instant {
        if began {
            let started = self.process_start(op.pid).unwrap_or(op.ts);
            return self.sched.start_of_process(started, op.ts, op.dur);
        }
        let computed = self.sched.compute_ns;
        let intended = self.sched.start(op.ts, op.dur, op.elsewhere_ns);
        self.note_first_step(intended, self.sched.compute_ns - computed);
        intended
    }

    /// The first write after a checkpoint's barrier: when it would have
    /// started with the compute planned since the barrier taken out, so that
    /// the ranks' checkpoint skew is their I/O's, not their schedules'.
    #[inline]
    fn note_first_write(&mut self) {
        if let Some(compute_at_barrier) = self.awaiting_first_write.take() {
            let planned_gap = self.sched.compute_ns - compute_at_barrier;
            self.result.phases[self.phase].first_write_unix_ns =
                Some(unix_ns() - planned_gap as i64);
        }
    }

    /// Keeps a line on a call whose success or failure was not the traced
    /// call's: the target's own error where it gave one, else a description.
    /// Only the first few are kept, so this runs a few times a rank at most.
    fn note_difference(&mut self, op: &PlannedOp, difference: Option<String>, errno: Option<i32>) {
        let what = difference.unwrap_or_else(|| self.describe_difference(op, errno));
        let line = format!(
            "rank {}: {what} (traced: {})",
            self.rank,
            if op.failed { "failed" } else { "succeeded" }
        );
        self.result.differences.push(line);
    }

    /// Counts a made call in its phase's figures: its bytes, and the
    /// dataset samples it opened (the first of a phase marks where its
    /// epoch starts, see [`Self::note_lead`]).
    #[inline]
    fn count_in_phase(&mut self, op: &PlannedOp, bytes: u64, succeeded: bool, issued: Instant) {
        let role = self
            .shared
            .survey
            .paths
            .get(op.path as usize)
            .and_then(|p| p.role);
        let sample = op.op == Op::Open && succeeded && role == Some(Role::Dataset);
        let first_sample = sample
            && op.phase as usize == self.phase
            && self.result.phases[self.phase].samples == 0;
        if first_sample {
            self.note_lead(op.pid, issued);
        }
        let ph = &mut self.result.phases[op.phase as usize];
        ph.ops += 1;
        ph.samples += u64::from(sample);
        match op.op {
            Op::Read => {
                ph.read_bytes += bytes;
                self.result.read_timeline.add(unix_ns(), bytes);
                if role == Some(Role::Checkpoint) {
                    ph.checkpoint_read_bytes += bytes;
                }
            }
            Op::Write => ph.write_bytes += bytes,
            _ => {}
        }
    }

    /// Adds the call, as the replay made it, to the rank's record (with
    /// `--record-ops`): when it was issued, how long it took, what it
    /// returned and on which paths and descriptor.
    fn record_call(
        &mut self,
        op: &PlannedOp,
        key: (i32, i32),
        (issued, end): (Instant, Instant),
        bytes: u64,
        errno: Option<i32>,
    ) {
        let Some(mut rec) = self.record.take() else {
            return;
        };
        let places = self.calls.places();
        let (path, path2) = (places.shown(op.path), places.shown(op.path2));
        let fd = self.calls.fd_of(key);
        let ret = match (errno, op.op) {
            (Some(e), _) => -(e as i64),
            (None, Op::Open) => fd.unwrap_or(0) as i64,
            (None, _) => bytes as i64,
        };
        let took = end.saturating_duration_since(issued);
        let uring = self.shared.engine == EngineKind::IoUring || op.via == Via::IoUring;
        rec.push(
            op,
            Made {
                start: issued,
                took,
                ret,
                paths: [path.as_deref(), path2.as_deref()],
                fd,
                uring,
            },
        );
        self.record = Some(rec);
    }

    /// At the phase's first sample (opened by process `pid`, the call issued
    /// at `issued`), what of the phase came before the epoch's start: its
    /// [`Lead`].
    ///
    /// Where a loader's worker opened it (a process that began after the
    /// rank's first, started in the phase), the epoch starts where the
    /// worker did: the job starts its loader inside its epoch, the first
    /// epoch's as a later one's. That is at the worker's fork where the trace
    /// records it, else at its first call. The worker's start keeps the
    /// traced pace (see [`crate::plan::timing::Schedule::start_of_process`]),
    /// so its fork was that long before the rank made its first call. A fork
    /// before the phase (in an idle stretch before the first epoch) is
    /// [`Lead::before_ns`]. The schedule counts the worker's start as compute;
    /// the job's accelerator idles then, so the compute left out of the
    /// epoch still runs to the worker's first call.
    fn note_lead(&mut self, pid: i32, issued: Instant) {
        let phase_start = self.shared.phases()[self.phase].start_unix_ns;
        let started = self.process_start(pid);
        let loader_started = started.is_some_and(|t| t >= phase_start);
        let worker = loader_started && started > self.rank_start;
        let now = (self.sched.compute_ns, self.sched.ideal_ns);
        let (first_call, clock, fork) = match self.processes.get(&pid) {
            Some(p) if worker => {
                let fork = self
                    .shared
                    .survey
                    .process_fork(self.result.source_rank, pid);
                (p.issued, p.clock, fork)
            }
            _ => (issued, now, None),
        };
        let starting = started
            .zip(fork)
            .map_or(0, |(first, fork)| (first - fork).max(0) as u64);
        let ran = first_call
            .saturating_duration_since(self.phase_entered)
            .as_nanos() as u64;
        let ideal = clock.1.saturating_sub(self.phase_clock.1);
        self.result.phases[self.phase].lead = Some(Lead {
            duration_ns: ran.saturating_sub(starting),
            compute_ns: clock.0.saturating_sub(self.phase_clock.0),
            ideal_ns: ideal.saturating_sub(starting),
            loader_started,
            before_ns: starting.saturating_sub(ran),
            to_fork: fork.is_some(),
        });
    }

    /// The end of the rank's first step in its phase ([`FirstStep`]): the
    /// first compute gap after the phase's first sample of at least half
    /// a step's compute at this rank's pace, which ended at `intended`.
    /// The gap before a process's first call is its start-up, never a step.
    fn note_first_step(&mut self, intended: Instant, gap_ns: u64) {
        let Some(step_ns) = self.shared.step_compute_ns() else {
            return;
        };
        let ph = &mut self.result.phases[self.phase];
        if ph.first_step.is_some() || ph.samples == 0 || gap_ns.saturating_mul(2) < step_ns {
            return;
        }
        let end = intended.saturating_duration_since(self.phase_entered);
        ph.first_step = Some(FirstStep {
            end_ns: end.as_nanos() as u64,
            compute_ns: gap_ns,
        });
    }

    /// A call made with another outcome than the traced one, in words.
    fn describe_difference(&self, op: &PlannedOp, errno: Option<i32>) -> String {
        let path = self.calls.places().shown(op.path);
        let path = path.map_or_else(String::new, |p| format!(" {}", p.display()));
        let here = errno.map_or_else(
            || "succeeded".to_string(),
            |e| io::Error::from_raw_os_error(e).to_string(),
        );
        format!("{}{path}: {here}", op.op.as_str())
    }

    /// Keeps the first few differences of the rank in words, so the report
    /// says why calls differed, not only how many.
    fn keeps_differences(&self) -> bool {
        const KEPT: usize = 3;
        self.result.differences.len() < KEPT
    }
}
