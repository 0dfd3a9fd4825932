//! One target rank's replay loop: takes its planned ops in order, crosses
//! phase boundaries (meeting the other ranks at checkpoints), issues each op
//! through the engine on files opened beneath the target, and measures it.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Instant;

use iorepro_traces::Op;

use crate::confine::Confined;
use crate::engine::{new_engine, AlignedBuf, Engine, EngineKind, ALIGN, MAX_IO};
use crate::error::{ReplayError, ReplayResult};
use crate::plan::{PlannedOp, NO_PATH};
use crate::record::Recorder;
use crate::remap::{remap, RankMap};
use crate::rendezvous::Rendezvous;
use crate::stats::{OpStats, PhaseStats, RankResult};
use crate::survey::Survey;
use crate::timing::{Schedule, Timing};
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
    pub recorder: Option<Recorder>,
    pub host: String,
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
}

struct OpenFile {
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
    files: HashMap<(i32, i32), OpenFile>,
    paths: HashMap<u32, PathBuf>,
    dirs: HashSet<PathBuf>,
    buf: AlignedBuf,
    write_tag: u64,
    ops: Vec<Option<OpStats>>,
    result: RankResult,
    sched: Schedule,
    phase: usize,
    phase_entered: Instant,
    barriers: u64,
    started: Instant,
    record: Option<crate::record::RankRecorder>,
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
            files: HashMap::new(),
            paths: HashMap::new(),
            dirs: HashSet::new(),
            buf: AlignedBuf::new(
                initial_buffer_len(shared.survey.max_io_bytes),
                0x5eed ^ rank as u64,
            ),
            write_tag: (rank as u64) << 40,
            ops: vec![None; Op::ALL.len()],
            result,
            sched: Schedule::new(shared.timing, now, shared.origin_ns()),
            phase: 0,
            phase_entered: now,
            barriers: 0,
            started: now,
            record: shared.recorder.as_ref().map(|r| r.for_rank(rank)),
        })
    }

    /// Replays every op from `rx`; errors end the rank's replay and are in the result.
    pub fn run(mut self, rx: Receiver<Vec<PlannedOp>>) -> RankResult {
        if let Err(e) = self.replay(rx) {
            let msg = format!("rank {}: {e}", self.rank);
            if !matches!(e, ReplayError::Aborted(_)) {
                self.shared.rendezvous.abort(self.rank, &msg);
            }
            self.result.errors.push(msg);
            self.result.elapsed_ns = self.started.elapsed().as_nanos() as u64;
        }
        for (i, s) in self.ops.into_iter().enumerate() {
            if let Some(s) = s {
                self.result.ops.insert(Op::ALL[i].as_str().to_string(), s);
            }
        }
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
        self.shared
            .rendezvous
            .barrier_max(self.rank, seq, what, value)
    }

    fn replay(&mut self, rx: Receiver<Vec<PlannedOp>>) -> ReplayResult<()> {
        self.barrier("start")?;
        // The clock starts when the first ops arrive, so the time the reader
        // takes to decode the first batch is not counted against the storage.
        let mut chunks = rx.into_iter().peekable();
        chunks.peek();
        self.started = Instant::now();
        self.sched = Schedule::new(self.shared.timing, self.started, self.shared.origin_ns());
        self.enter(0)?;
        for chunk in chunks {
            for op in &chunk {
                while self.phase < op.phase as usize {
                    self.leave()?;
                    self.enter(self.phase + 1)?;
                }
                self.execute(op)?;
            }
        }
        self.leave()?;
        while self.phase + 1 < self.shared.phases().len() {
            self.enter(self.phase + 1)?;
            self.leave()?;
        }
        self.result.elapsed_ns = self.started.elapsed().as_nanos() as u64;
        Ok(())
    }

    fn is_barrier_phase(&self, i: usize) -> bool {
        self.shared.phases()[i].kind == PhaseKind::Checkpoint && self.shared.phase_selected[i]
    }

    fn enter(&mut self, i: usize) -> ReplayResult<()> {
        self.phase = i;
        if self.is_barrier_phase(i) {
            let ready = self.barrier_max(
                &format!("start of phase {i} (checkpoint)"),
                self.sched.trace_clock(),
            )?;
            self.sched.resume(Instant::now(), ready);
        }
        self.phase_entered = Instant::now();
        Ok(())
    }

    fn leave(&mut self) -> ReplayResult<()> {
        let i = self.phase;
        self.result.phases[i].duration_ns = self.phase_entered.elapsed().as_nanos() as u64;
        if self.is_barrier_phase(i) {
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
        let rel =
            remap(&info.path, info.written, self.rank, &self.shared.map).ok_or_else(|| {
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
            .open(&rel, flags, 0o644)
            .map_err(|e| self.io_err("open", &rel, e))?;
        let want_direct = self.shared.direct || flags_hint.is_some_and(|f| f & libc::O_DIRECT != 0);
        self.files.insert(
            (op.pid, op.fd),
            OpenFile {
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
        if self.files.contains_key(&(op.pid, op.fd)) {
            return Ok(true);
        }
        if op.path == NO_PATH {
            return Ok(false);
        }
        self.open_file(op, None)?;
        Ok(true)
    }

    fn data_fd(&mut self, key: (i32, i32), offset: u64, len: u64) -> ReplayResult<RawFd> {
        let f = self.files.get_mut(&key).expect("file was opened");
        let aligned = offset.is_multiple_of(ALIGN as u64) && len.is_multiple_of(ALIGN as u64);
        if !(f.want_direct && aligned) {
            return Ok(f.fd.as_raw_fd());
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
        Ok(f.direct.as_ref().expect("just opened").as_raw_fd())
    }

    /// Moves `len` bytes at `offset`, in pieces no bigger than [`MAX_IO`].
    fn transfer(
        &mut self,
        key: (i32, i32),
        write: bool,
        offset: u64,
        len: u64,
    ) -> ReplayResult<()> {
        let fd = self.data_fd(key, offset, len)?;
        let mut done = 0u64;
        while done < len {
            let n = ((len - done) as usize).min(MAX_IO);
            if self.buf.len() < n {
                self.buf = AlignedBuf::new(n, 0x5eed ^ self.rank as u64 ^ n as u64);
            }
            let at = offset + done;
            let r = if write {
                self.write_tag += 1;
                self.buf.stamp(n, self.write_tag);
                self.engine.write_at(fd, &self.buf.as_slice()[..n], at)
            } else {
                self.engine
                    .read_at(fd, &mut self.buf.as_mut_slice()[..n], at)
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

    fn execute(&mut self, op: &PlannedOp) -> ReplayResult<()> {
        let intended = self.sched.start(op.ts, op.dur);
        // Latency counts from the intended start (no coordinated omission);
        // the recorded trace says what the replay did: when it issued the call
        // and how long the call took.
        let issued = Instant::now();
        let key = (op.pid, op.fd);
        let mut bytes = 0u64;
        let mut replayed = true;
        match op.op {
            Op::Open => {
                if op.path == NO_PATH {
                    replayed = false;
                } else {
                    self.open_file(op, op.flags)?;
                }
            }
            Op::Close => replayed = self.files.remove(&key).is_some(),
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
                    replayed = false;
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
                    replayed = false;
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
                    None => replayed = false,
                }
            }
            Op::Unlink | Op::Rename => {
                if op.path == NO_PATH {
                    replayed = false;
                } else {
                    let rel = self.rel_path(op.path)?;
                    // Format v1 records one path per rename, so it replays as a
                    // rename onto itself: the same lookups, no new name.
                    let r = if op.op == Op::Unlink {
                        self.shared.conf.unlink(&rel)
                    } else {
                        self.shared.conf.rename(&rel, &rel)
                    };
                    match r {
                        Ok(()) => {}
                        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => replayed = false,
                        Err(e) => return Err(self.io_err(op.op.as_str(), &rel, e)),
                    }
                }
            }
            _ => replayed = false,
        }
        let end = Instant::now();
        self.sched.finished(intended, issued, end);
        if !replayed {
            self.result.tolerated_errors += 1;
            return Ok(());
        }
        let latency = end.saturating_duration_since(intended);
        self.ops[op.op as usize]
            .get_or_insert_with(OpStats::default)
            .record(bytes, latency.as_nanos() as u64);
        let ph = &mut self.result.phases[op.phase as usize];
        ph.ops += 1;
        match op.op {
            Op::Read => ph.read_bytes += bytes,
            Op::Write => ph.write_bytes += bytes,
            _ => {}
        }
        self.shared.progress.fetch_add(1, Ordering::Relaxed);
        if let Some(rec) = self.record.as_mut() {
            let path = self
                .paths
                .get(&op.path)
                .map(|p| self.shared.conf.display(p));
            let fd = self.files.get(&key).map(|f| f.fd.as_raw_fd());
            let took = end.saturating_duration_since(issued);
            rec.push(op, issued, took, bytes, path.as_deref(), fd);
        }
        Ok(())
    }
}

/// A worker's I/O buffer covers the trace's largest op (within reason), so it
/// is allocated and filled before the clock starts rather than mid-checkpoint.
fn initial_buffer_len(max_io_bytes: u64) -> usize {
    const FLOOR: u64 = 1 << 20;
    const CAP: u64 = 256 << 20;
    max_io_bytes.clamp(FLOOR, CAP) as usize
}
