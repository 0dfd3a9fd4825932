//! The rules that turn a trace's [`Activity`] into phases. Every test is
//! relative to the trace itself or to the calls' own timing, so the same
//! rules hold for a 0.2 s synthetic trace, a laptop capture and a 512-GPU job:
//!
//! - **checkpoint**: writes that follow each other (pauses up to
//!   [`CHECKPOINT_GAP_NS`], as long as reading does not resume in between;
//!   writes closer than [`RESUME_GAP_NS`] always belong together) form a
//!   burst; a burst that writes at least [`MIN_CHECKPOINT_BYTES`] and
//!   [`WRITE_SHARE_OF_PEAK`] of the largest burst is a checkpoint (a log line
//!   or a metrics flush is not). It ends when its files are synced (fsync,
//!   close, rename following its writes within [`CHECKPOINT_TAIL_GAP_NS`]).
//!   The same writers writing about as much again after such a sync and a
//!   pause is the next save, however short the pause.
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

use crate::activity::{Activity, Run, Writer};

use super::{Phase, PhaseKind};

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
    runs: &'a [Run],
    cum: Vec<u64>,
}

impl<'a> ReadIndex<'a> {
    fn new(runs: &'a [Run]) -> Self {
        let mut cum = Vec::with_capacity(runs.len() + 1);
        cum.push(0);
        for r in runs {
            cum.push(cum.last().unwrap() + r.bytes);
        }
        ReadIndex { runs, cum }
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
    let typical_read = median(reads.runs.iter().map(|r| r.bytes).collect());
    let reading_floor = ((typical_read as f64 * READING_FLOOR_SHARE) as u64).max(1);

    let checkpoints = checkpoints(activity, &reads, reading_floor, t1);
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

/// Write bursts that are checkpoints, with their syncs, in time order.
fn checkpoints(activity: &Activity, reads: &ReadIndex, reading_floor: u64, t1: i64) -> Vec<Mark> {
    let writes = activity.writes.runs();
    // Bursts as index ranges into `writes`, with the latest end so far.
    let mut bursts: Vec<(usize, usize, i64)> = Vec::new();
    for (i, w) in writes.iter().enumerate() {
        if let Some(b) = bursts.last_mut() {
            let gap = w.start - b.2;
            if gap <= RESUME_GAP_NS
                || (gap <= CHECKPOINT_GAP_NS && reads.bytes_in(b.2, w.start) < reading_floor)
            {
                b.1 = i;
                b.2 = b.2.max(w.end);
                continue;
            }
        }
        bursts.push((i, i, w.end));
    }
    let bursts: Vec<(usize, usize)> = bursts
        .into_iter()
        .flat_map(|(a, b, _)| split_repeated_saves(activity, writes, a, b))
        .collect();
    let bytes = |(a, b): (usize, usize)| writes[a..=b].iter().map(|r| r.bytes).sum::<u64>();
    let peak = bursts.iter().map(|&b| bytes(b)).max().unwrap_or(0);
    let floor = MIN_CHECKPOINT_BYTES.max((peak as f64 * WRITE_SHARE_OF_PEAK) as u64);
    let mut marks: Vec<Mark> = Vec::new();
    for (mut a, mut b) in bursts.into_iter().filter(|&b| bytes(b) >= floor) {
        let mut total = bytes((a, b));
        let small = |r: &Run, total: u64| (r.bytes as f64) < total as f64 * EDGE_SHARE;
        while a < b
            && writes[a + 1].start - writes[a].end > CHECKPOINT_TAIL_GAP_NS
            && small(&writes[a], total)
        {
            total -= writes[a].bytes;
            a += 1;
        }
        while a < b
            && writes[b].start - writes[b - 1].end > CHECKPOINT_TAIL_GAP_NS
            && small(&writes[b], total)
        {
            total -= writes[b].bytes;
            b -= 1;
        }
        let start = writes[a].start;
        let written = writes[a..=b].iter().map(|r| r.end).max().unwrap();
        let mut end = written;
        // Its files are durable when their syncs return...
        let syncs = activity.syncs.runs();
        let mut k = syncs.partition_point(|s| s.start < start);
        while k < syncs.len() && syncs[k].start <= end + CHECKPOINT_TAIL_GAP_NS {
            if reads.bytes_in(end, syncs[k].start) < reading_floor {
                end = end.max(syncs[k].end);
            }
            k += 1;
        }
        // ... but it is over once the job reads again (a sync run can hold
        // the closes of the next step's files too).
        let mut resumed = 0;
        for r in &reads.runs[reads.first_from(written)..] {
            if r.start >= end {
                break;
            }
            resumed += r.bytes;
            if resumed >= reading_floor {
                end = r.start;
                break;
            }
        }
        marks.push(Mark {
            kind: PhaseKind::Checkpoint,
            start,
            end: end.min(t1).max(start + 1),
        });
    }
    // A sync that outlasts the start of the next checkpoint ends there.
    for i in 1..marks.len() {
        let next = marks[i].start;
        let prev = &mut marks[i - 1];
        prev.end = prev.end.min(next).max(prev.start + 1);
    }
    marks
}

/// Splits one write burst (`writes[a..=b]`) where the job saved again: after
/// a pause longer than [`CHECKPOINT_TAIL_GAP_NS`] that follows a sync
/// (close, fsync, rename: the files of the save so far were finished), the
/// same writers write about as much again ([`REPEAT_BYTES_RATIO`]). Two
/// saves of one state a few steps apart, with nothing read between, look
/// like one long burst otherwise; a save that pauses between two files of
/// different sizes (a model, then its optimizer state) or waits for a late
/// rank stays whole.
fn split_repeated_saves(
    activity: &Activity,
    writes: &[Run],
    a: usize,
    b: usize,
) -> Vec<(usize, usize)> {
    let syncs = activity.syncs.runs();
    // Segments between pauses that come after a sync.
    let mut segments: Vec<(usize, usize)> = Vec::new();
    let (mut seg_start, mut seg_end) = (a, writes[a].end);
    for (i, w) in writes.iter().enumerate().take(b + 1).skip(a + 1) {
        let gap = w.start - seg_end;
        // The first sync not long over when the writes so far ended came
        // before this write.
        let synced = || {
            let k = syncs.partition_point(|s| s.end < seg_end - CHECKPOINT_TAIL_GAP_NS);
            syncs.get(k).is_some_and(|s| s.start < w.start)
        };
        if gap > CHECKPOINT_TAIL_GAP_NS && synced() {
            segments.push((seg_start, i - 1));
            seg_start = i;
        }
        seg_end = seg_end.max(w.end);
    }
    segments.push((seg_start, b));
    let writers = |(x, y): (usize, usize)| {
        let mut w: Vec<Writer> = writes[x..=y]
            .iter()
            .flat_map(|r| r.writers.iter().copied())
            .collect();
        w.sort_unstable();
        w.dedup();
        w
    };
    let bytes = |(x, y): (usize, usize)| writes[x..=y].iter().map(|r| r.bytes).sum::<u64>();
    let mut saves: Vec<(usize, usize)> = Vec::new();
    for seg in segments {
        if let Some(last) = saves.last_mut() {
            let (before, after) = (bytes(*last) as f64, bytes(seg) as f64);
            let repeated = writers(*last) == writers(seg)
                && after <= before * REPEAT_BYTES_RATIO
                && before <= after * REPEAT_BYTES_RATIO;
            if !repeated {
                last.1 = seg.1;
                continue;
            }
        }
        saves.push(seg);
    }
    saves
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
    let inside = |r: &Run| {
        let c = checkpoints.partition_point(|c| c.start <= r.start);
        c > 0 && r.start < checkpoints[c - 1].end
    };
    let outside: Vec<&Run> = runs.iter().filter(|r| !inside(r)).collect();
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
    let mut writers: Vec<Vec<Writer>> = vec![Vec::new(); phases.len()];
    for r in activity.writes.runs() {
        let i = super::phase_at(&phases, r.start);
        phases[i].write_bytes += r.bytes;
        writers[i].extend_from_slice(&r.writers);
    }
    for (p, mut w) in phases.iter_mut().zip(writers) {
        w.sort_unstable();
        w.dedup();
        p.max_writers = w.len() as u32;
    }
    phases
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::writer_of;
    use iorepro_format::schema::Op;

    const MS: i64 = 1_000_000;
    const MIB: i64 = 1 << 20;

    fn kinds(p: &[Phase]) -> Vec<&'static str> {
        p.iter().map(|p| p.kind.as_str()).collect()
    }

    fn detect_calls(calls: &[(i64, i64, Op, i64, i32)]) -> Vec<Phase> {
        let mut a = Activity::default();
        for &(ts, dur, op, ret, rank) in calls {
            a.observe(ts, dur, op, ret, writer_of(Some(rank), 1));
        }
        a.finish();
        detect(&a)
    }

    /// A job of `steps` steps of `per_step` bytes every `step` ns, with a
    /// burst of `burst` bytes first and a checkpoint every `every` steps.
    fn job(
        burst: i64,
        per_step: i64,
        steps: i64,
        step: i64,
        every: i64,
    ) -> Vec<(i64, i64, Op, i64, i32)> {
        let mut c = Vec::new();
        let mut t = 0;
        for _ in 0..burst / MIB {
            c.push((t, MS / 4, Op::Read, MIB, 0));
            t += MS / 2;
        }
        for s in 1..=steps {
            t += step;
            c.push((t, MS / 4, Op::Read, per_step, 0));
            if s % every == 0 {
                for r in 0..2 {
                    for k in 0..4 {
                        c.push((t + MS + k * MS / 2, MS / 4, Op::Write, 2 * MIB, r));
                    }
                }
                c.push((t + 4 * MS, 10 * MS, Op::Fsync, 0, 0));
                t += 20 * MS;
            }
        }
        c.sort_by_key(|c| c.0);
        c
    }

    #[test]
    fn finds_load_steady_reading_and_each_checkpoint() {
        let p = detect_calls(&job(32 * MIB, MIB, 12, 30 * MS, 4));
        assert_eq!(
            kinds(&p),
            [
                "load",
                "read",
                "checkpoint",
                "read",
                "checkpoint",
                "read",
                "checkpoint"
            ]
        );
        for c in p.iter().filter(|p| p.kind == PhaseKind::Checkpoint) {
            assert_eq!(c.write_bytes, 16 * MIB as u64);
            assert_eq!(c.max_writers, 2);
            // From the first write (1 ms into the step) to the fsync's end (14 ms).
            assert_eq!(c.end_unix_ns - c.start_unix_ns, 13 * MS, "{c:?}");
        }
        assert_eq!(p[0].read_bytes, 32 * MIB as u64, "{:?}", p[0]);
        for w in p.windows(2) {
            assert_eq!(w[0].end_unix_ns, w[1].start_unix_ns);
        }
    }

    #[test]
    fn a_job_reading_at_one_pace_loads_its_first_batch() {
        let p = detect_calls(&job(0, 2 * MIB, 40, 20 * MS, 10));
        assert_eq!(kinds(&p)[..2], ["load", "read"]);
        assert_eq!(p[0].read_bytes, 2 * MIB as u64);
        assert_eq!(
            p.iter().filter(|p| p.kind == PhaseKind::Checkpoint).count(),
            4
        );
    }

    #[test]
    fn an_epoch_read_ahead_then_compute_is_load_then_idle() {
        // The loader reads a whole epoch ahead at once, the job computes for
        // over a second, then the next epoch is read as the steps need it.
        let mut c = Vec::new();
        for i in 0..40 {
            c.push((i * 2 * MS, MS, Op::Read, MIB / 2, 0));
        }
        for i in 0..40 {
            c.push((1_500 * MS + i * 25 * MS, MS, Op::Read, MIB / 2, 0));
        }
        let p = detect_calls(&c);
        assert_eq!(kinds(&p), ["load", "idle", "read"]);
        assert_eq!(p[0].read_bytes, 20 * MIB as u64);
    }

    #[test]
    fn a_walk_of_the_dataset_before_loading_is_metadata() {
        // 2,000 stats and listings over 200 ms (a dataset walk), then the
        // job loads and reads; a job reading small files (open, stat, read
        // 256 KiB, close each) stays a read phase.
        let mut c = Vec::new();
        for i in 0..2_000 {
            let op = if i % 10 == 0 { Op::Getdents } else { Op::Stat };
            c.push((i * MS / 10, 20_000, op, 0, 0));
        }
        let t = 300 * MS;
        for i in 0..200 {
            let at = t + i * 5 * MS;
            c.push((at, 10_000, Op::Open, 3, 0));
            c.push((at + 20_000, 10_000, Op::Stat, 0, 0));
            c.push((at + 40_000, 100_000, Op::Read, MIB / 4, 0));
            c.push((at + 150_000, 10_000, Op::Close, 0, 0));
        }
        let p = detect_calls(&c);
        assert_eq!(kinds(&p)[0], "metadata", "{p:?}");
        assert!(
            p[1..].iter().all(|p| p.kind != PhaseKind::Metadata),
            "{p:?}"
        );
        assert_eq!(p[0].metadata_calls, 2_000);
        assert_eq!(p[0].read_bytes, 0);
        let rate = p[0].metadata_calls_per_s();
        assert!((9_000.0..=10_100.0).contains(&rate), "{rate}");
    }

    #[test]
    fn small_writes_are_not_checkpoints() {
        let mut c = vec![(0, MS, Op::Read, MIB, 0)];
        for i in 1..100 {
            c.push((i * 20 * MS, MS, Op::Read, MIB, 0));
            c.push((i * 20 * MS + 5 * MS, 10_000, Op::Write, 4096, 0));
        }
        let p = detect_calls(&c);
        assert!(p.iter().all(|p| p.kind != PhaseKind::Checkpoint), "{p:?}");
    }

    #[test]
    fn two_saves_of_the_same_state_close_together_are_two_checkpoints() {
        // Two ranks save the same state twice, 180 ms apart (a few steps of
        // compute, nothing read between), each save's files closed at its end.
        let mut c = vec![(0, MS, Op::Read, 4 * MIB, 0)];
        for save in 0..2 {
            let t = 50 * MS + save * 180 * MS;
            for r in 0..2 {
                for k in 0..4 {
                    c.push((t + k * MS, MS / 2, Op::Write, MIB, r));
                }
                c.push((t + 6 * MS, 10_000, Op::Close, 0, r));
            }
        }
        let p = detect_calls(&c);
        let n = p.iter().filter(|p| p.kind == PhaseKind::Checkpoint).count();
        assert_eq!(n, 2, "{:?}", kinds(&p));
    }

    #[test]
    fn a_model_then_its_optimizer_state_is_one_checkpoint() {
        // One writer, a pause between two files of different sizes.
        let mut c = vec![(0, MS, Op::Read, 4 * MIB, 0)];
        for k in 0..4 {
            c.push((50 * MS + k * MS, MS / 2, Op::Write, MIB, 0));
        }
        c.push((56 * MS, 10_000, Op::Close, 0, 0));
        for k in 0..8 {
            c.push((250 * MS + k * MS, MS / 2, Op::Write, MIB, 0));
        }
        c.push((260 * MS, 10_000, Op::Close, 0, 0));
        let p = detect_calls(&c);
        let n = p.iter().filter(|p| p.kind == PhaseKind::Checkpoint).count();
        assert_eq!(n, 1, "{:?}", kinds(&p));
    }

    #[test]
    fn back_to_back_checkpoints_without_reading_are_split_by_idle() {
        // Two saves 100 ms apart with nothing read between: the short trace
        // of a replay test; each is found, the stretch between is idle.
        let mut c = vec![(0, MS, Op::Read, 4 * MIB, 0)];
        for save in 0..2 {
            let t = 50 * MS + save * 600 * MS;
            for k in 0..4 {
                c.push((t + k * MS, MS / 2, Op::Write, MIB, 0));
            }
        }
        let p = detect_calls(&c);
        assert_eq!(
            kinds(&p),
            ["load", "idle", "checkpoint", "idle", "checkpoint"]
        );
    }
}
