//! What the job did with every path, counted per row at the cost of an
//! index: a row's path is looked up once per distinct spelling (a scan's
//! rows through the `path` column's dictionary, the busiest counters kept
//! per key of it; the reader's rows by reusing the previous row's slot
//! when the spelling repeats, and a hash lookup only when it changes),
//! never canonicalised or copied per row. Spellings become paths once, in
//! [`RolesBuilder::finish`](super::RolesBuilder::finish).
//!
//! A builder takes rows either from the reader's time-ordered stream
//! ([`RolesBuilder::observe`]) or, as a [`Fold`] of
//! [`iorepro_format::scan`], a row group at a time on every core, merged
//! in time order ([`RolesBuilder::merge`]).

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, Int32Array, StringArray};

use crate::by_op::by_op;
use crate::intern::Interner;
use iorepro_format::columns::{Events, PerPath};
use iorepro_format::paths::is_url;
use iorepro_format::runs::CallsOf;
use iorepro_format::scan::{Fold, ScanBatch};
use iorepro_format::schema::Op;

const O_CREAT: i32 = libc::O_CREAT;
const O_TRUNC: i32 = libc::O_TRUNC;

/// What the job did with one spelling of a path (and, once the spellings
/// of one path are merged, with the path).
#[derive(Debug, Clone)]
pub(super) struct Stats {
    pub calls: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Write calls (a run counts as its calls) and the largest one's bytes.
    pub write_calls: u64,
    pub max_write: u64,
    /// The first and last write's start (Unix ns).
    pub first_write_ns: i64,
    pub last_write_ns: i64,
    /// Opens that created or truncated it and truncate calls: times its
    /// content was begun anew.
    pub rewrites: u32,
    /// Created, truncated or written by the job.
    pub made: bool,
    /// The job's last call that made or removed the name removed it
    /// (unlink, rmdir); `changed_ns` is when that last call was.
    pub removed: bool,
    pub changed_ns: i64,
    /// Listed, opened, created or removed as a directory.
    pub directory: bool,
    /// A mkdir found it already there (`os.makedirs(..., exist_ok=True)`
    /// into a folder an earlier run left): the job asked for it as if it
    /// made it, and a save into it begins there all the same.
    pub made_again: bool,
    /// Some call on it succeeded (a spelling ending in `/` that succeeded
    /// names a directory).
    pub found: bool,
    /// Renamed away to this spelling (the last time, and when).
    pub renamed_to: Option<(i64, Box<str>)>,
    pub first_data_ns: Option<i64>,
    /// The first call that named it and was more than a lookup that found
    /// it: a lookup that failed (the name not there yet), or a call that
    /// made, changed or removed it (Unix ns; `i64::MAX`: none). For a name
    /// the job made, where it first named it.
    pub first_named_ns: i64,
    /// The process that made that call.
    pub first_named_pid: i32,
    /// What the name said before it was anonymized (`path_traits`); `None`
    /// where the name is as captured.
    pub traits: Option<i32>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            calls: 0,
            read_bytes: 0,
            write_bytes: 0,
            write_calls: 0,
            max_write: 0,
            first_write_ns: i64::MAX,
            last_write_ns: i64::MIN,
            rewrites: 0,
            made: false,
            removed: false,
            changed_ns: i64::MIN,
            directory: false,
            made_again: false,
            found: false,
            renamed_to: None,
            first_data_ns: None,
            first_named_ns: i64::MAX,
            first_named_pid: 0,
            traits: None,
        }
    }
}

impl Stats {
    /// A call that made (`removed` false) or removed the name at `ts`; the
    /// later call wins (the later row on a tie).
    fn change(&mut self, ts: i64, removed: bool) {
        if ts >= self.changed_ns {
            self.changed_ns = ts;
            self.removed = removed;
        }
    }

    /// A call by process `pid` at `ts` that named it (see
    /// [`Stats::first_named_ns`]); the earlier call wins.
    fn named(&mut self, ts: i64, pid: i32) {
        if ts < self.first_named_ns {
            self.first_named_ns = ts;
            self.first_named_pid = pid;
        }
    }

    /// Takes in `other`: the same path's stats from a later part of the
    /// trace or another spelling of it. What depends on order goes by time.
    pub fn merge(&mut self, other: &Stats) {
        self.calls += other.calls;
        self.read_bytes += other.read_bytes;
        self.write_bytes += other.write_bytes;
        self.write_calls += other.write_calls;
        self.max_write = self.max_write.max(other.max_write);
        self.first_write_ns = self.first_write_ns.min(other.first_write_ns);
        self.last_write_ns = self.last_write_ns.max(other.last_write_ns);
        self.rewrites += other.rewrites;
        self.made |= other.made;
        if other.changed_ns != i64::MIN {
            self.change(other.changed_ns, other.removed);
        }
        self.directory |= other.directory;
        self.made_again |= other.made_again;
        self.found |= other.found;
        if let Some((ts, to)) = &other.renamed_to {
            if self.renamed_to.as_ref().is_none_or(|(mine, _)| ts >= mine) {
                self.renamed_to = Some((*ts, to.clone()));
            }
        }
        self.first_data_ns = match (self.first_data_ns, other.first_data_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.named(other.first_named_ns, other.first_named_pid);
        self.traits = self.traits.or(other.traits);
    }

    /// Created, truncated, written, renamed to, or made or removed as a
    /// directory by the job.
    pub fn changed(&self) -> bool {
        self.made || self.changed_ns != i64::MIN
    }
}

/// What every row of a path bumps, kept apart from the rest of [`Stats`]
/// so the busy loop's increments stay within a few tens of KiB: its calls,
/// the bytes read from it (reads and page faults), when it was first read,
/// and whether some call on it succeeded. A tally that counts the same per
/// path hands these over whole ([`RolesBuilder::take_counts`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hot {
    pub calls: u64,
    pub read_bytes: u64,
    /// The first read's start (`i64::MAX`: none).
    pub first_read_ns: i64,
    pub found: bool,
}

impl Default for Hot {
    fn default() -> Self {
        Hot {
            calls: 0,
            read_bytes: 0,
            first_read_ns: i64::MAX,
            found: false,
        }
    }
}

impl Hot {
    /// Any row on the path.
    #[inline(always)]
    fn count(&mut self, op: Op, ret: i64, calls: u64, ts: i64) {
        self.calls += calls;
        self.found |= ret >= 0;
        if ret > 0 && matches!(op, Op::Read | Op::Fault) {
            self.read_bytes += ret as u64;
            self.first_read_ns = self.first_read_ns.min(ts);
        }
    }

    /// Takes in the counters of more rows of the same path.
    fn absorb(&mut self, other: Hot) {
        self.calls += other.calls;
        self.read_bytes += other.read_bytes;
        self.first_read_ns = self.first_read_ns.min(other.first_read_ns);
        self.found |= other.found;
    }
}

impl Stats {
    /// Takes in the counters of the busy loop.
    fn settle(&mut self, h: Hot) {
        self.calls += h.calls;
        self.read_bytes += h.read_bytes;
        self.found |= h.found;
        if h.first_read_ns != i64::MAX {
            self.first_data_ns = Some(
                self.first_data_ns
                    .map_or(h.first_read_ns, |f| f.min(h.first_read_ns)),
            );
        }
    }
}

/// One row's fields that roles need.
#[derive(Debug, Clone, Copy)]
struct Row {
    op: Op,
    ts: i64,
    pid: i32,
    ret: i64,
    calls: u64,
    flags: i32,
}

/// The slot of no path (a null, or the empty path of a call on a descriptor).
const NO_SLOT: u32 = u32::MAX;

/// The columns of one batch the roles read (see [`RolesBuilder::begin`]).
pub(crate) struct RolesBatch<'a> {
    ts: &'a [i64],
    pid: &'a [i32],
    ret: &'a [i64],
    flags: &'a Int32Array,
    path2: &'a StringArray,
    has_path2: bool,
    path2_traits: &'a Int32Array,
    /// Keys into the `path` dictionary, and the index that stands for a null key.
    keys: &'a Int32Array,
    no_key: usize,
}

/// Feeds rows (one at a time, or a scan's batches); [`finish`](Self::finish) judges.
#[derive(Debug, Default)]
pub struct RolesBuilder {
    /// Every distinct spelling (numbered by its slot), and what was done
    /// with it.
    names: Interner,
    /// Everything but the busy loop's counters until [`Self::settle`].
    pub(super) stats: Vec<Stats>,
    hot: Vec<Hot>,
    /// The first and last row's start (Unix ns).
    pub(super) start_ns: i64,
    pub(super) end_ns: i64,
    seen_rows: bool,
    /// The slot of the previous row's path (a run of rows on one file is
    /// the common case).
    last: u32,
    /// The `path` dictionary last seen and the slot of each of its values
    /// (the last entry, [`NO_SLOT`], stands for rows without a path) ...
    dictionary: Option<(ArrayRef, Vec<u32>)>,
    /// ... and the busy loop's counters per key of it, handed to `hot` when
    /// the dictionary changes or the builder settles: a quiet row costs an
    /// increment in a small array indexed by its key, not a look-up of its slot.
    hot_by_key: Vec<Hot>,
    /// The `op` dictionary last seen (of [`Events`]) and its ops.
    op_table: Option<(ArrayRef, Vec<Op>)>,
    /// The slot of each path of [`Events`] read with path keys.
    slot_of_path: PerPath<u32>,
}

impl RolesBuilder {
    fn slot(&mut self, raw: &str) -> u32 {
        if raw.is_empty() {
            return NO_SLOT;
        }
        if (self.last as usize) < self.names.len() && self.names.name(self.last) == raw {
            return self.last;
        }
        let slot = self.names.id(raw);
        if slot as usize == self.stats.len() {
            self.stats.push(Stats::default());
            self.hot.push(Hot::default());
        }
        self.last = slot;
        slot
    }

    fn span(&mut self, ts: i64) {
        if self.seen_rows {
            self.start_ns = self.start_ns.min(ts);
            self.end_ns = self.end_ns.max(ts);
        } else {
            (self.start_ns, self.end_ns, self.seen_rows) = (ts, ts, true);
        }
    }

    /// What row `row` of `ev` says about its paths. Needs the columns of
    /// [`super::ROLE_COLUMNS`].
    pub fn observe(&mut self, ev: &Events, row: usize) {
        let dict = ev.op_dict();
        let table = match &self.op_table {
            Some((known, table)) if std::sync::Arc::ptr_eq(known, dict.values()) => table,
            _ => {
                let names: &StringArray = dict.values().as_string();
                let table = (0..names.len())
                    .map(|i| Op::parse(names.value(i)))
                    .collect();
                &self.op_table.insert((dict.values().clone(), table)).1
            }
        };
        let op = table[dict.keys().value(row) as usize];
        let r = Row {
            op,
            ts: ev.ts().value(row),
            pid: ev.pid().value(row),
            ret: ev.ret().value(row),
            calls: ev.calls_at(row).max(1) as u64,
            flags: Events::opt_i32(ev.flags(), row).unwrap_or(0),
        };
        self.span(r.ts);
        let mut slot_of_path = std::mem::take(&mut self.slot_of_path);
        let slot = slot_of_path
            .get(ev, row, |p| self.slot(p))
            .unwrap_or(NO_SLOT);
        self.slot_of_path = slot_of_path;
        self.note_traits(slot, Events::opt_i32(ev.path_traits(), row));
        let second = ev.path2_at(row);
        self.count_hot(r.op, slot, r.ret, r.calls, r.ts);
        if second.is_none() && quiet(r.op, || r.ret, || r.flags) {
            return;
        }
        let traits2 = Events::opt_i32(ev.path2_traits(), row);
        self.row(r, slot, second, traits2);
    }

    /// Keeps what an anonymized trace recorded of a name (see [`Stats::traits`]).
    #[inline]
    fn note_traits(&mut self, slot: u32, traits: Option<i32>) {
        if let (Some(t), Some(s)) = (traits, self.stats.get_mut(slot as usize)) {
            s.traits.get_or_insert(t);
        }
    }

    /// Counts quiet rows per key of `values` from now on, after handing
    /// the counts of the dictionary before to their slots. Row groups share
    /// one dictionary across their batches, so this is once per row group.
    fn use_dictionary(&mut self, values: &ArrayRef) {
        if let Some((known, _)) = &self.dictionary {
            if std::sync::Arc::ptr_eq(known, values) {
                return;
            }
        }
        self.flush_hot();
        let names: &StringArray = values.as_string();
        let mut slots: Vec<u32> = (0..names.len())
            .map(|i| {
                // A request's URL is no file (see `crate::requests_by_object`).
                if names.is_valid(i) && !is_url(names.value(i)) {
                    self.slot(names.value(i))
                } else {
                    NO_SLOT
                }
            })
            .collect();
        slots.push(NO_SLOT);
        self.hot_by_key = vec![Hot::default(); slots.len()];
        self.dictionary = Some((values.clone(), slots));
    }

    /// Hands the busy loop's counters per key to their slots.
    fn flush_hot(&mut self) {
        let Some((_, slots)) = &self.dictionary else {
            return;
        };
        for (&slot, h) in slots.iter().zip(self.hot_by_key.iter_mut()) {
            let h = std::mem::take(h);
            if let Some(to) = self.hot.get_mut(slot as usize) {
                to.absorb(h);
            }
        }
    }

    /// One batch of a scan (the columns of [`super::ROLE_COLUMNS`]).
    pub fn add_batch(&mut self, b: &ScanBatch) {
        if b.is_empty() {
            return;
        }
        let cols = self.begin(b);
        let (keys, table) = b.ops();
        let calls = CallsOf::new(b.calls());
        for i in 0..b.len() {
            let op = table[keys[i] as usize];
            let n = calls.at(i) as u64;
            by_op!(op, |o| self.row_at(&cols, i, o, n));
        }
    }

    /// The columns of a batch the roles read, looked up once (and the
    /// batch's span and path slots taken in) before its rows are counted
    /// with [`RolesBuilder::row_at`]. Needs the columns of
    /// [`super::ROLE_COLUMNS`].
    pub(crate) fn begin<'a>(&mut self, b: &'a ScanBatch) -> RolesBatch<'a> {
        let ts = b.ts();
        // Rows are in `ts` order within a segment (docs/FORMAT.md), so a
        // batch spans from its first row to its last: no pass over the
        // column for it.
        if let (Some(&first), Some(&last)) = (ts.first(), ts.last()) {
            self.span(first);
            self.span(last);
        }
        let path2 = b.path2();
        let path = b.path();
        self.use_dictionary(path.values());
        let no_key = self.hot_by_key.len() - 1;
        // An anonymized trace says what each name said: once per row here,
        // as quiet rows are counted per key of the dictionary, not per slot.
        let traits = b.path_traits();
        if traits.null_count() < traits.len() {
            for (i, t) in traits.iter().enumerate() {
                if t.is_some() && path.keys().is_valid(i) {
                    let key = path.keys().value(i) as usize;
                    let slot = self.dictionary.as_ref().map_or(NO_SLOT, |(_, s)| s[key]);
                    self.note_traits(slot, t);
                }
            }
        }
        RolesBatch {
            ts,
            pid: b.pid(),
            ret: b.ret(),
            flags: b.flags(),
            has_path2: path2.null_count() < path2.len(),
            path2,
            path2_traits: b.path2_traits(),
            keys: path.keys(),
            no_key,
        }
    }

    /// Counts row `i` of a batch begun with [`RolesBuilder::begin`]: its
    /// op `op`, standing for `n` calls. Inlined into the caller's
    /// [`by_op!`] arms.
    #[inline(always)]
    pub(crate) fn row_at(&mut self, c: &RolesBatch, i: usize, op: Op, n: u64) {
        let key = if c.keys.is_valid(i) {
            c.keys.value(i) as usize
        } else {
            c.no_key
        };
        let second = (c.has_path2 && c.path2.is_valid(i)).then(|| c.path2.value(i));
        self.hot_by_key[key].count(op, c.ret[i], n, c.ts[i]);
        if second.is_none() && quiet(op, || c.ret[i], || Events::opt_i32(c.flags, i).unwrap_or(0)) {
            return;
        }
        self.loud_row(c, i, key, op, n, second);
    }

    /// Row `i` as [`RolesBuilder::row_at`] counts it, less what [`Hot`]
    /// counts: for a builder whose busy counters a tally keeps (see
    /// [`RolesBuilder::take_counts`]). Only the rows [`quiet`] lets through
    /// cost more than the test.
    #[inline(always)]
    pub(crate) fn loud_row_at(&mut self, c: &RolesBatch, i: usize, op: Op, n: u64) {
        let second = (c.has_path2 && c.path2.is_valid(i)).then(|| c.path2.value(i));
        if second.is_none() && quiet(op, || c.ret[i], || Events::opt_i32(c.flags, i).unwrap_or(0)) {
            return;
        }
        let key = if c.keys.is_valid(i) {
            c.keys.value(i) as usize
        } else {
            c.no_key
        };
        self.loud_row(c, i, key, op, n, second);
    }

    /// A row that is more than its [`Hot`] counters: a write, a create, a
    /// rename, a listing, a lookup that failed.
    #[inline]
    fn loud_row(
        &mut self,
        c: &RolesBatch,
        i: usize,
        key: usize,
        op: Op,
        n: u64,
        second: Option<&str>,
    ) {
        let r = Row {
            op,
            ts: c.ts[i],
            pid: c.pid[i],
            ret: c.ret[i],
            calls: n,
            flags: Events::opt_i32(c.flags, i).unwrap_or(0),
        };
        let slot = self.dictionary.as_ref().map_or(NO_SLOT, |(_, s)| s[key]);
        let traits2 = Events::opt_i32(c.path2_traits, i);
        self.row(r, slot, second, traits2);
    }

    /// Takes in the busy loop's counters of the rows on `path`, counted by
    /// a tally (rows fed with [`RolesBuilder::loud_row_at`]).
    pub(crate) fn take_counts(&mut self, path: &str, counts: Hot) {
        let slot = self.slot(path);
        if let Some(h) = self.hot.get_mut(slot as usize) {
            h.absorb(counts);
        }
    }

    /// Counts a row in the busy loop's counters.
    #[inline(always)]
    fn count_hot(&mut self, op: Op, slot: u32, ret: i64, calls: u64, ts: i64) {
        if let Some(h) = self.hot.get_mut(slot as usize) {
            h.count(op, ret, calls, ts);
        }
    }

    /// Moves the busy loop's counters into the stats.
    fn settle(&mut self) {
        self.flush_hot();
        for (s, h) in self.stats.iter_mut().zip(&mut self.hot) {
            s.settle(std::mem::take(h));
        }
    }

    /// The spellings seen and what was done with each.
    pub(super) fn into_parts(mut self) -> (Interner, Vec<Stats>, i64, i64) {
        self.settle();
        (self.names, self.stats, self.start_ns, self.end_ns)
    }

    #[inline]
    fn row(&mut self, r: Row, slot: u32, path2: Option<&str>, traits2: Option<i32>) {
        let Row {
            op,
            ts,
            pid,
            ret,
            calls,
            flags,
        } = r;
        // Looked up first (a new spelling grows the stats), keeping the
        // first path as the one the next row is likely to name again.
        let second = path2.map(|p2| {
            let at = self.slot(p2);
            if slot != NO_SLOT {
                self.last = slot;
            }
            at
        });
        // Its calls, reads and success are in the busy loop's counters.
        if let Some(s) = self.stats.get_mut(slot as usize) {
            s.named(ts, pid);
            if ret > 0 && op == Op::Write {
                s.first_data_ns = Some(s.first_data_ns.map_or(ts, |f| f.min(ts)));
            }
            // Not a directory for that alone: a file may hold the name.
            if op == Op::Mkdir && ret == -(libc::EEXIST as i64) {
                s.made_again = true;
            }
            if ret >= 0 {
                match op {
                    Op::Write => {
                        s.write_bytes += ret as u64;
                        s.write_calls += calls;
                        s.max_write = s.max_write.max(ret as u64 / calls);
                        s.first_write_ns = s.first_write_ns.min(ts);
                        s.last_write_ns = s.last_write_ns.max(ts);
                        s.made = true;
                    }
                    Op::Truncate => {
                        s.made = true;
                        s.rewrites += 1;
                    }
                    Op::Open => {
                        if flags & (O_CREAT | O_TRUNC) != 0
                            && flags & libc::O_ACCMODE != libc::O_RDONLY
                        {
                            s.made = true;
                            s.change(ts, false);
                            if flags & O_TRUNC != 0 || flags & libc::O_APPEND == 0 {
                                s.rewrites += 1;
                            }
                        }
                        s.directory |= flags & libc::O_DIRECTORY != 0;
                    }
                    Op::Mkdir => {
                        s.directory = true;
                        s.change(ts, false);
                    }
                    Op::Getdents => s.directory = true,
                    Op::Unlink => s.change(ts, true),
                    Op::Rmdir => {
                        s.directory = true;
                        s.change(ts, true);
                    }
                    Op::Rename => {
                        if let Some(p2) = path2 {
                            s.renamed_to = Some((ts, p2.into()));
                        }
                    }
                    _ => {}
                }
            }
        }
        if let Some(s) = second.and_then(|at| self.stats.get_mut(at as usize)) {
            if let Some(t) = traits2 {
                s.traits.get_or_insert(t);
            }
            s.named(ts, pid);
            s.calls += calls;
            s.found |= ret >= 0;
            if ret >= 0 && matches!(op, Op::Rename | Op::Link | Op::Symlink) {
                s.made = true;
                s.change(ts, false);
            }
        }
    }

    /// Takes in the builder of the part of the trace that follows this one.
    pub fn merge(&mut self, other: RolesBuilder) {
        if other.seen_rows {
            self.span(other.start_ns);
            self.span(other.end_ns);
        }
        let (names, stats, _, _) = other.into_parts();
        for (name, s) in names.iter().zip(&stats) {
            let at = self.slot(name);
            self.stats[at as usize].merge(s);
        }
    }
}

/// Whether a call of `op` (with open flags `flags`, its result `ret`) only
/// bumps the busy loop's counters (most rows: a read, a close, a stat, a
/// plain open). A lookup that failed is more: a name looked up before it
/// is there is where a job that then makes it first named it
/// ([`Stats::first_named_ns`]).
#[inline(always)]
fn quiet(op: Op, ret: impl FnOnce() -> i64, flags: impl FnOnce() -> i32) -> bool {
    match op {
        Op::Read | Op::Fault | Op::Close | Op::Lseek => true,
        Op::Fsync | Op::Fdatasync | Op::Mmap | Op::Writeback | Op::Other => true,
        Op::Stat | Op::Access => ret() >= 0,
        Op::Open => ret() >= 0 && flags() & (O_CREAT | O_TRUNC | libc::O_DIRECTORY) == 0,
        _ => false,
    }
}

impl Fold for RolesBuilder {
    fn add(&mut self, b: &ScanBatch) {
        self.add_batch(b);
    }
}
