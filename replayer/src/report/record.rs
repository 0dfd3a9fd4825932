//! `--record-ops`: what the replay did, written as a trace (source `replay`)
//! so `iorepro-trace compare` can measure how faithful the replay was. Each
//! rank builds its own Arrow batches; one writer thread owns the trace and
//! puts the ranks' rows into one time order ([`crate::report::record_merge`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow_array::RecordBatch;
use iorepro_format::schema::VIA_IO_URING;
use iorepro_format::{
    EventBatchBuilder, EventRow, Manifest, Op, Source, TraceResult, TraceWriter, WriterOptions,
};

use crate::plan::ops::PlannedOp;
use crate::report::record_merge::RankMerge;

const RECORD_BATCH_ROWS: usize = 16 * 1024;
/// A rank hands over what it has at least this often, so the other ranks'
/// rows are not held back for long waiting for it.
const RECORD_FLUSH_EVERY: Duration = Duration::from_millis(500);

/// What a rank tells the writer thread.
enum Message {
    Joined(usize),
    Rows(usize, RecordBatch),
    Left(usize),
}

/// Shared by the ranks of one process; cloned into each rank's [`RankRecorder`].
#[derive(Clone)]
pub struct Recorder {
    tx: SyncSender<Message>,
    next_slot: Arc<AtomicUsize>,
    host: String,
    base: Instant,
    base_unix_ns: i64,
}

pub struct RecordSink {
    handle: JoinHandle<TraceResult<Manifest>>,
}

impl RecordSink {
    /// Waits for the writer (call after every [`Recorder`] is dropped).
    pub fn finish(self) -> TraceResult<Manifest> {
        self.handle.join().expect("record writer thread")
    }
}

pub fn start(dir: &Path, host: &str, command: Vec<String>) -> TraceResult<(Recorder, RecordSink)> {
    let mut opts = WriterOptions::new(Source::Replay);
    opts.command = Some(command);
    let mut w = TraceWriter::create(dir, opts)?;
    let (tx, rx) = sync_channel::<Message>(8);
    let handle = std::thread::spawn(move || {
        let mut merge = RankMerge::default();
        for m in rx {
            match m {
                Message::Joined(slot) => merge.join(slot),
                Message::Rows(slot, b) => merge.rows(slot, b, &mut w)?,
                Message::Left(slot) => merge.leave(slot, &mut w)?,
            }
        }
        merge.finish(&mut w)?;
        w.finish()
    });
    let base_unix_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as i64;
    Ok((
        Recorder {
            tx,
            next_slot: Arc::new(AtomicUsize::new(0)),
            host: host.to_string(),
            base: Instant::now(),
            base_unix_ns,
        },
        RecordSink { handle },
    ))
}

/// Where a process's record goes: the directory itself for one process, a
/// per-rank subdirectory when a launcher started one process per rank.
pub fn record_dir(dir: &Path, launched_rank: Option<u32>) -> PathBuf {
    match launched_rank {
        Some(r) => dir.join(format!("rank-{r:05}")),
        None => dir.to_path_buf(),
    }
}

impl Recorder {
    /// Call on the rank's own thread (its id goes into the `tid` column).
    pub fn for_rank(&self, rank: u32) -> RankRecorder {
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
        let _ = self.tx.send(Message::Joined(slot));
        RankRecorder {
            slot,
            last_flush: Instant::now(),
            shared: self.clone(),
            rank: rank as i32,
            pid: std::process::id() as i32,
            tid: rustix::thread::gettid().as_raw_nonzero().get(),
            builder: EventBatchBuilder::with_capacity(RECORD_BATCH_ROWS),
        }
    }
}

pub struct RankRecorder {
    shared: Recorder,
    slot: usize,
    last_flush: Instant,
    rank: i32,
    pid: i32,
    tid: i32,
    builder: EventBatchBuilder,
}

/// How one replayed call went, as its row records it.
pub struct Made<'a> {
    pub start: Instant,
    pub took: Duration,
    /// Bytes, a descriptor for an open, or -errno.
    pub ret: i64,
    /// The call's path and second path (rename, link), as made.
    pub paths: [Option<&'a Path>; 2],
    pub fd: Option<i32>,
    /// Made through io_uring.
    pub uring: bool,
}

impl RankRecorder {
    pub fn push(&mut self, op: &PlannedOp, made: Made<'_>) {
        let Made {
            start,
            took,
            ret,
            paths: [path, path2],
            fd,
            uring,
        } = made;
        let ts = self.shared.base_unix_ns
            + start.saturating_duration_since(self.shared.base).as_nanos() as i64;
        let path = path.map(|p| p.to_string_lossy());
        let path2 = path2.map(|p| p.to_string_lossy());
        let data = op.op.moves_data();
        self.builder.push(&EventRow {
            ts_ns: ts,
            dur_ns: took.as_nanos() as i64,
            host: &self.shared.host,
            pid: self.pid,
            tid: self.tid,
            rank: Some(self.rank),
            comm: "iorepro-replay",
            op: op.op,
            path: path.as_deref(),
            fd,
            offset: (data && op.offset >= 0).then_some(op.offset),
            size: (data || op.op == Op::Truncate).then_some(op.bytes),
            ret,
            flags: op.flags,
            calls: 1,
            span_ns: None,
            path2: path2.as_deref(),
            via: uring.then_some(VIA_IO_URING),
            exchange: None,
            from_storage: None,
        });
        if self.builder.len() >= RECORD_BATCH_ROWS
            || self.last_flush.elapsed() >= RECORD_FLUSH_EVERY
        {
            self.flush();
        }
    }

    fn flush(&mut self) {
        self.last_flush = Instant::now();
        if !self.builder.is_empty() {
            let _ = self
                .shared
                .tx
                .send(Message::Rows(self.slot, self.builder.finish()));
        }
    }

    pub fn finish(mut self) {
        self.flush();
        let _ = self.shared.tx.send(Message::Left(self.slot));
    }
}
