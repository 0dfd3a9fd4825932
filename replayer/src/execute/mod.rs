//! One target rank's replay loop: takes its planned ops in order, crosses
//! phase boundaries (meeting the other ranks at checkpoints), issues each op
//! through the engine on files opened beneath the target, and measures it.
//! The metadata calls are in [`metadata`].

mod metadata;

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Instant;

use iorepro_traces::Op;

use crate::error::{ReplayError, ReplayResult};
use crate::io::buffers::{PrivateCopies, SharedData, StampedWrite, ALIGN, STAMPED_MAX};
use crate::io::confine::Confined;
use crate::io::engine::{new_engine, Engine, EngineKind};
use crate::io::paths::{resolve, Place};
use crate::live::{LiveRanks, RankLive};
use crate::plan::rank_map::RankMap;
use crate::plan::stream::{Chunk, PlannedOp, NO_PATH};
use crate::plan::survey::Survey;
use crate::plan::timing::{Schedule, Timing};
use crate::ranks::rendezvous::Rendezvous;
use crate::report::record::{Made, Recorder};
use crate::report::stats::{unix_ns, BarrierStamp, PhaseStats, RankResult};
use iorepro_traces::analysis::phases::{Phase, PhaseKind};

/// What all local ranks share.
pub struct Shared {
    pub conf: Arc<Confined>,
    pub survey: Arc<Survey>,
    pub map: RankMap,
    pub phase_selected: Vec<bool>,
    pub timing: Timing,
    pub direct: bool,
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
    /// The trace path it was opened for ([`NO_PATH`] if unknown).
    id: u32,
    fd: OwnedFd,
    direct: Option<OwnedFd>,
    rel: PathBuf,
    flags: i32,
    want_direct: bool,
    pos: u64,
}

/// The flags a replayed open uses: the trace's access mode and creation
/// flags for files the rank owns; read-only for shared data, which is never
/// created or truncated by the replay. O_DIRECT goes to a second descriptor.
fn open_flags(trace: Option<i32>, written: bool) -> i32 {
    let keep = libc::O_ACCMODE | libc::O_CREAT | libc::O_TRUNC | libc::O_SYNC | libc::O_DSYNC;
    match (trace, written) {
        (Some(f), true) => f & keep,
        (None, true) => libc::O_RDWR | libc::O_CREAT,
        (_, false) => libc::O_RDONLY,
    }
}

pub struct Worker<'s> {
    shared: &'s Shared,
    rank: u32,
    engine: Box<dyn Engine>,
    /// io_uring for the trace's io_uring requests under `--engine auto`
    /// (made at the first; while one is made it swaps places with `engine`).
    uring: Option<Box<dyn Engine>>,
    files: HashMap<(i32, i32), OpenFile>,
    /// Directories that metadata calls name entries in, held open; dropped
    /// when this rank removes or renames a directory.
    parents: HashMap<PathBuf, OwnedFd>,
    /// Where a directory listing lands (never looked at).
    listing: Vec<u8>,
    paths: HashMap<u32, PathBuf>,
    dirs: HashSet<PathBuf>,
    /// The rank's own stamps for buffered writes from [`Shared::data`].
    stamped: StampedWrite,
    write_tag: u64,
    /// The rank's op figures, kept where status lines and metrics read them.
    live: Arc<RankLive>,
    result: RankResult,
    sched: Schedule,
    phase: usize,
    phase_entered: Instant,
    barriers: u64,
    /// In a checkpoint phase until its first write: the schedule's compute
    /// time when the rank left the barrier.
    awaiting_first_write: Option<u64>,
    started: Instant,
    record: Option<crate::report::record::RankRecorder>,
}

impl<'s> Worker<'s> {
    pub fn new(shared: &'s Shared, rank: u32, node: u32) -> ReplayResult<Self> {
        let engine = new_engine(shared.engine).map_err(|e| {
            ReplayError::Usage(format!("cannot start the {:?} engine: {e}", shared.engine))
        })?;
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
            parents: HashMap::new(),
            listing: Vec::new(),
            paths: HashMap::new(),
            dirs: HashSet::new(),
            stamped: StampedWrite::default(),
            write_tag: (rank as u64) << 40,
            live: shared.live.rank(rank),
            result,
            sched: Schedule::new(shared.timing, now, shared.origin_ns()),
            phase: 0,
            phase_entered: now,
            barriers: 0,
            awaiting_first_write: None,
            started: now,
            record: shared.recorder.as_ref().map(|r| r.for_rank(rank)),
        })
    }

    /// Replays every op from `rx`; errors end the rank's replay and are in the result.
    pub fn run(mut self, rx: Receiver<Chunk>) -> RankResult {
        if let Err(e) = self.replay(rx) {
            let msg = format!("rank {}: {e}", self.rank);
            if !matches!(e, ReplayError::Aborted(_)) {
                self.shared.rendezvous.abort(self.rank, &msg);
            }
            self.result.errors.push(msg);
            self.result.elapsed_ns = self.started.elapsed().as_nanos() as u64;
            self.shared
                .skip_remaining_barriers(self.rank, self.barriers);
        }
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
            self.leave()?;
            self.enter(self.phase + 1)?;
        }
        Ok(())
    }

    fn enter(&mut self, i: usize) -> ReplayResult<()> {
        self.phase = i;
        self.awaiting_first_write = None;
        if self.shared.is_barrier_phase(i) {
            let ready = self.barrier_max(
                &format!("start of phase {i} (checkpoint)"),
                self.sched.trace_clock(),
            )?;
            self.sched.resume(Instant::now(), ready);
            self.awaiting_first_write = Some(self.sched.compute_ns);
        }
        self.phase_entered = Instant::now();
        Ok(())
    }

    fn leave(&mut self) -> ReplayResult<()> {
        let i = self.phase;
        self.result.phases[i].duration_ns = self.phase_entered.elapsed().as_nanos() as u64;
        if self.shared.is_barrier_phase(i) {
            let done = self.barrier_max(
                &format!("end of phase {i} (checkpoint)"),
                self.sched.trace_clock(),
            )?;
            self.sched.resume(Instant::now(), done);
        }
        Ok(())
    }

    fn rel_path(&mut self, id: u32) -> ReplayResult<PathBuf> {
        if let Some(p) = self.paths.get(&id) {
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
        self.paths.insert(id, rel.clone());
        Ok(rel)
    }

    fn io_err(&self, what: &'static str, rel: &std::path::Path, e: io::Error) -> ReplayError {
        ReplayError::io(what, self.shared.conf.display(rel), e)
    }

    fn open_file(&mut self, op: &PlannedOp, flags_hint: Option<i32>) -> ReplayResult<()> {
        let rel = self.rel_path(op.path)?;
        let written = self.shared.survey.paths[op.path as usize].written;
        let flags = open_flags(flags_hint, written);
        if flags & libc::O_CREAT != 0 {
            if let Some(parent) = rel.parent() {
                if !parent.as_os_str().is_empty() && !self.dirs.contains(parent) {
                    self.shared
                        .conf
                        .create_dirs(parent)
                        .map_err(|e| self.io_err("creating directory", parent, e))?;
                    self.dirs.insert(parent.to_path_buf());
                }
            }
        }
        let fd = self
            .shared
            .conf
            .open_via(&mut *self.engine, &rel, flags, 0o644)
            .map_err(|e| self.io_err("open", &rel, e))?;
        let want_direct = self.shared.direct || flags_hint.is_some_and(|f| f & libc::O_DIRECT != 0);
        self.files.insert(
            (op.pid, op.fd),
            OpenFile {
                id: op.path,
                fd,
                direct: None,
                rel,
                flags: flags & !(libc::O_CREAT | libc::O_TRUNC),
                want_direct,
                pos: 0,
            },
        );
        Ok(())
    }

    /// The open file a descriptor op refers to, opened lazily from its path
    /// when the trace began after the open (or a phase was skipped).
    fn ensure_open(&mut self, op: &PlannedOp) -> ReplayResult<bool> {
        if let Some(f) = self.files.get(&(op.pid, op.fd)) {
            // A descriptor the trace shows on another file was closed and
            // reused where the trace has no close (an exec closing it, a
            // dup2 over it): the call is made on the file the trace names.
            if op.path == NO_PATH || f.id == NO_PATH || f.id == op.path {
                return Ok(true);
            }
            self.files.remove(&(op.pid, op.fd));
        }
        if op.path == NO_PATH {
            return Ok(false);
        }
        self.open_file(op, None)?;
        Ok(true)
    }

    /// The descriptor a data op uses, and whether it is the O_DIRECT one.
    fn data_fd(&mut self, key: (i32, i32), offset: u64, len: u64) -> ReplayResult<(RawFd, bool)> {
        let f = self.files.get_mut(&key).expect("file was opened");
        let aligned = offset.is_multiple_of(ALIGN as u64) && len.is_multiple_of(ALIGN as u64);
        if !(f.want_direct && aligned) {
            return Ok((f.fd.as_raw_fd(), false));
        }
        if f.direct.is_none() {
            let fd = self
                .shared
                .conf
                .open(&f.rel, f.flags | libc::O_DIRECT, 0)
                .map_err(|e| {
                    let why = if e.raw_os_error() == Some(libc::EINVAL) {
                        " (this filesystem refuses O_DIRECT)"
                    } else {
                        ""
                    };
                    ReplayError::io(
                        "open with O_DIRECT",
                        self.shared.conf.display(&f.rel),
                        io::Error::new(e.kind(), format!("{e}{why}")),
                    )
                })?;
            f.direct = Some(fd);
        }
        Ok((f.direct.as_ref().expect("just opened").as_raw_fd(), true))
    }

    /// One call writing `n` bytes at `at`, every 4 KiB block stamped so that
    /// storage which deduplicates finds no two alike: gathered from the
    /// shared data when it can be, else from a private copy.
    fn write_piece(&mut self, fd: RawFd, direct: bool, n: usize, at: u64) -> io::Result<usize> {
        self.write_tag += 1;
        if !direct && n <= STAMPED_MAX {
            let data = &self.shared.data;
            return self
                .stamped
                .write(&mut *self.engine, fd, data, n, at, self.write_tag);
        }
        let copies = &self.shared.copies;
        let mut buf = copies.take();
        let n = n.min(buf.len());
        buf.stamp(n, self.write_tag);
        let r = self.engine.write_at(fd, &buf.as_slice()[..n], at);
        copies.give(buf);
        r
    }

    /// Moves `len` bytes at `offset`, in pieces the size of the shared data
    /// buffer at most (so at most [`crate::io::buffers::MAX_IO`]).
    fn transfer(
        &mut self,
        key: (i32, i32),
        write: bool,
        offset: u64,
        len: u64,
    ) -> ReplayResult<()> {
        let (fd, direct) = self.data_fd(key, offset, len)?;
        let mut done = 0u64;
        while done < len {
            let n = ((len - done) as usize).min(self.shared.data.len());
            let at = offset + done;
            let r = if write {
                self.write_piece(fd, direct, n, at)
            } else {
                // SAFETY: the shared buffer holds at least n bytes for the
                // whole replay; what the kernel puts there is never read.
                unsafe { self.engine.read_raw(fd, self.shared.data.ptr(), n, at) }
            };
            let moved = r.map_err(|e| {
                let rel = self.files[&key].rel.clone();
                self.io_err(if write { "write" } else { "read" }, &rel, e)
            })?;
            if moved == 0 {
                let rel = self.files[&key].rel.clone();
                return Err(self.io_err(
                    "read",
                    &rel,
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("file ends before offset {at} that the trace read"),
                    ),
                ));
            }
            done += moved as u64;
        }
        Ok(())
    }

    /// Makes `op` through io_uring when the trace made it so and the engine
    /// is `auto`, else through the rank's engine.
    fn execute(&mut self, op: &PlannedOp) -> ReplayResult<()> {
        if !(op.uring && self.shared.engine == EngineKind::Auto) {
            return self.execute_with_engine(op);
        }
        let mut uring = match self.uring.take() {
            Some(u) => u,
            None => new_engine(EngineKind::IoUring).map_err(|e| {
                ReplayError::Usage(format!(
                    "the trace holds io_uring requests, but io_uring cannot start here \
                     ({e}); --engine psync replays them as syscalls"
                ))
            })?,
        };
        std::mem::swap(&mut self.engine, &mut uring);
        let r = self.execute_with_engine(op);
        std::mem::swap(&mut self.engine, &mut uring);
        self.uring = Some(uring);
        r
    }

    fn execute_with_engine(&mut self, op: &PlannedOp) -> ReplayResult<()> {
        let intended = self.sched.start(op.ts, op.dur);
        // Latency counts from the intended start (no coordinated omission);
        // the recorded trace says what the replay did: when it issued the call
        // and how long the call took.
        let issued = Instant::now();
        if op.op == Op::Write {
            if let Some(compute_at_barrier) = self.awaiting_first_write.take() {
                let planned_gap = self.sched.compute_ns - compute_at_barrier;
                self.result.phases[self.phase].first_write_unix_ns =
                    Some(unix_ns() - planned_gap as i64);
            }
        }
        let key = (op.pid, op.fd);
        let mut bytes = 0u64;
        // The call's result: Ok(true) made and succeeded, Ok(false) made and
        // failed, Err(()) not made (nothing to make it on).
        let mut made: Result<bool, ()> = Ok(true);
        let mut errno = None;
        match op.op {
            Op::Open if op.path == NO_PATH => made = Err(()),
            Op::Open if op.failed => {
                errno = self.open_expecting_failure(op)?;
                made = Ok(errno.is_none());
            }
            Op::Open => self.open_file(op, op.flags)?,
            Op::Close => match self.files.remove(&key) {
                Some(f) => {
                    drop(f.direct);
                    if let Err(e) = self.engine.close(f.fd) {
                        return Err(self.io_err("close", &f.rel, e));
                    }
                }
                None => made = Err(()),
            },
            Op::Read | Op::Fault | Op::Write => {
                if self.ensure_open(op)? {
                    let f = &self.files[&key];
                    let offset = if op.offset >= 0 {
                        op.offset as u64
                    } else {
                        f.pos
                    };
                    let write = op.op == Op::Write;
                    self.transfer(key, write, offset, op.bytes as u64)?;
                    self.files.get_mut(&key).expect("open").pos = offset + op.bytes as u64;
                    bytes = op.bytes as u64;
                } else {
                    made = Err(());
                }
            }
            Op::Fsync | Op::Fdatasync => {
                if self.ensure_open(op)? {
                    let fd = self.files[&key].fd.as_raw_fd();
                    self.engine.sync(fd, op.op == Op::Fdatasync).map_err(|e| {
                        let rel = self.files[&key].rel.clone();
                        self.io_err(op.op.as_str(), &rel, e)
                    })?;
                } else {
                    made = Err(());
                }
            }
            Op::Truncate => {
                if !self.files.contains_key(&key) && op.path != NO_PATH {
                    self.open_file(op, Some(libc::O_WRONLY | libc::O_CREAT))?;
                }
                match self.files.get(&key) {
                    Some(f) => {
                        // SAFETY: ftruncate on an open descriptor.
                        if unsafe { libc::ftruncate(f.fd.as_raw_fd(), op.bytes.max(0)) } < 0 {
                            let (e, rel) = (io::Error::last_os_error(), f.rel.clone());
                            return Err(self.io_err("truncate", &rel, e));
                        }
                    }
                    None => made = Err(()),
                }
            }
            _ => match self.metadata(op)? {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    errno = e.raw_os_error();
                    made = Ok(false);
                }
                None => made = Err(()),
            },
        }
        let end = Instant::now();
        self.sched.finished(intended, issued, end);
        self.live.advanced(self.sched.ideal_ns, end);
        let Ok(succeeded) = made else {
            self.result.tolerated_errors += 1;
            return Ok(());
        };
        let latency = end.saturating_duration_since(intended);
        self.live.record(
            op.op,
            bytes,
            latency.as_nanos() as u64,
            succeeded,
            succeeded == op.failed,
        );
        let ph = &mut self.result.phases[op.phase as usize];
        ph.ops += 1;
        match op.op {
            Op::Read => ph.read_bytes += bytes,
            Op::Write => ph.write_bytes += bytes,
            _ => {}
        }
        self.shared.progress.fetch_add(1, Ordering::Relaxed);
        if let Some(rec) = self.record.as_mut() {
            let show = |id: u32| self.paths.get(&id).map(|p| self.shared.conf.display(p));
            let (path, path2) = (show(op.path), show(op.path2));
            let fd = self.files.get(&key).map(|f| f.fd.as_raw_fd());
            let ret = match (errno, op.op) {
                (Some(e), _) => -(e as i64),
                (None, Op::Open) => fd.unwrap_or(0) as i64,
                (None, _) => bytes as i64,
            };
            let took = end.saturating_duration_since(issued);
            let uring = self.shared.engine == EngineKind::IoUring || op.uring;
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
        }
        Ok(())
    }

    /// An open the traced job saw fail (a probe for a file that is not
    /// there): made the same way; if it succeeds here, the file is closed
    /// at once. The error it met, if any.
    fn open_expecting_failure(&mut self, op: &PlannedOp) -> ReplayResult<Option<i32>> {
        let rel = self.rel_path(op.path)?;
        let flags = op.flags.unwrap_or(libc::O_RDONLY) & !libc::O_DIRECT;
        match self
            .shared
            .conf
            .open_via(&mut *self.engine, &rel, flags, 0o644)
        {
            Ok(fd) => {
                let _ = self.engine.close(fd);
                Ok(None)
            }
            Err(e) => Ok(Some(e.raw_os_error().unwrap_or(libc::EIO))),
        }
    }
}
