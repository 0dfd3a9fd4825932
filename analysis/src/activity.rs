//! What phase detection sees of a trace: when data was read, when it was
//! written (and by whom), when files were synced and when the name space was
//! worked on (stat, open, mkdir, listings...), as runs of calls built event
//! by event.
//!
//! A run is calls of one kind that follow each other within [`JOIN_NS`]; runs
//! are cut where the clock passes a multiple of [`RUN_MAX_NS`], so a trace
//! that reads without pause still keeps a time resolution. Runs keep the
//! exact start of their first call and end of their last, so phase edges fall
//! on calls, not on window boundaries. Because the cuts are on a fixed grid,
//! runs of separately scanned parts of a trace (row groups read in parallel,
//! nodes of a partitioned trace) merge into exactly the runs one pass in time
//! order builds: the detector does not depend on how the trace was read. Memory grows with the number of pauses in the I/O, not with rows,
//! and is bounded: past [`MAX_RUNS`] runs of a kind, runs are joined in pairs.

use iorepro_format::schema::Op;

/// A call that named a file: when (Unix ns), and the process that made it.
/// The roles find such calls (a checkpoint's creation); the phases read
/// them to place a save's edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named {
    pub ns: i64,
    pub pid: i32,
}

/// Calls of one kind closer than this (end of one to start of the next) are one run.
pub const JOIN_NS: i64 = 1_000_000;
/// Runs do not cross multiples of this (Unix time): continuous I/O keeps a
/// resolution of 10 ms, enough to find a load burst or a checkpoint edge in it.
pub const RUN_MAX_NS: i64 = 10_000_000;
/// Most runs kept per kind before runs are joined in pairs (a run list of a
/// week-long capture stays a few tens of MiB).
pub const MAX_RUNS: usize = 1 << 20;

/// Who wrote: a rank, or a process when the rank is unknown.
pub type Writer = i64;

/// The writer of a row: its rank, or its process id (kept apart from ranks).
#[inline]
pub fn writer_of(rank: Option<i32>, pid: i32) -> Writer {
    match rank {
        Some(r) => r as i64,
        None => process_of(pid),
    }
}

/// A process as [`Stretch::who`] names it: apart from ranks, as
/// [`writer_of`] names a writer whose rank is unknown.
#[inline]
pub fn process_of(pid: i32) -> Writer {
    (1i64 << 40) | pid as u32 as i64
}

/// Who made a call: its rank where known, and its process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    pub rank: Option<i32>,
    pub pid: i32,
}

impl Caller {
    /// As a writer: the rank, or the process where the rank is unknown.
    #[inline]
    pub fn writer(self) -> Writer {
        writer_of(self.rank, self.pid)
    }

    /// As a reader: the process (see [`process_of`]).
    #[inline]
    pub fn process(self) -> Writer {
        process_of(self.pid)
    }
}

/// Calls of one kind, back to back: a stretch of reading, writing or
/// syncing in time (not a run of calls folded into one row, which is the
/// format's `Run`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stretch {
    /// Entry `ts` of the first call, Unix ns.
    pub start: i64,
    /// Latest `ts + dur_ns` of its calls.
    pub end: i64,
    /// Bytes the calls moved (positive `ret` of reads and writes).
    pub bytes: u64,
    /// Who made the calls, distinct and sorted, with what each moved (its
    /// share of `bytes`): for writes and mkdirs, the writers (see
    /// [`writer_of`]); for reads, the processes (see [`process_of`]), since
    /// a rank's loader workers read apart from the training loop that
    /// saves, and one run may hold both; none for the other kinds.
    pub who: Vec<(Writer, u64)>,
    /// More callers made its calls than its kind keeps (see
    /// [`MOST_READERS`]): `who` names some of them only.
    pub crowded: bool,
}

/// Most processes a read run names: a run of many ranks' loader workers
/// reading at once says only that many read, so that runs stay small.
pub const MOST_READERS: usize = 8;

impl Stretch {
    /// Who made the calls (see [`Stretch::who`]).
    pub fn callers(&self) -> impl Iterator<Item = Writer> + '_ {
        self.who.iter().map(|&(w, _)| w)
    }

    /// What `w` moved in this run: 0 when it made none of its calls, all of
    /// it when the run is too crowded to tell.
    pub fn moved_by(&self, w: Writer) -> u64 {
        match self.who.binary_search_by_key(&w, |&(x, _)| x) {
            Ok(at) => self.who[at].1,
            Err(_) if self.crowded => self.bytes,
            Err(_) => 0,
        }
    }

    fn absorb(&mut self, other: Stretch, most: usize) {
        self.start = self.start.min(other.start);
        self.end = self.end.max(other.end);
        self.bytes += other.bytes;
        self.crowded |= other.crowded;
        for (w, bytes) in other.who {
            self.add_caller(w, bytes, most);
        }
    }

    /// Counts `bytes` moved by `w`, keeping at most `most` callers.
    #[inline]
    fn add_caller(&mut self, w: Writer, bytes: u64, most: usize) {
        // Almost always the one there (a rank writes many chunks in a row).
        if let Some(last) = self.who.last_mut().filter(|l| l.0 == w) {
            last.1 += bytes;
            return;
        }
        match self.who.binary_search_by_key(&w, |&(x, _)| x) {
            Ok(at) => self.who[at].1 += bytes,
            Err(_) if self.who.len() >= most => self.crowded = true,
            Err(at) => self.who.insert(at, (w, bytes)),
        }
    }
}

/// The runs of one kind of call.
#[derive(Debug, Clone)]
pub struct Runs {
    runs: Vec<Stretch>,
    /// Current join distance: [`JOIN_NS`], doubled each time the runs are coarsened.
    join_ns: i64,
    max_ns: i64,
    /// False when a call arrived before the start of the last run (a foreign
    /// segment not sorted by `ts`); the runs are sorted and re-joined when read.
    sorted: bool,
    /// (start of the last run, end of its `max_ns` cell): rows in time order
    /// ask which cell they are in with a compare, not two divisions.
    cell: (i64, i64),
    /// Most callers a run names (see [`Stretch::crowded`]).
    most_callers: usize,
}

impl Default for Runs {
    fn default() -> Self {
        Runs {
            runs: Vec::new(),
            join_ns: JOIN_NS,
            max_ns: RUN_MAX_NS,
            sorted: true,
            cell: (i64::MIN, i64::MIN),
            most_callers: usize::MAX,
        }
    }
}

impl Runs {
    /// Runs that name at most `most` callers each.
    pub fn naming_at_most(most: usize) -> Runs {
        Runs {
            most_callers: most,
            ..Runs::default()
        }
    }

    /// Adds one call from `start` to `end` that moved `bytes`.
    #[inline(always)]
    pub fn add(&mut self, start: i64, end: i64, bytes: u64, writer: Option<Writer>) {
        let end = end.max(start);
        if let Some(last) = self.runs.last_mut() {
            if self.cell.0 != last.start {
                let first = last.start.div_euclid(self.max_ns);
                self.cell = (
                    last.start,
                    first.saturating_add(1).saturating_mul(self.max_ns),
                );
            }
            if start >= last.start
                && start <= last.end.saturating_add(self.join_ns)
                && start < self.cell.1
            {
                last.end = last.end.max(end);
                last.bytes += bytes;
                if let Some(w) = writer {
                    last.add_caller(w, bytes, self.most_callers);
                }
                return;
            }
            if start < last.start {
                self.sorted = false;
            }
        }
        // Joined before the list would pass its bound, so that its buffer
        // never doubles beyond it (1 Mi runs more, some 60 MB, for a moment).
        if self.runs.len() >= MAX_RUNS {
            self.coarsen();
        }
        self.runs.push(Stretch {
            start,
            end,
            bytes,
            who: writer.map(|w| (w, bytes)).into_iter().collect(),
            crowded: false,
        });
    }

    /// Joins runs pairwise in time: half the runs, half the resolution.
    fn coarsen(&mut self) {
        self.join_ns = self.join_ns.saturating_mul(2);
        self.max_ns = self.max_ns.saturating_mul(2);
        self.cell = (i64::MIN, i64::MIN);
        self.normalise();
        if self.runs.len() > MAX_RUNS / 2 {
            // In place, pairs joined into the first of each.
            let mut odd = false;
            let most = self.most_callers;
            self.runs.dedup_by(|b, a| {
                odd = !odd;
                if odd {
                    a.absorb(std::mem::take(b), most);
                }
                odd
            });
        }
    }

    /// Sorts the runs by start and joins those the join rule says are one.
    fn normalise(&mut self) {
        if !self.sorted {
            self.runs.sort_by_key(|r| r.start);
            self.sorted = true;
        }
        // In place: a copy of a long list would double it for a moment.
        let (join_ns, max_ns, most) = (self.join_ns, self.max_ns, self.most_callers);
        self.runs.dedup_by(|r, last| {
            let joins = r.start <= last.end.saturating_add(join_ns)
                && r.start.div_euclid(max_ns) == last.start.div_euclid(max_ns);
            if joins {
                last.absorb(std::mem::take(r), most);
            }
            joins
        });
    }

    /// Takes in the runs of another part of the trace (any time order).
    pub fn merge(&mut self, mut other: Runs) {
        let most = self.most_callers.min(other.most_callers);
        self.most_callers = most;
        self.sort();
        other.sort();
        self.join_ns = self.join_ns.max(other.join_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.cell = (i64::MIN, i64::MIN);
        let follows = match (self.runs.last(), other.runs.first()) {
            (Some(a), Some(b)) => a.start <= b.start,
            _ => true,
        };
        if follows {
            // Parts read in time order: only the seam can join.
            let mut rest = other.runs.into_iter().peekable();
            if let Some(last) = self.runs.last_mut() {
                while let Some(next) = rest.next_if(|r| {
                    r.start <= last.end.saturating_add(self.join_ns)
                        && r.start.div_euclid(self.max_ns) == last.start.div_euclid(self.max_ns)
                }) {
                    last.absorb(next, most);
                }
            }
            self.runs.extend(rest);
        } else {
            // Parts that overlap in time (nodes of one job): merge the other
            // list with the runs it overlaps (parts come roughly in time
            // order, so that is a short tail), then join what the rule says
            // is one run.
            let first = other.runs[0].start;
            let at = self
                .runs
                .partition_point(|r| r.start <= first)
                .saturating_sub(1);
            let tail = self.runs.split_off(at);
            let mut a = tail.into_iter().peekable();
            let mut b = other.runs.into_iter().peekable();
            let mut merged = Vec::with_capacity(a.len() + b.len());
            loop {
                let take_a = match (a.peek(), b.peek()) {
                    (Some(x), Some(y)) => x.start <= y.start,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (None, None) => break,
                };
                merged.push(if take_a { a.next() } else { b.next() }.expect("peeked"));
            }
            let head = std::mem::take(&mut self.runs);
            self.runs = merged;
            self.normalise();
            let joined = std::mem::replace(&mut self.runs, head);
            let mut rest = joined.into_iter().peekable();
            if let Some(last) = self.runs.last_mut() {
                while let Some(next) = rest.next_if(|r| {
                    r.start <= last.end.saturating_add(self.join_ns)
                        && r.start.div_euclid(self.max_ns) == last.start.div_euclid(self.max_ns)
                }) {
                    last.absorb(next, most);
                }
            }
            self.runs.extend(rest);
        }
        while self.runs.len() > MAX_RUNS {
            self.coarsen();
        }
    }

    fn sort(&mut self) {
        if !self.sorted {
            self.normalise();
        }
    }

    /// Puts runs added out of time order in place.
    pub fn finish(&mut self) {
        self.sort();
    }

    /// Whether [`Runs::runs`] is in time order (always, after [`Runs::finish`]).
    pub fn is_sorted(&self) -> bool {
        self.sorted
    }

    /// The runs, in time order once [`Runs::finish`] ran.
    pub fn runs(&self) -> &[Stretch] {
        &self.runs
    }

    pub fn len(&self) -> usize {
        self.runs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// Everything the phase detector needs of a trace, gathered in one pass.
#[derive(Debug, Clone)]
pub struct Activity {
    /// Reads and page-cache fills that moved data, with their processes.
    pub reads: Runs,
    /// Writes that moved data, with their writers.
    pub writes: Runs,
    /// fsync, fdatasync, close and rename: how long a checkpoint takes to be durable.
    pub syncs: Runs,
    /// Name-space calls (see [`Op::is_metadata`]); a run's `bytes` counts
    /// its calls.
    pub metadata: Runs,
    /// mkdir calls, with their writers (also in `metadata`): where a save
    /// that makes its own directory began.
    pub dirs_made: Runs,
    /// Bytes the storage served the job's reads (a row's `storage_bytes`):
    /// `None` for a trace that never says.
    pub from_storage: Option<Runs>,
    /// Bytes the job's writes and syncs sent to the device in the calls
    /// themselves (not write-back's, later): `None` for a trace that never
    /// says.
    pub to_storage: Option<Runs>,
    /// Bytes of the job's written files the kernel wrote back later, outside
    /// its calls (`writeback` rows), at the time each was written back:
    /// `None` for a trace that has none.
    pub written_back: Option<Runs>,
    /// Entry `ts` of the first call (any op), Unix ns; `i64::MAX` when none.
    pub first_ns: i64,
    /// Latest `ts + dur_ns` of any call; `i64::MIN` when none.
    pub end_ns: i64,
    /// Processes that read with no rank (see [`Activity::outside_readers`]).
    rankless_readers: Processes,
    /// Processes that made a call with a rank.
    ranked: Processes,
}

/// A set of processes, sorted; a row from the process the last one named
/// costs one compare.
#[derive(Debug, Clone, Default)]
struct Processes {
    sorted: Vec<Writer>,
    last: Option<Writer>,
}

impl Processes {
    #[inline(always)]
    fn insert(&mut self, p: Writer) {
        if self.last == Some(p) {
            return;
        }
        self.last = Some(p);
        if let Err(at) = self.sorted.binary_search(&p) {
            self.sorted.insert(at, p);
        }
    }

    fn merge(&mut self, other: Processes) {
        for p in other.sorted {
            self.insert(p);
        }
    }

    fn contains(&self, p: Writer) -> bool {
        self.sorted.binary_search(&p).is_ok()
    }
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            reads: Runs::naming_at_most(MOST_READERS),
            writes: Runs::default(),
            syncs: Runs::default(),
            metadata: Runs::default(),
            dirs_made: Runs::default(),
            from_storage: None,
            to_storage: None,
            written_back: None,
            first_ns: i64::MAX,
            end_ns: i64::MIN,
            rankless_readers: Processes::default(),
            ranked: Processes::default(),
        }
    }
}

impl Activity {
    /// Takes in one call: its entry `ts`, duration, op, return value and caller.
    #[inline(always)]
    pub fn observe(&mut self, ts: i64, dur: i64, op: Op, ret: i64, caller: Caller) {
        self.observe_row(ts, dur, op, ret, caller, 1);
    }

    /// Takes in a row that stands for `calls` calls (a run: `dur` its whole
    /// span, `ret` its bytes).
    #[inline(always)]
    pub fn observe_row(&mut self, ts: i64, dur: i64, op: Op, ret: i64, caller: Caller, calls: u64) {
        let end = ts.saturating_add(dur.max(0));
        self.first_ns = self.first_ns.min(ts);
        self.end_ns = self.end_ns.max(end);
        if caller.rank.is_some() {
            self.ranked.insert(caller.process());
        }
        match op {
            _ if op.reads_file() && ret > 0 => {
                if caller.rank.is_none() {
                    self.rankless_readers.insert(caller.process());
                }
                self.reads.add(ts, end, ret as u64, Some(caller.process()))
            }
            Op::Write if ret > 0 => self.writes.add(ts, end, ret as u64, Some(caller.writer())),
            Op::Fsync | Op::Fdatasync | Op::Close => self.syncs.add(ts, end, 0, None),
            Op::Rename => {
                self.syncs.add(ts, end, 0, None);
                self.metadata.add(ts, end, calls, None);
            }
            Op::Mkdir => {
                self.metadata.add(ts, end, calls, None);
                self.dirs_made.add(ts, end, calls, Some(caller.writer()));
            }
            _ if op.is_metadata() => self.metadata.add(ts, end, calls, None),
            _ => {}
        }
    }

    /// Takes in what the storage served of a row that says: `bytes` of
    /// the row from `ts` to `end`.
    #[inline]
    pub fn observe_storage(&mut self, ts: i64, end: i64, bytes: i64) {
        let runs = self.from_storage.get_or_insert_with(Runs::default);
        runs.add(ts, end, bytes.max(0) as u64, None);
    }

    /// Takes in what a write or a sync sent to the device: `bytes` of the
    /// row from `ts` to `end`.
    #[inline]
    pub fn observe_device_writes(&mut self, ts: i64, end: i64, bytes: i64) {
        let runs = self.to_storage.get_or_insert_with(Runs::default);
        runs.add(ts, end, bytes.max(0) as u64, None);
    }

    /// Takes in a `writeback` row: `bytes` written back at `ts`.
    #[inline]
    pub fn observe_written_back(&mut self, ts: i64, bytes: i64) {
        let runs = self.written_back.get_or_insert_with(Runs::default);
        runs.add(ts, ts, bytes.max(0) as u64, None);
    }

    /// Bytes the kernel wrote back of the job's files, where rows say.
    pub fn written_back_total(&self) -> Option<u64> {
        let runs = self.written_back.as_ref()?;
        Some(runs.runs().iter().map(|r| r.bytes).sum())
    }

    /// Bytes the storage served the reads, where the rows say.
    pub fn storage_read_total(&self) -> Option<u64> {
        let runs = self.from_storage.as_ref()?;
        Some(runs.runs().iter().map(|r| r.bytes).sum())
    }

    /// Bytes the writes and syncs sent to the device themselves, where the
    /// rows say.
    pub fn storage_write_total(&self) -> Option<u64> {
        let runs = self.to_storage.as_ref()?;
        Some(runs.runs().iter().map(|r| r.bytes).sum())
    }

    /// Takes in the activity of another part of the trace.
    pub fn merge(&mut self, other: Activity) {
        let both = |a: Option<Runs>, b: Option<Runs>| match (a, b) {
            (Some(mut a), Some(b)) => {
                a.merge(b);
                Some(a)
            }
            (a, b) => a.or(b),
        };
        self.from_storage = both(self.from_storage.take(), other.from_storage);
        self.to_storage = both(self.to_storage.take(), other.to_storage);
        self.written_back = both(self.written_back.take(), other.written_back);
        self.reads.merge(other.reads);
        self.writes.merge(other.writes);
        self.syncs.merge(other.syncs);
        self.metadata.merge(other.metadata);
        self.dirs_made.merge(other.dirs_made);
        self.first_ns = self.first_ns.min(other.first_ns);
        self.end_ns = self.end_ns.max(other.end_ns);
        self.rankless_readers.merge(other.rankless_readers);
        self.ranked.merge(other.ranked);
    }

    /// The processes that read outside the job's ranks, sorted: where the
    /// trace names ranks, those that read and never made a call as a rank
    /// (a launcher or its agent, whose own reads, a source file for a log
    /// line or a host lookup, are not the job reading again). Empty where
    /// the trace names no rank: then every process may be the job's.
    pub fn outside_readers(&self) -> Vec<Writer> {
        if self.ranked.sorted.is_empty() {
            return Vec::new();
        }
        let rankless = self.rankless_readers.sorted.iter().copied();
        rankless.filter(|&p| !self.ranked.contains(p)).collect()
    }

    /// Puts runs added out of time order (an unsorted foreign segment) in place.
    pub fn finish(&mut self) {
        self.reads.finish();
        self.writes.finish();
        self.syncs.finish();
        self.metadata.finish();
        self.dirs_made.finish();
        for s in [
            &mut self.from_storage,
            &mut self.to_storage,
            &mut self.written_back,
        ]
        .into_iter()
        .flatten()
        {
            s.finish();
        }
    }

    pub fn is_sorted(&self) -> bool {
        self.reads.is_sorted()
            && self.writes.is_sorted()
            && self.syncs.is_sorted()
            && self.metadata.is_sorted()
            && self.dirs_made.is_sorted()
            && self.from_storage.as_ref().is_none_or(Runs::is_sorted)
            && self.to_storage.as_ref().is_none_or(Runs::is_sorted)
            && self.written_back.as_ref().is_none_or(Runs::is_sorted)
    }

    /// Whether any call was seen.
    pub fn is_empty(&self) -> bool {
        self.first_ns > self.end_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn runs_past_their_bound_are_joined_in_place_and_keep_every_byte() {
        let mut r = Runs::default();
        let calls = MAX_RUNS as i64 * 3 / 2;
        // Each call a run of its own (20 ms apart, past the 10 ms cells).
        for k in 0..calls {
            r.add(k * 20 * MS, k * 20 * MS + MS, 1, Some(0));
        }
        r.finish();
        assert!(r.len() <= MAX_RUNS, "{} runs", r.len());
        // Its buffer never grew past the bound.
        assert!(r.runs.capacity() <= MAX_RUNS, "{}", r.runs.capacity());
        assert_eq!(r.runs().iter().map(|s| s.bytes).sum::<u64>(), calls as u64);
        assert!(r.runs().windows(2).all(|w| w[0].end < w[1].start));
        assert_eq!(r.runs()[0].start, 0);
        assert_eq!(r.runs().last().unwrap().end, (calls - 1) * 20 * MS + MS);
    }

    fn spans(r: &mut Runs) -> Vec<(i64, i64, u64)> {
        r.finish();
        r.runs().iter().map(|r| (r.start, r.end, r.bytes)).collect()
    }

    #[test]
    fn calls_close_together_are_one_run_and_long_runs_are_cut() {
        let mut r = Runs::default();
        r.add(0, MS / 2, 10, None);
        r.add(MS, 2 * MS, 10, None); // 0.5 ms after the last end: same run
        r.add(4 * MS, 5 * MS, 10, None); // 2 ms pause: a new run
        for i in 0..30 {
            r.add(15 * MS + i * MS / 2, 15 * MS + i * MS / 2 + 100, 1, None);
        }
        let s = spans(&mut r);
        assert_eq!(s[0], (0, 2 * MS, 20));
        assert_eq!(s[1], (4 * MS, 5 * MS, 10));
        // 15 ms of back-to-back calls from 15 ms on: cut at 20 ms.
        assert_eq!(s.len(), 4, "{s:?}");
        assert_eq!(s[2], (15 * MS, 19 * MS + MS / 2 + 100, 10));
        assert_eq!(s[3].0, 20 * MS);
        assert_eq!(s[3].2, 20);
    }

    #[test]
    fn parts_merged_in_any_order_give_the_runs_of_one_pass() {
        // In time order, with pauses that sometimes join calls and sometimes not.
        let mut t = 0;
        let calls: Vec<(i64, u64)> = (0..500)
            .map(|i| {
                t += 200_000 + (i % 7) * 300_000;
                (t, i as u64)
            })
            .collect();
        let mut whole = Runs::default();
        for &(t, b) in &calls {
            whole.add(t, t + 50_000, b, Some(b as i64 % 3));
        }
        let mut parts: Vec<Runs> = calls
            .chunks(37)
            .map(|c| {
                let mut r = Runs::default();
                for &(t, b) in c {
                    r.add(t, t + 50_000, b, Some(b as i64 % 3));
                }
                r
            })
            .collect();
        parts.reverse();
        let mut merged = Runs::default();
        for p in parts {
            merged.merge(p);
        }
        merged.finish();
        assert_eq!(merged.runs(), whole.runs());
    }

    #[test]
    fn nodes_overlapping_in_time_merge_like_one_pass() {
        // Two nodes' calls interleave; each node's part is in time order.
        let node = |n: i64| -> Vec<(i64, u64)> {
            (0..400)
                .map(|i| (i * 1_700_000 + n * 900_000 + (i % 5) * 400_000, 1))
                .collect()
        };
        let mut all: Vec<(i64, u64)> = node(0).into_iter().chain(node(1)).collect();
        all.sort();
        let mut whole = Runs::default();
        for &(t, b) in &all {
            whole.add(t, t + 300_000, b, None);
        }
        let mut merged = Runs::default();
        for chunk in 0..4 {
            for n in 0..2 {
                let mut part = Runs::default();
                for &(t, b) in &node(n)[chunk * 100..(chunk + 1) * 100] {
                    part.add(t, t + 300_000, b, None);
                }
                merged.merge(part);
            }
        }
        merged.finish();
        assert_eq!(merged.runs(), whole.runs());
    }

    #[test]
    fn a_read_run_names_its_processes_until_it_is_crowded() {
        let mut a = Activity::default();
        let read = |a: &mut Activity, i: i64, pid: i32| {
            a.observe(i * 1_000, 500, Op::Read, 100, Caller { rank: Some(0), pid });
        };
        read(&mut a, 0, 7);
        read(&mut a, 1, 8);
        read(&mut a, 2, 7);
        let mut few = a.clone();
        few.finish();
        let r = &few.reads.runs()[0];
        assert_eq!(r.moved_by(process_of(7)), 200);
        assert_eq!(r.moved_by(process_of(9)), 0);
        // Past MOST_READERS processes, one not named may have read it all.
        for pid in 0..MOST_READERS as i32 {
            read(&mut a, 3 + pid as i64, 100 + pid);
        }
        a.finish();
        let r = &a.reads.runs()[0];
        assert!(r.crowded);
        assert_eq!(r.who.len(), MOST_READERS);
        assert_eq!(r.moved_by(process_of(7)), 200);
        assert_eq!(r.moved_by(process_of(9)), r.bytes);
    }

    #[test]
    fn writers_are_counted_once() {
        let mut a = Activity::default();
        for i in 0..8 {
            a.observe(
                i * 1_000,
                500,
                Op::Write,
                4096,
                Caller {
                    rank: Some((i % 2) as i32),
                    pid: 99,
                },
            );
        }
        let unranked = Caller {
            rank: None,
            pid: 99,
        };
        a.observe(10_000, 10, Op::Write, 4096, unranked);
        a.finish();
        let w = a.writes.runs();
        assert_eq!(w.len(), 1);
        assert_eq!(
            w[0].callers().collect::<Vec<_>>(),
            vec![0, 1, (1 << 40) | 99]
        );
        assert_eq!(w[0].moved_by(0), 4 * 4096);
        assert_eq!(w[0].moved_by((1 << 40) | 99), 4096);
        assert_eq!(w[0].bytes, 9 * 4096);
    }
}
