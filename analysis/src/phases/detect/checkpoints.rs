//! Write bursts that are checkpoints: which writes belong together, which
//! bursts are large enough to be a save, where a save ends (its syncs), and
//! when one long burst is two saves (of the same state, or each into a
//! folder of its own).

use super::*;

/// Write bursts that are checkpoints, with their syncs, in time order.
pub(super) fn checkpoints(
    activity: &Activity,
    reads: &ReadIndex,
    reading_floor: u64,
    t1: i64,
) -> Vec<Mark> {
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
        let small = |r: &Stretch, total: u64| (r.bytes as f64) < total as f64 * EDGE_SHARE;
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
        for (i, r) in reads
            .runs
            .iter()
            .enumerate()
            .skip(reads.first_from(written))
        {
            if r.start >= end {
                break;
            }
            resumed += reads.counted(i);
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
/// same writers write about as much again ([`REPEAT_BYTES_RATIO`]), or one
/// of the burst's writers made a directory in the pause (a save of its own
/// into it). Two saves of one state a few steps apart, with nothing read
/// between, look like one long burst otherwise; a save that pauses between
/// two files of different sizes (a model, then its optimizer state) or waits
/// for a late rank stays whole.
fn split_repeated_saves(
    activity: &Activity,
    writes: &[Stretch],
    a: usize,
    b: usize,
) -> Vec<(usize, usize)> {
    let syncs = activity.syncs.runs();
    let dirs = activity.dirs_made.runs();
    let writers = |(x, y): (usize, usize)| {
        let mut w: Vec<Writer> = writes[x..=y].iter().flat_map(|r| r.callers()).collect();
        w.sort_unstable();
        w.dedup();
        w
    };
    let burst_writers = writers((a, b));
    // A directory made by one of the burst's writers in `(from, to]`.
    let dir_made = |from: i64, to: i64| {
        dirs[dirs.partition_point(|d| d.start <= from)..]
            .iter()
            .take_while(|d| d.start <= to)
            .any(|d| d.callers().any(|w| burst_writers.binary_search(&w).is_ok()))
    };
    // Segments between pauses that come after a sync, and whether each
    // began with a directory made.
    let mut segments: Vec<(usize, usize, bool)> = Vec::new();
    let (mut seg_start, mut seg_end, mut seg_dir) = (a, writes[a].end, false);
    for (i, w) in writes.iter().enumerate().take(b + 1).skip(a + 1) {
        let gap = w.start - seg_end;
        // The first sync not long over when the writes so far ended came
        // before this write.
        let synced = || {
            let k = syncs.partition_point(|s| s.end < seg_end - CHECKPOINT_TAIL_GAP_NS);
            syncs.get(k).is_some_and(|s| s.start < w.start)
        };
        if gap > CHECKPOINT_TAIL_GAP_NS && synced() {
            segments.push((seg_start, i - 1, seg_dir));
            seg_start = i;
            seg_dir = dir_made(seg_end, w.start);
        }
        seg_end = seg_end.max(w.end);
    }
    segments.push((seg_start, b, seg_dir));
    let bytes = |(x, y): (usize, usize)| writes[x..=y].iter().map(|r| r.bytes).sum::<u64>();
    let mut saves: Vec<(usize, usize)> = Vec::new();
    for (x, y, opens_dir) in segments {
        let seg = (x, y);
        if let Some(last) = saves.last_mut() {
            let (before, after) = (bytes(*last) as f64, bytes(seg) as f64);
            let repeated = writers(*last) == writers(seg)
                && after <= before * REPEAT_BYTES_RATIO
                && before <= after * REPEAT_BYTES_RATIO;
            if !repeated && !opens_dir {
                last.1 = seg.1;
                continue;
            }
        }
        saves.push(seg);
    }
    saves
}
