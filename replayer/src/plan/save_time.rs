//! What of a checkpoint's traced time the storage's speed does not change:
//! the time before its first write, the work between its writes, and the
//! write calls that only copied bytes into the page cache for a flush to
//! send. The survey measures each save once, from the trace's runs of
//! writes, syncs and flushes; the scaling model keeps these times as they
//! were when it times a save on faster or slower storage.

use iorepro_analysis::activity::Stretch;
use iorepro_analysis::phases::{Phase, PhaseKind};

/// What of a checkpoint's traced time the storage's speed does not change.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SaveTime {
    /// Seconds from its start to its first write (a save that serialises
    /// its state in memory first, see [`iorepro_analysis::phases::begin_saves_where_named`]).
    pub lead_s: f64,
    /// Seconds from its first write to its end in which no traced rank
    /// wrote or synced (planning, serialising a shard, the ranks'
    /// collectives between writes).
    pub work_s: f64,
    /// Seconds its write calls took before an fsync or fdatasync that waited
    /// on the storage: writes into the page cache, flushed by that call, so
    /// the calls themselves were the caller copying its bytes into memory
    /// (0 where no flush waited: direct writes, or writes the cache kept).
    pub copy_s: f64,
}

/// Per phase, its [`SaveTime`] (the default for a phase that is no save,
/// or a save without writes): a save's time before its writes ends, and
/// its work between them begins, at its first write.
pub fn per_phase(
    phases: &[Phase],
    writes: &[Stretch],
    syncs: &[Stretch],
    flushes: &[Stretch],
) -> Vec<SaveTime> {
    phases
        .iter()
        .map(|p| {
            let first = writes
                .get(writes.partition_point(|w| w.start < p.start_unix_ns))
                .filter(|w| p.kind == PhaseKind::Checkpoint && p.holds(w.start));
            let Some(w) = first else {
                return SaveTime::default();
            };
            let within = (w.start, p.end_unix_ns);
            SaveTime::of(p.start_unix_ns, within, writes, syncs, flushes)
        })
        .collect()
}

/// The runs of one kind (in time order and apart, as
/// [`iorepro_analysis::activity::Activity`] keeps them) that reach into
/// `within`: a save's look at the writes and syncs costs its own few runs,
/// not every run of the trace.
fn reaching(runs: &[Stretch], within: (i64, i64)) -> &[Stretch] {
    let end = runs.partition_point(|r| r.start < within.1);
    let mut begin = runs[..end].partition_point(|r| r.start < within.0);
    // The one run begun before the window may still be going on in it.
    while begin > 0 && runs[begin - 1].end > within.0 {
        begin -= 1;
    }
    &runs[begin..end]
}

impl SaveTime {
    /// The save that began at `start` and runs `within` its first write and
    /// its end, from the trace's runs of writes, of syncs (fsync,
    /// fdatasync, close, rename) and of flushes (fsync, fdatasync).
    fn of(
        start: i64,
        within: (i64, i64),
        writes: &[Stretch],
        syncs: &[Stretch],
        flushes: &[Stretch],
    ) -> SaveTime {
        let span = |runs: &[Stretch]| -> Vec<(i64, i64)> {
            reaching(runs, within)
                .iter()
                .map(|r| (r.start, r.end))
                .collect()
        };
        let (written, synced) = (span(writes), span(syncs));
        let busy: Vec<(i64, i64)> = written.iter().chain(&synced).copied().collect();
        // The writes before the save's last flush that waited.
        let copied = span(flushes)
            .iter()
            .filter(|(a, b)| b - a >= FLUSH_WAITED_NS)
            .map(|&(a, _)| a)
            .max()
            .map_or(0, |flush| {
                covered_ns((within.0, flush.min(within.1)), &written)
            });
        SaveTime {
            lead_s: (within.0 - start) as f64 / 1e9,
            work_s: (within.1 - within.0 - covered_ns(within, &busy)).max(0) as f64 / 1e9,
            copy_s: copied as f64 / 1e9,
        }
    }
}

/// An fsync that lasts this long waited on the storage for data the page
/// cache held; one after direct writes returns in microseconds. A close or
/// a rename is no flush here: one that takes long on a local file system
/// is freeing or journalling, not writing the save's bytes out.
const FLUSH_WAITED_NS: i64 = 1_000_000;

/// Of the stretch `within`, the time the stretches `spans` (of any rank,
/// overlapping or not) cover.
fn covered_ns(within: (i64, i64), spans: &[(i64, i64)]) -> i64 {
    let mut busy: Vec<(i64, i64)> = spans
        .iter()
        .map(|&(a, b)| (a.max(within.0), b.min(within.1)))
        .filter(|(a, b)| a < b)
        .collect();
    busy.sort_unstable();
    let mut covered = 0;
    let mut reach = within.0;
    for (a, b) in busy {
        if b > reach {
            covered += b - a.max(reach);
            reach = b;
        }
    }
    covered
}

#[cfg(test)]
mod tests {
    use super::{covered_ns, reaching, SaveTime};
    use iorepro_analysis::activity::Stretch;

    #[test]
    fn the_time_covered_counts_overlaps_once_and_only_within() {
        // From 100 to 200: two ranks' writes overlap (110-140 and
        // 120-150), a sync runs past the end (190-260), one write comes
        // before it (50-105).
        let storage = [(110, 140), (120, 150), (190, 260), (50, 105)];
        assert_eq!(covered_ns((100, 200), &storage), 5 + 40 + 10);
        assert_eq!(covered_ns((100, 200), &[]), 0);
        assert_eq!(covered_ns((100, 200), &[(0, 300)]), 100);
    }

    #[test]
    fn write_calls_a_waiting_flush_took_out_were_copies_into_memory() {
        const MS: i64 = 1_000_000;
        let run = |start: i64, end: i64| Stretch {
            start: start * MS,
            end: end * MS,
            bytes: 1,
            who: vec![(0, 1)],
            crowded: false,
        };
        // Serialised for 50 ms, written into the page cache for 100 ms
        // (two runs, 10 ms of work between them), then an fsync of 800 ms.
        let writes = [run(50, 100), run(110, 160)];
        let fsync = [run(160, 960)];
        let buffered = SaveTime::of(0, (50 * MS, 960 * MS), &writes, &fsync, &fsync);
        assert_eq!(
            buffered,
            SaveTime {
                lead_s: 0.05,
                work_s: 0.01,
                copy_s: 0.1
            }
        );
        // Direct writes take the storage's time; the fsync after them
        // returns at once, and nothing counts as copied.
        let at_once = [run(960, 960)];
        let direct = SaveTime::of(0, (50 * MS, 960 * MS), &[run(50, 960)], &at_once, &at_once);
        assert_eq!(direct.copy_s, 0.0);
        // A slow close flushes nothing.
        let close = [run(160, 175)];
        let unflushed = SaveTime::of(0, (50 * MS, 175 * MS), &writes, &close, &[]);
        assert_eq!(unflushed.copy_s, 0.0);
        // Writes after the last waiting flush were not flushed by it.
        let flushes = [run(100, 110), run(160, 160)];
        let late = SaveTime::of(0, (50 * MS, 160 * MS), &writes, &flushes, &flushes);
        assert_eq!(late.copy_s, 0.05);
    }

    #[test]
    fn a_save_looks_only_at_the_runs_that_reach_into_it() {
        let run = |start, end| Stretch {
            start,
            end,
            bytes: 0,
            who: Vec::new(),
            crowded: false,
        };
        let runs = [
            run(0, 10),
            run(20, 110),
            run(120, 130),
            run(190, 260),
            run(300, 310),
        ];
        let starts: Vec<i64> = reaching(&runs, (100, 200))
            .iter()
            .map(|r| r.start)
            .collect();
        assert_eq!(starts, vec![20, 120, 190]);
        assert!(reaching(&runs, (11, 19)).is_empty());
        assert!(reaching(&[], (0, 1)).is_empty());
    }
}
