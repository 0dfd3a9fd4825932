//! A data loader's rhythm in its visits of the dataset's files: each loader
//! worker (or the training loop itself, without workers) reads a batch's
//! files back to back and then waits until the loop takes a batch, so its
//! visits come in bursts of one batch; the rank's bursts, all its readers
//! together, come one training step apart.
//!
//! Bursts are told apart by the gaps between visits: the gaps inside a
//! batch (a file's read) and those between batches (a step) differ by a
//! large factor; the split is at the largest such factor among the sorted
//! gaps, where enough gaps lie above it to be the steps.

use std::collections::{BTreeMap, BTreeSet};

use super::observe::Visit;

/// The smallest factor between the gaps inside a batch and those between
/// batches that counts as a rhythm at all.
const RHYTHM_FACTOR: f64 = 4.0;

/// Gaps shorter than this are taken as this (a clock's step, 1 µs), so
/// that ratios stay finite.
const SHORTEST_GAP_NS: i64 = 1_000;

/// The loader's rhythm, where one was found.
#[derive(Debug, Clone, PartialEq)]
pub struct Rhythm {
    /// Files read per batch, per reader: the most common burst's size.
    pub batch_files: u64,
    /// How many bursts that count is taken from.
    pub bursts: usize,
    /// Per rank, the readers of its files besides its first process (its
    /// loader's workers), at most over the ranks; 0 where the training loop
    /// read alone. `threads`: the readers are threads of one process.
    pub workers: u64,
    pub threads: bool,
    /// A rank's time from one batch to the next in steady state, the median
    /// over its steps (seconds): its compute and the framework's own time
    /// per step, where the loader kept up.
    pub step_s: Option<f64>,
}

/// The split between the gaps inside a burst and those between bursts, or
/// `None` where the gaps show no rhythm (each visit its own burst).
///
/// The gaps are two groups on a log scale (a file's read; a step's wait),
/// but not cleanly: a loader that reads ahead at an epoch's start takes its
/// next batch at once. So the split is the one that best separates the
/// logs of the gaps (Otsu's: the largest variance between the two groups),
/// taken where the groups' typical gaps differ by [`RHYTHM_FACTOR`] or more
/// and enough gaps lie above it to be the steps.
pub fn split_ns(gaps: &[i64]) -> Option<i64> {
    let mut g: Vec<f64> = gaps
        .iter()
        .map(|&x| (x.max(SHORTEST_GAP_NS) as f64).ln())
        .collect();
    g.sort_unstable_by(f64::total_cmp);
    let n = g.len();
    // The gaps between bursts: at least two, and at least one in a
    // hundred (a batch of up to a hundred files).
    let fewest_above = (n / 100).max(2);
    let total: f64 = g.iter().sum();
    let mut below = 0.0;
    let mut best: Option<(f64, usize)> = None;
    for i in 1..n {
        below += g[i - 1];
        let above_n = n - i;
        if above_n < fewest_above {
            break;
        }
        let (m0, m1) = (below / i as f64, (total - below) / above_n as f64);
        if m1 - m0 < RHYTHM_FACTOR.ln() || g[i] == g[i - 1] {
            continue;
        }
        let between = (i as f64) * (above_n as f64) * (m1 - m0).powi(2);
        if best.is_none_or(|(b, _)| between > b) {
            best = Some((between, i));
        }
    }
    best.map(|(_, i)| ((g[i - 1] + g[i]) / 2.0).exp() as i64)
}

/// The bursts of sorted times `ts`: their sizes and start times.
fn bursts(ts: &[i64], split: i64) -> Vec<(u64, i64)> {
    let mut out: Vec<(u64, i64)> = Vec::new();
    let mut last = None;
    for &t in ts {
        match (last, out.last_mut()) {
            (Some(l), Some(b)) if t - l <= split => b.0 += 1,
            _ => out.push((1, t)),
        }
        last = Some(t);
    }
    out
}

/// Who the training loop of each rank is, for telling its loader's workers.
pub struct Family<'a> {
    /// Each rank's processes (every pid with a row of it).
    pub processes: &'a BTreeMap<i32, BTreeSet<i32>>,
    /// Each process's parent, where the capture recorded forks.
    pub parents: &'a BTreeMap<i32, i32>,
    /// Each rank's first process (its earliest row): the training loop
    /// where no fork was recorded.
    pub first_process: &'a BTreeMap<i32, (i64, i32)>,
}

/// The rhythm of `visits` (sorted by time).
pub fn rhythm(visits: &[Visit], family: &Family) -> Option<Rhythm> {
    let mut by_reader: BTreeMap<(i32, i32, i32), Vec<i64>> = BTreeMap::new();
    let mut by_rank: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for v in visits {
        by_reader
            .entry((v.rank, v.pid, v.tid))
            .or_default()
            .push(v.ts);
        by_rank.entry(v.rank).or_default().push(v.ts);
    }
    let gaps: Vec<i64> = by_reader
        .values()
        .flat_map(|ts| ts.windows(2).map(|w| w[1] - w[0]))
        .collect();
    if gaps.is_empty() {
        return None;
    }
    let split = split_ns(&gaps);
    // Burst sizes over every reader; without a rhythm each visit is one.
    let mut sizes: BTreeMap<u64, usize> = BTreeMap::new();
    for ts in by_reader.values() {
        for (n, _) in bursts(ts, split.unwrap_or(-1)) {
            *sizes.entry(n).or_default() += 1;
        }
    }
    let (batch_files, bursts_seen) = sizes
        .iter()
        .max_by_key(|(n, count)| (**count, **n))
        .map(|(n, c)| (*n, *c))?;
    let (workers, threads) = workers(visits, family);
    let step_s = step_s(&by_rank, split.unwrap_or(-1));
    Some(Rhythm {
        batch_files,
        bursts: bursts_seen,
        workers,
        threads,
        step_s,
    })
}

/// The readers of each rank's files besides its training loop, at most
/// over the ranks, and whether they are threads of one process.
///
/// Where the capture recorded forks, a reader is a worker when its parent
/// made rows of its rank (the training loop) or forked another reader of it
/// (a loop that made no row in a trace scoped to the data). Elsewhere a
/// lone reader is the loop where it is the rank's first process or its
/// only one, and of several readers each is a worker but a first process
/// that read far less than the others (a loop that looked at a few files).
fn workers(visits: &[Visit], family: &Family) -> (u64, bool) {
    let mut pids: BTreeMap<i32, BTreeMap<i32, u64>> = BTreeMap::new();
    let mut tids: BTreeMap<i32, BTreeSet<(i32, i32)>> = BTreeMap::new();
    for v in visits {
        *pids.entry(v.rank).or_default().entry(v.pid).or_default() += 1;
        tids.entry(v.rank).or_default().insert((v.pid, v.tid));
    }
    let mut most = (0u64, false);
    for (rank, p) in &pids {
        let own = family.processes.get(rank);
        let forked = if family.parents.is_empty() {
            let main = family.first_process.get(rank).map(|&(_, pid)| pid);
            let mean = p.values().sum::<u64>() as f64 / p.len() as f64;
            match p.len() {
                1 => {
                    let only = *p.keys().next().expect("one reader");
                    let alone = own.is_none_or(|o| o.len() == 1);
                    u64::from(Some(only) != main && !alone)
                }
                _ => p
                    .iter()
                    .filter(|&(pid, n)| !(Some(*pid) == main && (*n as f64) < 0.25 * mean))
                    .count() as u64,
            }
        } else {
            let parent = |pid: &i32| family.parents.get(pid).copied();
            p.keys()
                .filter(|pid| {
                    parent(pid).is_some_and(|pp| {
                        own.is_some_and(|o| o.contains(&pp))
                            || p.keys().any(|q| q != *pid && parent(q) == Some(pp))
                    })
                })
                .count() as u64
        };
        let n = if forked > 0 {
            (forked, false)
        } else {
            // One process: its reading threads, other than its first.
            let t = tids[rank].len() as u64;
            if t > 1 {
                (t, true)
            } else {
                (0, false)
            }
        };
        most = most.max(n);
    }
    most
}

/// The median time between the starts of a rank's batches (each visit one
/// where no rhythm was found), over every rank's steps, leaving out the long gaps where the ranks did something
/// else (an evaluation, a save, an epoch's end: more than three times the
/// median).
fn step_s(by_rank: &BTreeMap<i32, Vec<i64>>, split: i64) -> Option<f64> {
    let mut steps: Vec<i64> = Vec::new();
    for ts in by_rank.values() {
        let b = bursts(ts, split);
        steps.extend(b.windows(2).map(|w| w[1].1 - w[0].1));
    }
    if steps.is_empty() {
        return None;
    }
    steps.sort_unstable();
    let median = steps[steps.len() / 2];
    let steady: Vec<i64> = steps.into_iter().filter(|&s| s <= 3 * median).collect();
    Some(steady[steady.len() / 2] as f64 / 1e9)
}

/// A rank's time a step from its epochs: from one epoch's first visit to
/// the next's, less the saves in between (`saves`: their spans, ns), over
/// the epoch's steps (`steps_per_epoch`), the median over the epochs;
/// `None` with fewer than two epochs. `visits` sorted by time, `files` the
/// dataset's.
///
/// It holds where the batches' rhythm does not: a loader that reads a whole
/// epoch ahead at its start shows no step in its visits.
pub fn step_from_epochs(
    visits: &[Visit],
    files: u64,
    steps_per_epoch: u64,
    saves: &[(i64, i64)],
) -> Option<f64> {
    let files = usize::try_from(files).ok().filter(|f| *f > 0)?;
    if steps_per_epoch == 0 {
        return None;
    }
    let starts: Vec<i64> = visits.iter().step_by(files).map(|v| v.ts).collect();
    let mut per_step: Vec<f64> = starts
        .windows(2)
        .map(|w| {
            let saving: i64 = saves
                .iter()
                .map(|&(a, b)| (b.min(w[1]) - a.max(w[0])).max(0))
                .sum();
            (w[1] - w[0] - saving).max(0) as f64 / 1e9 / steps_per_epoch as f64
        })
        .collect();
    // The last start is a whole epoch's only where the visits fill it.
    if !visits.len().is_multiple_of(files) {
        per_step.pop();
    }
    if per_step.is_empty() {
        return None;
    }
    per_step.sort_by(f64::total_cmp);
    Some(per_step[per_step.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;
    const SEC: i64 = 1_000_000_000;

    /// Visits of `readers` per rank, each reading `batch` files 1 ms apart
    /// every `step` ms in turn, for `steps` steps per rank.
    fn loader(ranks: i32, readers: i32, batch: i64, step: i64, steps: i64) -> Vec<Visit> {
        let mut v = Vec::new();
        for rank in 0..ranks {
            for s in 0..steps {
                let pid = 100 + rank * 10 + 1 + (s % readers as i64) as i32;
                for f in 0..batch {
                    v.push(Visit {
                        ts: s * step * MS + f * MS + rank as i64,
                        rank,
                        pid,
                        tid: pid,
                        file: 0,
                    });
                }
            }
        }
        v.sort_unstable();
        v
    }

    /// Each rank's loop is pid 100 + 10 rank; its workers the pids after
    /// it. `forks`: whether the capture recorded who forked them.
    struct Fam {
        processes: BTreeMap<i32, BTreeSet<i32>>,
        parents: BTreeMap<i32, i32>,
        first: BTreeMap<i32, (i64, i32)>,
    }

    fn fam(ranks: i32, forks: bool) -> Fam {
        let mut f = Fam {
            processes: BTreeMap::new(),
            parents: BTreeMap::new(),
            first: (0..ranks).map(|r| (r, (0, 100 + r * 10))).collect(),
        };
        for r in 0..ranks {
            // A scoped trace: the loop itself made no row.
            f.processes
                .insert(r, (1..10).map(|i| 100 + r * 10 + i).collect());
            if forks {
                for i in 1..10 {
                    f.parents.insert(100 + r * 10 + i, 100 + r * 10);
                }
            }
        }
        f
    }

    fn family(f: &Fam) -> Family<'_> {
        Family {
            processes: &f.processes,
            parents: &f.parents,
            first_process: &f.first,
        }
    }

    #[test]
    fn batches_workers_and_steps_are_told() {
        for ((batch, readers), forks) in [(2, 2), (4, 4), (1, 2), (16, 3)]
            .into_iter()
            .zip([true, false, true, false])
        {
            let v = loader(2, readers, batch, 60, 48);
            let f = fam(2, forks);
            let r = rhythm(&v, &family(&f)).unwrap();
            assert_eq!(
                r.batch_files, batch as u64,
                "batch {batch}, {readers} readers"
            );
            assert_eq!(r.workers, readers as u64);
            assert!(!r.threads);
            let step = r.step_s.unwrap();
            assert!((step - 0.060).abs() < 0.002, "step {step}");
        }
    }

    #[test]
    fn a_loop_that_reads_itself_has_no_workers() {
        let mut v = loader(1, 1, 2, 50, 20);
        for x in &mut v {
            x.pid = 100;
            x.tid = 100;
        }
        let f = fam(1, true);
        let r = rhythm(&v, &family(&f)).unwrap();
        assert_eq!((r.batch_files, r.workers), (2, 0));
    }

    #[test]
    fn no_rhythm_no_split() {
        let gaps: Vec<i64> = (0..50).map(|i| (10 + i % 3) * MS).collect();
        assert_eq!(split_ns(&gaps), None);
        let mut two: Vec<i64> = vec![MS; 30];
        two.extend([100 * MS; 30]);
        let s = split_ns(&two).unwrap();
        assert!(MS < s && s < 100 * MS);
    }

    #[test]
    fn a_loader_that_reads_each_epoch_at_once_still_tells_its_steps() {
        // 3 epochs of 8 files, all read at each epoch's start; 4 steps of
        // 0.5 s an epoch, then a save of 1 s at the epoch's end.
        let mut visits = Vec::new();
        let mut saves = Vec::new();
        for e in 0..3i64 {
            let start = e * 3 * SEC;
            for f in 0..8 {
                visits.push(Visit {
                    ts: start + f * MS,
                    rank: 0,
                    pid: 1,
                    tid: 2,
                    file: f as u32,
                });
            }
            saves.push((start + 2 * SEC, start + 3 * SEC));
        }
        let step = step_from_epochs(&visits, 8, 4, &saves).unwrap();
        assert!((step - 0.5).abs() < 1e-9, "{step}");
        assert_eq!(step_from_epochs(&visits[..8], 8, 4, &saves), None);
    }
}
