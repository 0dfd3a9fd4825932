//! Whether the traced ranks met at their saves. A job whose ranks meet
//! around a save (DLIO's barriers, a data-parallel job's next all-reduce,
//! a collective checkpoint every rank writes a shard of) stops reading
//! while the save is made: its readers wait for the writer, and their reads
//! resume a save's time later than their pace says. A job whose writer
//! saves while the others go on (a rank-0 save without a barrier, a save in
//! the background) reads through it at its pace. The replay's ranks meet at
//! the start and end of a save only where the trace shows the traced ranks
//! did: a meeting the job never had adds the save's time to every reader,
//! and leaving out one it had lets readers run ahead of the writer.
//!
//! The evidence is each reading rank's pause around each save some rank
//! did not write in: the gap in its reads around the save's middle, against
//! its usual gap at points spread over the read phases. A rank that waited
//! pauses its usual gap and most of the save more; one that read on pauses
//! as usual, which a save shorter than a step shows as well as a long one.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};

use iorepro_analysis::activity::{Runs, Writer};
use iorepro_analysis::phases::{Phase, PhaseKind};
use serde::Serialize;

/// Reads closer than this are one stretch of a rank's reading.
const JOIN_NS: i64 = 1_000_000;
/// Ranks whose reads are kept for the judgement: enough to judge by, and a
/// bound on the memory of a trace of thousands of ranks.
const RANKS_KEPT: usize = 64;
/// Stretches kept in all (16 bytes each): a long trace's ranks each read
/// once a step, so past this the ranks kept are halved (the higher-numbered
/// half dropped) until they fit, and fewer ranks judge instead of memory
/// growing with the trace. 2 Mi stretches (32 MiB) are 32,768 steps of 64
/// ranks; a 12-hour capture of 200,000 steps is judged by its first 8.
const STRETCHES_KEPT: usize = 1 << 21;
/// Points per read phase at which a rank's usual gap is taken.
const POINTS_PER_PHASE: i64 = 16;
/// A rank waited at a save when its pause there is its usual gap and at
/// least this share of the save longer.
const WAIT_SHARE: f64 = 0.5;

/// When each of the first [`RANKS_KEPT`] ranks read: its stretches of
/// reading (calls closer than [`JOIN_NS`] joined), one per step for a job
/// that reads in bursts, one in all for a rank that reads without a pause;
/// at most [`STRETCHES_KEPT`] stretches in all.
#[derive(Debug)]
pub struct ReadTimes {
    ranks: HashMap<i32, (Vec<(i64, i64)>, bool)>,
    /// Ranks that may be kept: [`RANKS_KEPT`], halved each time the
    /// stretches pass `budget`.
    room: usize,
    stretches: usize,
    budget: usize,
}

impl Default for ReadTimes {
    fn default() -> Self {
        ReadTimes::with_budget(STRETCHES_KEPT)
    }
}

impl ReadTimes {
    fn with_budget(budget: usize) -> Self {
        ReadTimes {
            ranks: HashMap::new(),
            room: RANKS_KEPT,
            stretches: 0,
            budget,
        }
    }

    /// A read by `rank` from `start` to `end` (Unix ns).
    pub fn observe(&mut self, rank: i32, start: i64, end: i64) {
        let kept = self.ranks.len();
        let (runs, sorted) = match self.ranks.entry(rank) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(_) if kept >= self.room => return,
            Entry::Vacant(e) => e.insert((Vec::new(), true)),
        };
        match runs.last_mut() {
            Some(last) if start >= last.0 && start <= last.1 + JOIN_NS => last.1 = last.1.max(end),
            Some(last) => {
                *sorted &= start >= last.0;
                runs.push((start, end));
                self.stretches += 1;
            }
            None => {
                runs.push((start, end));
                self.stretches += 1;
            }
        }
        while self.stretches > self.budget && self.ranks.len() > 1 {
            self.keep_lower_half();
        }
    }

    /// Drops the higher-numbered half of the kept ranks, for good.
    fn keep_lower_half(&mut self) {
        let mut ranks: Vec<i32> = self.ranks.keys().copied().collect();
        ranks.sort_unstable();
        self.room = ranks.len().div_ceil(2);
        for r in &ranks[self.room..] {
            self.ranks.remove(r);
        }
        self.stretches = self.ranks.values().map(|(runs, _)| runs.len()).sum();
    }

    /// Puts each rank's stretches in time order, joined.
    pub fn finish(mut self) -> ReadStretches {
        ReadStretches(
            self.ranks
                .drain()
                .map(|(rank, (runs, sorted))| (rank, joined(runs, sorted)))
                .collect(),
        )
    }
}

/// Each kept rank's stretches of reading, in time order and joined.
#[derive(Debug, Default)]
pub struct ReadStretches(HashMap<i32, Vec<(i64, i64)>>);

impl ReadStretches {
    /// The usual pause between two stretches of a rank's reading within a
    /// read phase (the median of the kept ranks' pauses): one step's
    /// compute, for a job that reads a batch a step. `None` when no rank
    /// paused within a read phase.
    pub fn step_pause_ns(&self, phases: &[Phase]) -> Option<i64> {
        let read_phases: Vec<(i64, i64)> = phases
            .iter()
            .filter(|p| matches!(p.kind, PhaseKind::Load | PhaseKind::Read))
            .map(|p| (p.start_unix_ns, p.end_unix_ns))
            .collect();
        let mut pauses = Vec::new();
        for runs in self.0.values() {
            for w in runs.windows(2) {
                let (from, to) = (w[0].1, w[1].0);
                if read_phases.iter().any(|&(s, e)| from >= s && to <= e) {
                    pauses.push(to - from);
                }
            }
        }
        median(pauses)
    }
}

/// A rank's stretches in time order, those closer than [`JOIN_NS`] joined.
fn joined(mut runs: Vec<(i64, i64)>, sorted: bool) -> Vec<(i64, i64)> {
    if !sorted {
        runs.sort_unstable();
    }
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(runs.len());
    for r in runs {
        match out.last_mut() {
            Some(last) if r.0 <= last.1 + JOIN_NS => last.1 = last.1.max(r.1),
            _ => out.push(r),
        }
    }
    out
}

/// The pause in a rank's reading around `t`: from the end of the stretch
/// before it to the start of the one after (0 inside a stretch; `None`
/// before its first read or after its last).
fn gap_at(runs: &[(i64, i64)], t: i64) -> Option<i64> {
    let after = runs.partition_point(|r| r.0 <= t);
    let before = runs.get(after.checked_sub(1)?)?;
    if before.1 >= t {
        return Some(0);
    }
    Some(runs.get(after)?.0 - before.1)
}

/// The middle value (the upper one of two).
fn median(mut v: Vec<i64>) -> Option<i64> {
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

/// What the trace shows of the ranks at their saves.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Meetings {
    /// `meet` (the replay's ranks meet at every save), `read_on` (they meet
    /// only at saves every rank wrote in), or `none` (no save some rank did
    /// not write in, or no rank reading around one: they meet at every save).
    pub verdict: &'static str,
    /// Of the reading ranks at the saves some rank did not write in, the
    /// share that paused for the save (waited for the writer).
    pub waited_share: Option<f64>,
    /// The (save, rank) pairs judged.
    pub judged: u32,
    /// The phases (saves) at which the replay's ranks do not meet.
    pub not_met: Vec<usize>,
}

impl Default for Meetings {
    fn default() -> Self {
        Meetings {
            verdict: "none",
            waited_share: None,
            judged: 0,
            not_met: Vec::new(),
        }
    }
}

impl Meetings {
    /// Judges the saves among `phases` from when each rank read and who
    /// wrote (`writes`, the trace's write runs).
    pub fn judge(phases: &[Phase], reads: &ReadStretches, writes: &Runs) -> Meetings {
        let reads = &reads.0;
        let read_phases: Vec<&Phase> = phases
            .iter()
            .filter(|p| matches!(p.kind, PhaseKind::Load | PhaseKind::Read))
            .collect();
        // Each rank's usual pause: its gap at points spread over the read phases.
        let usual: HashMap<i32, i64> = reads
            .iter()
            .filter_map(|(&rank, runs)| {
                let gaps: Vec<i64> = read_phases
                    .iter()
                    .flat_map(|p| {
                        let len = p.end_unix_ns - p.start_unix_ns;
                        (0..POINTS_PER_PHASE).map(move |k| {
                            p.start_unix_ns + len * (2 * k + 1) / (2 * POINTS_PER_PHASE)
                        })
                    })
                    .filter_map(|t| gap_at(runs, t))
                    .collect();
                Some((rank, median(gaps)?))
            })
            .collect();
        let (mut judged, mut waited) = (0u32, 0u32);
        let mut partial = Vec::new();
        for (i, p) in phases.iter().enumerate() {
            if p.kind != PhaseKind::Checkpoint {
                continue;
            }
            let writers: BTreeSet<Writer> = writes
                .runs()
                .iter()
                .filter(|r| r.start < p.end_unix_ns && r.end > p.start_unix_ns)
                .flat_map(|r| r.callers())
                .collect();
            let middle = p.start_unix_ns + (p.end_unix_ns - p.start_unix_ns) / 2;
            let len = (p.end_unix_ns - p.start_unix_ns) as f64;
            let mut others = false;
            for (&rank, runs) in reads {
                if writers.contains(&(rank as Writer)) {
                    continue;
                }
                others = true;
                let (Some(gap), Some(&base)) = (gap_at(runs, middle), usual.get(&rank)) else {
                    continue;
                };
                judged += 1;
                if gap as f64 >= base as f64 + WAIT_SHARE * len {
                    waited += 1;
                }
            }
            if others {
                partial.push(i);
            }
        }
        if judged == 0 {
            return Meetings::default();
        }
        let share = waited as f64 / judged as f64;
        let read_on = share < 0.5;
        Meetings {
            verdict: if read_on { "read_on" } else { "meet" },
            waited_share: Some(share),
            judged,
            not_met: if read_on { partial } else { Vec::new() },
        }
    }

    /// Whether the replay's ranks meet at the start and end of phase `i`
    /// (a save).
    pub fn met_at(&self, i: usize) -> bool {
        !self.not_met.contains(&i)
    }

    /// The plan's line on it.
    pub fn describe(&self) -> String {
        let share = self.waited_share.unwrap_or(0.0) * 100.0;
        let n = self.judged;
        match self.verdict {
            "read_on" => format!(
                "the traced ranks read on while a rank saved ({share:.0} % of {n} reading rank(s) at \
                 saves paused for one): the replay's ranks do not meet at the {} save(s) some rank \
                 wrote nothing in",
                self.not_met.len()
            ),
            "meet" => format!(
                "the traced ranks waited while a rank saved ({share:.0} % of {n} reading rank(s) at \
                 saves paused for one): the replay's ranks meet at the start and end of every save"
            ),
            _ => "the replay's ranks meet at the start and end of every save".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// Past its budget of stretches the reads keep the lower-numbered half
    /// of the ranks, whole, and take no new rank.
    #[test]
    fn read_times_past_their_budget_keep_the_lower_half_of_the_ranks() {
        let mut reads = ReadTimes::with_budget(40);
        for step in 0..10 {
            for rank in 0..8 {
                let t = step * 100 * MS;
                reads.observe(rank, t, t + MS);
            }
        }
        reads.observe(9, 0, MS);
        let kept = reads.finish();
        let mut ranks: Vec<i32> = kept.0.keys().copied().collect();
        ranks.sort_unstable();
        assert_eq!(ranks, [0, 1, 2, 3], "8 ranks x 10 stretches halved once");
        assert!(kept.0.values().all(|runs| runs.len() == 10), "kept whole");
    }

    fn phase(kind: PhaseKind, start_ms: i64, end_ms: i64) -> Phase {
        Phase {
            kind,
            start_s: start_ms as f64 / 1e3,
            end_s: end_ms as f64 / 1e3,
            read_bytes: 0,
            write_bytes: 0,
            max_writers: 1,
            metadata_calls: 0,
            storage_read_bytes: None,
            start_unix_ns: start_ms * MS,
            end_unix_ns: end_ms * MS,
        }
    }

    /// Two ranks reading a burst every 480 ms; rank 0 saves for 250 ms
    /// after its burst at 960 ms. Rank 1 either waits for it (its next
    /// burst comes after the save and its own step) or reads on.
    fn job(rank1_waits: bool, rank1_writes: bool) -> Meetings {
        let phases = vec![
            phase(PhaseKind::Read, 0, 1000),
            phase(PhaseKind::Checkpoint, 1000, 1250),
            phase(PhaseKind::Read, 1250, 3000),
        ];
        let mut reads = ReadTimes::default();
        let mut writes = Runs::default();
        let mut burst = |rank: i32, at: i64| reads.observe(rank, at * MS, (at + 5) * MS);
        for at in [0, 480, 960, 1250, 1730, 2210, 2690] {
            burst(0, at);
        }
        let shift = if rank1_waits { 250 } else { 0 };
        for at in [100, 580] {
            burst(1, at);
        }
        for at in [1060, 1540, 2020, 2500] {
            burst(1, at + shift);
        }
        writes.add(1000 * MS, 1250 * MS, 64 << 20, Some(0));
        if rank1_writes {
            writes.add(1000 * MS, 1250 * MS, 64 << 20, Some(1));
        }
        writes.finish();
        Meetings::judge(&phases, &reads.finish(), &writes)
    }

    #[test]
    fn ranks_that_read_on_through_a_save_are_not_made_to_meet() {
        let m = job(false, false);
        assert_eq!(m.verdict, "read_on", "{m:?}");
        assert_eq!(m.not_met, vec![1]);
        assert!(!m.met_at(1));
        assert_eq!(m.judged, 1);
    }

    #[test]
    fn ranks_that_wait_for_the_writer_meet() {
        let m = job(true, false);
        assert_eq!(m.verdict, "meet", "{m:?}");
        assert!(m.met_at(1));
        assert_eq!(m.waited_share, Some(1.0));
    }

    #[test]
    fn a_save_every_rank_writes_in_is_a_meeting() {
        let m = job(false, true);
        assert_eq!(m.verdict, "none", "{m:?}");
        assert!(m.met_at(1));
    }

    #[test]
    fn a_pause_is_the_gap_between_stretches_around_a_moment() {
        let runs = [(0, 10), (20, 30), (50, 60)];
        assert_eq!(gap_at(&runs, 5), Some(0));
        assert_eq!(gap_at(&runs, 40), Some(20));
        assert_eq!(gap_at(&runs, 65), None);
        assert_eq!(gap_at(&runs, -1), None);
    }

    #[test]
    fn a_step_is_the_usual_pause_between_bursts_within_read_phases() {
        let phases = vec![
            phase(PhaseKind::Read, 0, 1000),
            phase(PhaseKind::Checkpoint, 1000, 1600),
            phase(PhaseKind::Read, 1600, 3000),
        ];
        let mut reads = ReadTimes::default();
        // Bursts of 19 ms every 300 ms (281 ms of compute between them),
        // reads a millisecond apart within a burst; the pause across the
        // save (919 -> 1600 ms) is not a step.
        for rank in 0..2 {
            for at in [0, 300, 600, 900, 1600, 1900, 2200, 2500] {
                for k in 0..10 {
                    let t = (at + 2 * k) * MS;
                    reads.observe(rank, t, t + MS);
                }
            }
        }
        assert_eq!(reads.finish().step_pause_ns(&phases), Some(281 * MS));
        assert_eq!(ReadTimes::default().finish().step_pause_ns(&phases), None);
    }
}
