//! The rules that turn a trace's [`Activity`] into phases. Every test is
//! relative to the trace itself or to the calls' own timing, so the same
//! rules hold for a 0.2 s synthetic trace, a laptop capture and a 512-GPU job:
//!
//! - **checkpoint**: writes that follow each other (pauses up to
//!   [`CHECKPOINT_GAP_NS`], as long as the job's reading does not resume in
//!   between (where the trace names ranks, a process that never ran as one,
//!   a launcher or its agent, is not the job reading);
//!   writes closer than [`RESUME_GAP_NS`] always belong together) form a
//!   burst; a burst that writes at least [`MIN_CHECKPOINT_BYTES`] and
//!   [`WRITE_SHARE_OF_PEAK`] of the largest burst is a checkpoint (a log line
//!   or a metrics flush is not). It ends when its files are synced (fsync,
//!   close, rename following its writes within [`CHECKPOINT_TAIL_GAP_NS`]).
//!   The same writers writing about as much again after such a sync and a
//!   pause is the next save, however short the pause; so is one of them
//!   making a directory in the pause (a save into a folder of its own).
//! - **idle**: at least [`IDLE_MIN_NS`] without a read or a checkpoint
//!   (shorter pauses are compute between steps and belong to the phase
//!   around them), or any stretch between other phases that reads nothing.
//! - **load**: the reading at the start of the job before it settles into
//!   its steps. Cumulative bytes read are compared with what the average
//!   pace of the whole job would have read by then; when reading runs ahead
//!   of that pace, the load ends where the lead is largest. Without such a
//!   lead, a burst of reading followed by a quiet stretch longer than itself
//!   (the loader reading an epoch ahead, then compute) is the load; and a
//!   job that reads at one pace from its first step on loads its first
//!   batch. The load ends at an idle stretch or the first checkpoint.
//! - **metadata**: name-space calls (stat, open, access, mkdir, listings,
//!   renames...) closer than [`METADATA_GAP_NS`] to each other, at least
//!   [`METADATA_MIN_CALLS`] of them, moving less than
//!   [`METADATA_BYTES_PER_CALL`] of data per call while they last: a walk of
//!   a dataset tree, a probe for files, directories made before a save.
//!   Checkpoints and the load take precedence over a metadata stretch that
//!   overlaps them (their own opens and renames are part of them).
//! - **read**: everything else that reads.

use crate::activity::{Activity, Stretch, Writer};

use super::{Phase, PhaseKind};

mod checkpoints;
use checkpoints::checkpoints;

/// A burst must write at least this much to be a checkpoint.
pub const MIN_CHECKPOINT_BYTES: u64 = 1 << 20;
/// ... and at least this share of the trace's largest write burst.
pub const WRITE_SHARE_OF_PEAK: f64 = 0.05;
/// Pauses inside one checkpoint (serialisation between tensors, ranks that
/// start late) up to this long do not split it, unless reading resumes.
pub const CHECKPOINT_GAP_NS: i64 = 500_000_000;
/// Writes closer than this are one checkpoint even if other ranks read in between.
pub const RESUME_GAP_NS: i64 = 5_000_000;
/// Syncs and small writes this close to a checkpoint's writes are part of it.
pub const CHECKPOINT_TAIL_GAP_NS: i64 = 50_000_000;
/// A save that follows another within [`CHECKPOINT_GAP_NS`] is told apart
/// by its writers writing again, each side within this factor of the
/// other's bytes (the same state saved twice).
pub const REPEAT_BYTES_RATIO: f64 = 1.25;
/// A run of writes at either edge of a burst, further than
/// [`CHECKPOINT_TAIL_GAP_NS`] from the rest and holding less than this share
/// of it, is not part of it (a log line before the save).
pub const EDGE_SHARE: f64 = 0.01;
/// Reading "resumes" when it moves at least this share of a typical read run.
pub const READING_FLOOR_SHARE: f64 = 0.1;
/// A quiet stretch at least this long is idle.
pub const IDLE_MIN_NS: i64 = 1_000_000_000;
/// Name-space calls closer than this (end to start) are one metadata stretch.
pub const METADATA_GAP_NS: i64 = 100_000_000;
/// A metadata stretch holds at least this many calls ...
pub const METADATA_MIN_CALLS: u64 = 64;
/// ... and moves less than this much data per call while it lasts (a page:
/// a job reading small files opens, stats and closes each, but moves far
/// more than this per call).
pub const METADATA_BYTES_PER_CALL: u64 = 4096;
/// The load's lead over the steady pace must be at least this many typical
/// read runs, or the job has no load burst beyond its first batch.
pub const LOAD_MIN_EXCESS_RUNS: f64 = 2.0;

/// Read runs with prefix sums of their bytes: bytes started in a span in O(log n).
struct ReadIndex<'a> {
    runs: &'a [Stretch],
    cum: Vec<u64>,
}

impl<'a> ReadIndex<'a> {
    fn new(runs: &'a [Stretch]) -> Self {
        Self::counting(runs, |r| r.bytes)
    }

    /// Counts only what the job read: not the bytes of `outside` processes
    /// (sorted, not empty; see [`Activity::outside_readers`]).
    fn of_the_job(runs: &'a [Stretch], outside: &[Writer]) -> Self {
        Self::counting(runs, |r| {
            let theirs: u64 = r
                .who
                .iter()
                .filter(|(w, _)| outside.binary_search(w).is_ok())
                .map(|&(_, b)| b)
                .sum();
            r.bytes.saturating_sub(theirs)
        })
    }

    fn counting(runs: &'a [Stretch], bytes: impl Fn(&Stretch) -> u64) -> Self {
        let mut cum = Vec::with_capacity(runs.len() + 1);
        cum.push(0);
        for r in runs {
            cum.push(cum.last().unwrap() + bytes(r));
        }
        ReadIndex { runs, cum }
    }

    /// The bytes counted of run `i`.
    fn counted(&self, i: usize) -> u64 {
        self.cum[i + 1] - self.cum[i]
    }

    /// Index of the first run starting at or after `t`.
    fn first_from(&self, t: i64) -> usize {
        self.runs.partition_point(|r| r.start < t)
    }

    /// Bytes of the runs that start in `[a, b)`.
    fn bytes_in(&self, a: i64, b: i64) -> u64 {
        if b <= a {
            return 0;
        }
        self.cum[self.first_from(b)] - self.cum[self.first_from(a)]
    }

    fn any_in(&self, a: i64, b: i64) -> bool {
        b > a && self.first_from(b) > self.first_from(a)
    }
}

fn median(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let mid = v.len() / 2;
    *v.select_nth_unstable(mid).1
}

/// A span of the trace marked with a kind, Unix ns.
#[derive(Debug, Clone, Copy)]
struct Mark {
    kind: PhaseKind,
    start: i64,
    end: i64,
}

/// Finds the phases of a trace; they cover it from its first call's start to
/// its last call's end. Empty when the trace has no calls.
pub fn detect(activity: &Activity) -> Vec<Phase> {
    if activity.is_empty() {
        return Vec::new();
    }
    if !activity.is_sorted() {
        let mut sorted = activity.clone();
        sorted.finish();
        return detect(&sorted);
    }
    let t0 = activity.first_ns;
    let t1 = activity.end_ns.max(t0 + 1);
    let reads = ReadIndex::new(activity.reads.runs());
    let typical_read = typical_read(reads.runs);
    let reading_floor = floor_of(typical_read);

    // A launcher's read in the pause between two files of a save does not
    // resume the job's reading.
    let outside = activity.outside_readers();
    let job_reads = (!outside.is_empty()).then(|| ReadIndex::of_the_job(reads.runs, &outside));
    let checkpoints = checkpoints(
        activity,
        job_reads.as_ref().unwrap_or(&reads),
        reading_floor,
        t1,
    );
    let mut metadata = metadata(activity, &reads, &checkpoints);
    let idle = idle_gaps(&reads, &checkpoints, &metadata, t0, t1);
    let mut marks: Vec<Mark> = checkpoints.iter().chain(idle.iter()).copied().collect();
    if let Some(load) = load(&reads, &checkpoints, &idle, typical_read) {
        metadata.retain(|m| m.end <= load.start || m.start >= load.end);
        marks.push(load);
    }
    marks.extend(metadata);
    marks.sort_by_key(|m| m.start);
    let spans = tile(&marks, &reads, t0, t1);
    account(spans, activity, t0)
}

/// The bytes of a typical read run: the median run's.
fn typical_read(runs: &[Stretch]) -> u64 {
    median(runs.iter().map(|r| r.bytes).collect())
}

/// The least a read run moves to count as reading (see
/// [`READING_FLOOR_SHARE`]), given a typical run's bytes.
fn floor_of(typical_read: u64) -> u64 {
    ((typical_read as f64 * READING_FLOOR_SHARE) as u64).max(1)
}

/// The least a read run of `runs` (a trace's) moves to count as reading.
pub fn reading_floor(runs: &[Stretch]) -> u64 {
    floor_of(typical_read(runs))
}

/// Stretches where name-space calls dominate (see the module notes), outside
/// checkpoints, in time order.
fn metadata(activity: &Activity, reads: &ReadIndex, checkpoints: &[Mark]) -> Vec<Mark> {
    let runs = activity.metadata.runs();
    let writes = activity.writes.runs();
    let written_in = |a: i64, b: i64| -> u64 {
        let from = writes.partition_point(|w| w.start < a);
        writes[from..]
            .iter()
            .take_while(|w| w.start < b)
            .map(|w| w.bytes)
            .sum()
    };
    let mut marks = Vec::new();
    let mut i = 0;
    while i < runs.len() {
        let (start, mut end, mut calls) = (runs[i].start, runs[i].end, runs[i].bytes);
        i += 1;
        while i < runs.len() && runs[i].start - end <= METADATA_GAP_NS {
            end = end.max(runs[i].end);
            calls += runs[i].bytes;
            i += 1;
        }
        let end = end.max(start + 1);
        let moved = reads.bytes_in(start, end) + written_in(start, end);
        let overlaps_checkpoint = checkpoints.iter().any(|c| c.start < end && start < c.end);
        if calls >= METADATA_MIN_CALLS
            && moved < calls.saturating_mul(METADATA_BYTES_PER_CALL)
            && !overlaps_checkpoint
        {
            marks.push(Mark {
                kind: PhaseKind::Metadata,
                start,
                end,
            });
        }
    }
    marks
}

/// Stretches of at least [`IDLE_MIN_NS`] with neither reads, checkpoints nor
/// metadata stretches.
fn idle_gaps(
    reads: &ReadIndex,
    checkpoints: &[Mark],
    metadata: &[Mark],
    t0: i64,
    t1: i64,
) -> Vec<Mark> {
    let mut busy: Vec<(i64, i64)> = reads.runs.iter().map(|r| (r.start, r.end)).collect();
    busy.extend(checkpoints.iter().chain(metadata).map(|c| (c.start, c.end)));
    busy.sort_unstable();
    let mut idle = Vec::new();
    let mut covered = t0;
    for (s, e) in busy {
        if s - covered >= IDLE_MIN_NS {
            idle.push(Mark {
                kind: PhaseKind::Idle,
                start: covered,
                end: s,
            });
        }
        covered = covered.max(e);
    }
    if t1 - covered >= IDLE_MIN_NS {
        idle.push(Mark {
            kind: PhaseKind::Idle,
            start: covered,
            end: t1,
        });
    }
    idle
}

/// Time of `spans` (sorted, disjoint) inside `[a, b)`.
fn overlap(spans: &[Mark], a: i64, b: i64) -> i64 {
    spans
        .iter()
        .map(|m| (m.end.min(b) - m.start.max(a)).max(0))
        .sum()
}

/// The load: from the first substantial reading to where the lead of
/// cumulative reads over the job's average pace is largest (see the module
/// notes). An idle stretch ends it, and so does the first checkpoint.
fn load(reads: &ReadIndex, checkpoints: &[Mark], idle: &[Mark], typical_read: u64) -> Option<Mark> {
    let runs = reads.runs;
    let first = runs.first()?;
    // The pace: bytes read outside checkpoints (a restore's metadata, a
    // config read during a save are not the pace) per second of time that
    // is neither idle nor checkpoint.
    let inside = |r: &Stretch| {
        let c = checkpoints.partition_point(|c| c.start <= r.start);
        c > 0 && r.start < checkpoints[c - 1].end
    };
    let outside: Vec<&Stretch> = runs.iter().filter(|r| !inside(r)).collect();
    let last_end = outside.iter().map(|r| r.end).max()?;
    let active = (last_end - first.start)
        - overlap(checkpoints, first.start, last_end)
        - overlap(idle, first.start, last_end);
    let total: u64 = outside.iter().map(|r| r.bytes).sum();
    let rate = total as f64 / active.max(1) as f64; // bytes per ns
    let stop = checkpoints
        .iter()
        .find(|c| c.start > first.start)
        .map_or(i64::MAX, |c| c.start);
    // Reading before the first checkpoint, in stretches between idle ones;
    // the load is in the first stretch that reads more than a stray file
    // (imports and configs read long before the job starts loading are not).
    let substantial = (LOAD_MIN_EXCESS_RUNS * typical_read as f64) as u64;
    let mut stretches: Vec<std::ops::Range<usize>> = Vec::new();
    let mut from = 0;
    let mut next_idle = 0;
    for (k, r) in runs.iter().enumerate() {
        if r.start >= stop {
            break;
        }
        let mut after_idle = false;
        while next_idle < idle.len() && idle[next_idle].end <= r.start {
            after_idle |= k > from && idle[next_idle].start >= runs[k - 1].end;
            next_idle += 1;
        }
        if after_idle {
            stretches.push(from..k);
            from = k;
        }
        if k + 1 == runs.len() || runs[k + 1].start >= stop {
            stretches.push(from..k + 1);
        }
    }
    let bytes = |s: &std::ops::Range<usize>| runs[s.clone()].iter().map(|r| r.bytes).sum::<u64>();
    let stretch = stretches
        .iter()
        .find(|s| bytes(s) >= substantial)
        .or(stretches.first())?
        .clone();
    let start = runs[stretch.start].start;
    let mut cum = 0u64;
    let mut first_lead = 0.0;
    let mut best = (f64::MIN, stretch.start);
    for k in stretch.clone() {
        cum += runs[k].bytes;
        let lead = cum as f64 - rate * (runs[k].end - start) as f64;
        if k == stretch.start {
            first_lead = lead;
        }
        if lead > best.0 {
            best = (lead, k);
        }
    }
    let last = stretch.end - 1;
    // The quiet stretch right after it, before any more reading or a checkpoint.
    let next_read = runs.get(last + 1).map_or(i64::MAX, |r| r.start);
    let quiet_after = idle
        .iter()
        .find(|i| i.start >= runs[last].end && i.start < stop && i.end <= next_read)
        .map_or(0, |i| i.end - i.start);
    let end_run = if best.0 - first_lead >= LOAD_MIN_EXCESS_RUNS * typical_read as f64 {
        best.1
    } else if quiet_after >= runs[last].end - start {
        // Read ahead, then compute for longer than the reading took.
        last
    } else {
        stretch.start
    };
    Some(Mark {
        kind: PhaseKind::Load,
        start,
        end: runs[end_run].end.min(stop).max(start + 1),
    })
}

/// Marks plus what lies between them (read when something is read there,
/// idle when not), merged by kind, covering `[t0, t1]`.
fn tile(marks: &[Mark], reads: &ReadIndex, t0: i64, t1: i64) -> Vec<Mark> {
    fn push(out: &mut Vec<Mark>, kind: PhaseKind, start: i64, end: i64) {
        if end <= start {
            return;
        }
        match out.last_mut() {
            Some(last) if last.kind == kind => last.end = end,
            _ => out.push(Mark { kind, start, end }),
        }
    }
    let mut out: Vec<Mark> = Vec::new();
    let mut cursor = t0;
    for (i, m) in marks.iter().enumerate() {
        let start = m.start.max(cursor);
        if start > cursor {
            let kind = if reads.any_in(cursor, start) {
                PhaseKind::Read
            } else {
                PhaseKind::Idle
            };
            // The job's first load starts the trace: what comes before it
            // (opening files, a brief setup) is part of loading.
            if i == 0
                && m.kind == PhaseKind::Load
                && kind == PhaseKind::Idle
                && start - cursor < IDLE_MIN_NS
            {
                push(&mut out, PhaseKind::Load, cursor, m.end.max(start));
                cursor = m.end.max(cursor);
                continue;
            }
            push(&mut out, kind, cursor, start);
        }
        push(&mut out, m.kind, start, m.end.min(t1).max(start));
        cursor = cursor.max(m.end.min(t1));
    }
    if t1 > cursor {
        let kind = if reads.any_in(cursor, t1) {
            PhaseKind::Read
        } else {
            PhaseKind::Idle
        };
        push(&mut out, kind, cursor, t1);
    }
    out
}

/// Phases from the tiled spans: each run's bytes go to the phase its first call started in.
fn account(spans: Vec<Mark>, activity: &Activity, t0: i64) -> Vec<Phase> {
    let secs = |ns: i64| (ns - t0) as f64 / 1e9;
    let mut phases: Vec<Phase> = spans
        .iter()
        .map(|m| Phase {
            kind: m.kind,
            start_s: secs(m.start),
            end_s: secs(m.end),
            read_bytes: 0,
            write_bytes: 0,
            max_writers: 0,
            metadata_calls: 0,
            storage_read_bytes: activity.from_storage.as_ref().map(|_| 0),
            start_unix_ns: m.start,
            end_unix_ns: m.end,
        })
        .collect();
    for r in activity.metadata.runs() {
        let i = super::phase_at(&phases, r.start);
        phases[i].metadata_calls += r.bytes;
    }
    for r in activity.reads.runs() {
        let i = super::phase_at(&phases, r.start);
        phases[i].read_bytes += r.bytes;
    }
    for r in activity.from_storage.iter().flat_map(|s| s.runs()) {
        let i = super::phase_at(&phases, r.start);
        if let Some(b) = &mut phases[i].storage_read_bytes {
            *b += r.bytes;
        }
    }
    let mut writers: Vec<Vec<Writer>> = vec![Vec::new(); phases.len()];
    for r in activity.writes.runs() {
        let i = super::phase_at(&phases, r.start);
        phases[i].write_bytes += r.bytes;
        writers[i].extend(r.callers());
    }
    for (p, mut w) in phases.iter_mut().zip(writers) {
        w.sort_unstable();
        w.dedup();
        p.max_writers = w.len() as u32;
    }
    phases
}

#[cfg(test)]
mod tests;
