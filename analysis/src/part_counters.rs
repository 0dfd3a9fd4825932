//! The counters of one part of a trace (a row group, read on its own worker
//! thread) and how parts merge, in time order, into the counters of the
//! whole: op mix, request sizes, per-rank and per-file totals, sequential
//! versus random access, bytes per window and the activity phases are found
//! from. A merged tally is exactly what one pass in time order would count.
//! Memory grows with distinct files, ranks, streams and time windows, never
//! with rows.

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, Int32Array, Int64Array, StringArray};
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::access::AccessTracker;
use crate::activity::{Activity, Caller};
use crate::by_op::by_op;
use crate::histogram::SizeHistogram;
use crate::intern::Interner;
use crate::timeline::Timeline;
use iorepro_format::columns::Events;
use iorepro_format::paths::is_url;
use iorepro_format::reader::TraceReader;
use iorepro_format::runs::{CallsOf, SpanOf};
use iorepro_format::scan::{Fold, OnlyWhereNull, ScanBatch};
use iorepro_format::schema::{
    Op, COL_CALLS, COL_DUR_NS, COL_HOST, COL_OFFSET, COL_OP, COL_PATH, COL_PID, COL_RANK,
    COL_RECEIVED, COL_RET, COL_SENT, COL_SIZE, COL_SPAN_NS, COL_STORAGE_BYTES, COL_TS,
};

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct OpStats {
    pub count: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RankStats {
    pub rank: i32,
    pub events: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FileStats {
    pub path: String,
    pub events: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Of the bytes read, those the storage served (see
    /// `iorepro_format::schema::COL_STORAGE_BYTES`); absent where the trace
    /// does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_read_bytes: Option<u64>,
}

/// How much a tally counts: everything `summary` reports, or only what
/// phases, plots and comparisons need (fewer columns to decode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    Overview,
    Full,
}

impl Depth {
    /// The columns a tally of this depth reads; the others are never decoded.
    /// The columns a tally of `reader` reads: [`Depth::columns`], and the
    /// request columns' bytes where the segments' footers say the trace
    /// may hold requests (a trace of files alone decodes nothing more).
    pub fn columns_for(self, reader: &TraceReader) -> Vec<&'static str> {
        let mut columns = self.columns().to_vec();
        if reader.may_hold_requests() {
            columns.extend([COL_SENT, COL_RECEIVED]);
        }
        if reader.may_hold_storage() {
            columns.push(COL_STORAGE_BYTES);
        }
        columns
    }

    pub fn columns(self) -> &'static [&'static str] {
        match self {
            Depth::Overview => &[
                COL_TS,
                COL_DUR_NS,
                COL_PID,
                COL_RANK,
                COL_OP,
                COL_RET,
                COL_CALLS,
                COL_SPAN_NS,
            ],
            Depth::Full => &[
                COL_TS,
                COL_DUR_NS,
                COL_HOST,
                COL_PID,
                COL_RANK,
                COL_OP,
                COL_PATH,
                COL_OFFSET,
                COL_SIZE,
                COL_RET,
                COL_CALLS,
                COL_SPAN_NS,
            ],
        }
    }
}

/// A row's process id stands for its rank only where it has none (see
/// [`crate::activity::writer_of`]): row groups whose every row has a rank
/// are scanned without decoding `pid`.
pub const PID_WHERE_NO_RANK: OnlyWhereNull = OnlyWhereNull {
    column: COL_PID,
    where_null: COL_RANK,
};

/// Ranks seen, with a slot each; small non-negative ranks (all real ones)
/// are found by index rather than by hashing.
#[derive(Debug, Clone, Default)]
struct Ranks {
    dense: Vec<u32>,
    sparse: FxHashMap<i32, u32>,
    stats: Vec<RankStats>,
    unranked: u64,
}

const DENSE_RANKS: i32 = 1 << 16;
const NO_SLOT: u32 = u32::MAX;

impl Ranks {
    #[inline(always)]
    fn slot(&mut self, rank: i32) -> usize {
        if (0..DENSE_RANKS).contains(&rank) {
            let r = rank as usize;
            if r >= self.dense.len() {
                self.dense.resize(r + 1, NO_SLOT);
            }
            if self.dense[r] == NO_SLOT {
                self.dense[r] = self.stats.len() as u32;
                self.stats.push(RankStats {
                    rank,
                    ..Default::default()
                });
            }
            return self.dense[r] as usize;
        }
        let next = self.stats.len() as u32;
        let slot = *self.sparse.entry(rank).or_insert(next);
        if slot == next {
            self.stats.push(RankStats {
                rank,
                ..Default::default()
            });
        }
        slot as usize
    }
}

/// Files seen, by id; a part's ids are its own, mapped by path when merged.
/// Rows are counted per key of their dictionary first ([`ByKey`]), and
/// reach these counters once per row group.
#[derive(Debug, Clone, Default)]
struct Files {
    paths: Interner,
    counts: Vec<FileCounts>,
}

impl Files {
    fn id(&mut self, path: &str) -> u32 {
        let id = self.paths.id(path);
        if id as usize == self.counts.len() {
            self.counts.push(FileCounts::default());
        }
        id
    }

    fn stats(&self) -> Vec<FileStats> {
        self.paths
            .iter()
            .zip(&self.counts)
            .map(|(path, c)| FileStats {
                path: path.to_string(),
                events: c.events,
                read_bytes: c.read,
                write_bytes: c.write,
                storage_read_bytes: None,
            })
            .collect()
    }
}

/// No file (a row without a path).
const NO_FILE: u32 = u32::MAX;

/// What the rows of one file add up to: besides the summary's figures,
/// what the files' roles count of every row (bytes faulted in, when it was
/// first read, calls that failed), so that a pass with both counts each row
/// once (see [`crate::overview`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FileCounts {
    /// Calls (a run counts as its calls).
    pub events: u64,
    /// Bytes read by `read` calls and written by `write` calls.
    pub read: u64,
    pub write: u64,
    /// Bytes page faults filled from the file.
    pub faulted: u64,
    /// Bytes the storage served of its reads and faults, where rows say.
    pub from_storage: u64,
    /// The start of the first read or fault that moved bytes (`i64::MAX`: none).
    pub first_read_ns: i64,
    /// Calls that failed: all of them failed when this equals `events`.
    pub failed: u64,
}

impl Default for FileCounts {
    fn default() -> Self {
        FileCounts {
            events: 0,
            read: 0,
            write: 0,
            faulted: 0,
            from_storage: 0,
            first_read_ns: i64::MAX,
            failed: 0,
        }
    }
}

impl FileCounts {
    fn absorb(&mut self, other: &FileCounts) {
        self.events += other.events;
        self.read += other.read;
        self.write += other.write;
        self.faulted += other.faulted;
        self.from_storage += other.from_storage;
        self.first_read_ns = self.first_read_ns.min(other.first_read_ns);
        self.failed += other.failed;
    }
}

/// The rows of a row group counted per key of its `path` dictionary (one
/// dictionary serves all its batches) and handed to the files by id when
/// the dictionary changes or the part is sealed: a row costs one increment
/// in a small array indexed by its key, not a look-up of its file.
#[derive(Debug, Clone, Default)]
struct ByKey {
    /// The dictionary's values, and the file id of each (the last entry,
    /// [`NO_FILE`], stands for rows without a path).
    dictionary: Option<ArrayRef>,
    ids: Vec<u32>,
    counts: Vec<KeyCounts>,
    /// Faults and failures, apart: few rows touch them.
    rare: Vec<RareCounts>,
}

/// What most rows add to their key: 32 bytes, aligned, so a row touches
/// one cache line (a 48-byte record straddles two in every other key).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
struct KeyCounts {
    events: u64,
    read: u64,
    write: u64,
    first_read_ns: i64,
}

impl Default for KeyCounts {
    fn default() -> Self {
        KeyCounts {
            events: 0,
            read: 0,
            write: 0,
            first_read_ns: i64::MAX,
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct RareCounts {
    faulted: u64,
    failed: u64,
    from_storage: u64,
}

/// What only a full tally reads of a batch.
struct FullColumns<'a> {
    offset: &'a Int64Array,
    size: &'a Int64Array,
    /// Keys into the `path` dictionary, and the index that stands for a null key.
    keys: &'a Int32Array,
    no_key: usize,
}

/// The columns of one batch a tally reads (see [`Tally::begin`]).
pub(crate) struct TallyBatch<'a> {
    ts: &'a [i64],
    pid: &'a [i32],
    ret: &'a [i64],
    rank: &'a Int32Array,
    span: SpanOf<'a>,
    full: Option<FullColumns<'a>>,
    /// Request rows' body bytes sent and received, where they were read.
    exchanged: Option<(&'a Int64Array, &'a Int64Array)>,
    /// What the storage served of each row, where the trace says.
    storage: Option<&'a Int64Array>,
}

impl Fold for Tally {
    fn reserve(&mut self, rows: usize) {
        if self.depth == Depth::Full {
            self.access.reserve(rows);
        }
    }

    fn add(&mut self, b: &ScanBatch) {
        self.count(b);
    }

    fn seal(&mut self) {
        self.flush_files();
        self.access.seal();
    }
}

/// Counters of a part of a trace, or of all of it once merged.
#[derive(Debug, Clone)]
pub struct Tally {
    depth: Depth,
    pub events: u64,
    pub hosts: Vec<String>,
    ops: Vec<OpStats>,
    hist: Vec<SizeHistogram>,
    ranks: Ranks,
    files: Files,
    pub access: AccessTracker,
    pub timeline: Timeline,
    pub activity: Activity,
    /// This part's rows per path, not yet in `files`.
    by_key: ByKey,
}

impl Tally {
    /// An empty tally whose windows start at `origin_ns` (the trace's first `ts`).
    pub fn new(depth: Depth, origin_ns: i64, window_ns: i64) -> Self {
        Tally {
            depth,
            events: 0,
            hosts: Vec::new(),
            ops: vec![OpStats::default(); Op::ALL.len()],
            hist: vec![SizeHistogram::default(); Op::ALL.len()],
            ranks: Ranks::default(),
            files: Files::default(),
            access: AccessTracker::default(),
            timeline: Timeline::new(origin_ns, window_ns),
            activity: Activity::default(),
            by_key: ByKey::default(),
        }
    }

    /// Counts one batch (rows in `ts` order).
    fn count(&mut self, b: &ScanBatch) {
        if b.is_empty() {
            return;
        }
        let cols = self.begin(b);
        let (keys, table) = b.ops();
        let calls = CallsOf::new(b.calls());
        for i in 0..b.len() {
            let op = table[keys[i] as usize];
            // A run of calls counts as its calls (see format::runs).
            let n = calls.at(i) as u64;
            by_op!(op, |o| self.row(&cols, i, o, n));
        }
    }

    /// The columns of a batch this tally reads, looked up once (and the
    /// batch's hosts and file ids taken in) before its rows are counted
    /// with [`Tally::row`].
    pub(crate) fn begin<'a>(&mut self, b: &'a ScanBatch) -> TallyBatch<'a> {
        let full = (self.depth == Depth::Full).then(|| {
            for h in b.hosts() {
                if !self.hosts.iter().any(|x| x == h) {
                    self.hosts.push(h.to_string());
                }
            }
            let path = b.path();
            self.use_dictionary(path.values());
            FullColumns {
                offset: b.offset(),
                size: b.size(),
                keys: path.keys(),
                no_key: self.by_key.ids.len() - 1,
            }
        });
        TallyBatch {
            ts: b.ts(),
            pid: b.pid(),
            ret: b.ret(),
            rank: b.rank(),
            span: SpanOf::new(b.span_ns(), b.dur_ns()),
            full,
            exchanged: b.exchanged(),
            storage: b.storage_bytes(),
        }
    }

    /// Counts rows per key of `values` from now on, after handing the
    /// counts of the dictionary before to the files. Row groups share one
    /// dictionary across their batches, so this is once per row group.
    fn use_dictionary(&mut self, values: &ArrayRef) {
        if let Some(known) = &self.by_key.dictionary {
            if std::sync::Arc::ptr_eq(known, values) {
                return;
            }
        }
        self.flush_files();
        let names: &StringArray = values.as_string();
        let mut ids: Vec<u32> = (0..names.len())
            .map(|i| {
                // A request's URL is no file (see `crate::requests_by_object`).
                if names.is_valid(i) && !is_url(names.value(i)) {
                    self.files.id(names.value(i))
                } else {
                    NO_FILE
                }
            })
            .collect();
        ids.push(NO_FILE);
        self.by_key.counts = vec![KeyCounts::default(); ids.len()];
        self.by_key.rare = vec![RareCounts::default(); ids.len()];
        self.by_key.ids = ids;
        self.by_key.dictionary = Some(values.clone());
    }

    /// Hands the counts per key to the files.
    fn flush_files(&mut self) {
        let ByKey {
            ids, counts, rare, ..
        } = &mut self.by_key;
        for ((&id, c), r) in ids.iter().zip(counts.iter_mut()).zip(rare.iter_mut()) {
            let (c, r) = (std::mem::take(c), std::mem::take(r));
            if id != NO_FILE {
                self.files.counts[id as usize].absorb(&FileCounts {
                    events: c.events,
                    read: c.read,
                    write: c.write,
                    faulted: r.faulted,
                    from_storage: r.from_storage,
                    first_read_ns: c.first_read_ns,
                    failed: r.failed,
                });
            }
        }
    }

    /// Counts row `i` of a batch begun with [`Tally::begin`]: its op `op`,
    /// standing for `n` calls. Inlined into the caller's [`by_op!`] arms.
    #[inline(always)]
    pub(crate) fn row(&mut self, c: &TallyBatch, i: usize, op: Op, n: u64) {
        // (Compiled away in `by_op!`'s arms for the common ops.)
        if op == Op::Request {
            return self.request_row(c, i, n);
        }
        match &c.full {
            Some(full) => self.row_full(c, full, i, op, n),
            None => self.row_overview(c, i, op, n),
        }
    }

    /// An object-storage request: counted as its op, and its body bytes
    /// (where the request columns were read) as reads and writes of the
    /// timeline and the activity, and of its rank, so that a job's load
    /// bursts and checkpoint spikes from a bucket are phases as those from
    /// files are. A URL is no file: nothing is counted per file.
    #[inline(never)]
    fn request_row(&mut self, c: &TallyBatch, i: usize, n: u64) {
        let ts = c.ts[i];
        self.events += n;
        self.ops[Op::Request as usize].count += n;
        let Some((sent, received)) = c.exchanged else {
            return;
        };
        let bytes = |a: &Int64Array| Events::opt_i64(a, i).unwrap_or(0).max(0) as u64;
        let (sent, received) = (bytes(sent), bytes(received));
        let r = c.rank.is_valid(i).then(|| c.rank.value(i));
        let caller = Caller {
            rank: r,
            pid: c.pid[i],
        };
        let span = c.span.at(i);
        if received > 0 {
            self.timeline.add_read(ts, received);
            self.activity
                .observe_row(ts, span, Op::Read, received as i64, caller, n);
        }
        if sent > 0 {
            self.timeline.add_write(ts, sent);
            self.activity
                .observe_row(ts, span, Op::Write, sent as i64, caller, n);
        }
        self.ops[Op::Request as usize].bytes += sent + received;
        if c.full.is_some() {
            match r {
                Some(rk) => {
                    let slot = self.ranks.slot(rk);
                    let rs = &mut self.ranks.stats[slot];
                    rs.events += n;
                    rs.read_bytes += received;
                    rs.write_bytes += sent;
                }
                None => self.ranks.unranked += n,
            }
        }
    }

    #[inline(always)]
    fn row_overview(&mut self, c: &TallyBatch, i: usize, op: Op, n: u64) {
        let (ts, ret) = (c.ts[i], c.ret[i]);
        let caller = Caller {
            rank: c.rank.is_valid(i).then(|| c.rank.value(i)),
            pid: c.pid[i],
        };
        self.events += n;
        self.activity
            .observe_row(ts, c.span.at(i), op, ret, caller, n);
        self.served_by_storage(c, i, op);
        let st = &mut self.ops[op as usize];
        st.count += n;
        if ret > 0 {
            if op.is_read_data() {
                st.bytes += ret as u64;
                self.timeline.add_read(ts, ret as u64);
            } else if op.is_write_data() {
                st.bytes += ret as u64;
                self.timeline.add_write(ts, ret as u64);
            } else if op == Op::Writeback {
                // The kernel's bytes, not the job's: in the op's line only.
                st.bytes += ret as u64;
            }
        }
    }

    /// Takes in what the storage served of row `i`, a read, or was sent by
    /// it, a write or a sync, where it says; the bytes the storage served a
    /// read.
    #[inline(always)]
    fn served_by_storage(&mut self, c: &TallyBatch, i: usize, op: Op) -> Option<u64> {
        let s = c.storage.filter(|s| s.is_valid(i))?;
        let (ts, ret, bytes) = (c.ts[i], c.ret[i], s.value(i));
        let end = ts.saturating_add(c.span.at(i).max(0));
        // The rows the reads' own runs take (see `Activity::observe_row`),
        // so that a phase's reads and their storage share one edge.
        if op.reads_file() && ret > 0 {
            self.activity.observe_storage(ts, end, bytes);
            return Some(bytes.max(0) as u64);
        }
        match op {
            Op::Write | Op::Fsync | Op::Fdatasync => {
                self.activity.observe_device_writes(ts, end, bytes)
            }
            Op::Writeback => self.activity.observe_written_back(ts, bytes),
            _ => {}
        }
        None
    }

    #[inline(always)]
    fn row_full(&mut self, c: &TallyBatch, full: &FullColumns, i: usize, op: Op, n: u64) {
        let (ts, ret) = (c.ts[i], c.ret[i]);
        let r = c.rank.is_valid(i).then(|| c.rank.value(i));
        let caller = Caller {
            rank: r,
            pid: c.pid[i],
        };
        let owner = caller.writer();
        self.events += n;
        self.activity
            .observe_row(ts, c.span.at(i), op, ret, caller, n);
        let write = op.is_write_data();
        let data = write || op.is_read_data();
        let moved = if data && ret > 0 { ret as u64 } else { 0 };
        let st = &mut self.ops[op as usize];
        st.count += n;
        // (The kernel's write-back bytes are in the op's line, not the job's.)
        st.bytes += if op == Op::Writeback {
            ret.max(0) as u64
        } else {
            moved
        };
        match r {
            Some(rk) => {
                let slot = self.ranks.slot(rk);
                let rs = &mut self.ranks.stats[slot];
                rs.events += n;
                if write {
                    rs.write_bytes += moved;
                } else {
                    rs.read_bytes += moved;
                }
            }
            None => self.ranks.unranked += n,
        }
        let key = if full.keys.is_valid(i) {
            full.keys.value(i) as usize
        } else {
            full.no_key
        };
        if let Some(b) = self.served_by_storage(c, i, op) {
            self.by_key.rare[key].from_storage += b;
        }
        let per_file = &mut self.by_key.counts[key];
        per_file.events += n;
        if write {
            per_file.write += moved;
        } else {
            per_file.read += moved;
        }
        if ret > 0 && op.reads_file() {
            per_file.first_read_ns = per_file.first_read_ns.min(ts);
            if op == Op::Fault {
                self.by_key.rare[key].faulted += ret as u64;
            }
        }
        if ret < 0 {
            self.by_key.rare[key].failed += n;
        }
        if !data {
            return;
        }
        let file = self.by_key.ids[key];
        let (size, offset) = (full.size, full.offset);
        if size.is_valid(i) {
            // A run's calls are equal parts of its size.
            let size = size.value(i).max(0) as u64;
            if n == 1 {
                self.hist[op as usize].add(size);
            } else {
                self.hist[op as usize].add_calls(size / n, n);
            }
        }
        if file != NO_FILE && offset.is_valid(i) && ret >= 0 {
            self.access
                .record(file, owner, offset.value(i), ret, write, n);
        }
        if moved > 0 {
            if write {
                self.timeline.add_write(ts, moved);
            } else {
                self.timeline.add_read(ts, moved);
            }
        }
    }

    /// Takes in the tally of the part of the trace that follows this one.
    pub fn merge(&mut self, mut other: Tally) {
        other.flush_files();
        self.flush_files();
        self.events += other.events;
        for h in other.hosts {
            if !self.hosts.contains(&h) {
                self.hosts.push(h);
            }
        }
        for (a, b) in self.ops.iter_mut().zip(&other.ops) {
            a.count += b.count;
            a.bytes += b.bytes;
        }
        for (a, b) in self.hist.iter_mut().zip(&other.hist) {
            a.merge(b);
        }
        for rs in &other.ranks.stats {
            let slot = self.ranks.slot(rs.rank);
            let mine = &mut self.ranks.stats[slot];
            mine.events += rs.events;
            mine.read_bytes += rs.read_bytes;
            mine.write_bytes += rs.write_bytes;
        }
        self.ranks.unranked += other.ranks.unranked;
        let ids: Vec<u32> = other
            .files
            .paths
            .iter()
            .zip(&other.files.counts)
            .map(|(path, counts)| {
                let id = self.files.id(path);
                self.files.counts[id as usize].absorb(counts);
                id
            })
            .collect();
        self.access.merge(other.access, &ids);
        self.timeline.merge(&other.timeline);
        self.activity.merge(other.activity);
    }

    /// Whether this tally counts rows per file ([`Depth::Full`]).
    pub fn counts_files(&self) -> bool {
        self.depth == Depth::Full
    }

    /// Op counts and bytes, by op.
    pub fn ops(&self) -> impl Iterator<Item = (Op, &OpStats)> {
        Op::ALL.iter().copied().zip(&self.ops)
    }

    /// Request sizes of data calls, by op.
    pub fn histograms(&self) -> impl Iterator<Item = (Op, &SizeHistogram)> {
        Op::ALL.iter().copied().zip(&self.hist)
    }

    pub fn op(&self, op: Op) -> &OpStats {
        &self.ops[op as usize]
    }

    /// Every rank seen, in rank order, and the rows without a rank.
    pub fn ranks(&self) -> (Vec<RankStats>, u64) {
        let mut v = self.ranks.stats.clone();
        v.sort_by_key(|r| r.rank);
        (v, self.ranks.unranked)
    }

    pub fn file_count(&self) -> usize {
        self.files.paths.len()
    }

    /// Every file seen, in the order first seen.
    pub fn files(&self) -> Vec<FileStats> {
        let mut files = self.files.stats();
        if self.activity.from_storage.is_some() {
            for (f, c) in files.iter_mut().zip(&self.files.counts) {
                f.storage_read_bytes = Some(c.from_storage);
            }
        }
        files
    }

    /// Every file seen and what its rows add up to (a full tally's, once
    /// sealed or merged).
    pub(crate) fn file_counts(&self) -> impl Iterator<Item = (&str, &FileCounts)> {
        self.files.paths.iter().zip(&self.files.counts)
    }
}
