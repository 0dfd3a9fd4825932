//! Live: the figures of a replay while it runs, for `--status-interval`
//! lines ([`lines`], written by [`watch`]'s thread), the `--metrics-addr`
//! endpoint ([`metrics`]) and the progress bar on a terminal ([`progress`]).
//! Fed by `execute`'s ranks as they make their calls; `report` is built
//! from the same figures when they are done.
//!
//! Each rank keeps its op counts, bytes and latency histograms (the per-op
//! tally both binaries share, `iorepro_telemetry::tally`, with the replay's
//! failures beside them) in its own
//! [`RankLive`], behind a lock only the rank itself takes on every op (never
//! contended except for the moment a reader copies them), and publishes how
//! far its schedule has got with plain atomic stores. Readers ([`watch`]'s
//! thread, a scrape) merge the ranks into [`Totals`]; nothing on the hot path
//! waits for them. The final report is built from the same figures, so the
//! last status line and the last scrape agree with it exactly.

pub mod lines;
pub mod metrics;
pub mod progress;
pub mod watch;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use iorepro_format::Op;
use iorepro_telemetry::tally::OpTally;

use crate::io::call_tally::OpStats;
use crate::io::objects::RequestStats;

/// One rank's figures so far.
pub struct RankLive {
    ops: Mutex<OpTally<OpStats>>,
    /// When the rank's clock started (after the first barrier).
    started: OnceLock<Instant>,
    /// Time the rank would have taken so far on the traced storage.
    ideal_ns: AtomicU64,
    /// How far behind its schedule the rank was when its latest call ended.
    behind_ns: AtomicU64,
    /// The rank's whole time once it has finished; 0 while it runs.
    finished_ns: AtomicU64,
    /// Its requests, on an object-storage target (its client counts them here).
    pub requests: Arc<Mutex<RequestStats>>,
}

impl Default for RankLive {
    fn default() -> Self {
        RankLive {
            ops: Mutex::default(),
            started: OnceLock::new(),
            ideal_ns: AtomicU64::new(0),
            behind_ns: AtomicU64::new(0),
            finished_ns: AtomicU64::new(0),
            requests: Arc::default(),
        }
    }
}

impl RankLive {
    /// One call: its bytes and latency, whether it succeeded, and whether
    /// that differed from the traced call.
    pub fn record(&self, op: Op, bytes: u64, latency_ns: u64, succeeded: bool, differed: bool) {
        let mut ops = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        let stats = ops.entry(op);
        stats.record(bytes, latency_ns);
        stats.note_result(succeeded, differed);
    }

    pub fn started(&self, at: Instant) {
        let _ = self.started.set(at);
    }

    /// The schedule's ideal time after the latest op, which ended `at`.
    pub fn advanced(&self, ideal_ns: u64, at: Instant) {
        self.ideal_ns.store(ideal_ns, Ordering::Relaxed);
        let taken = self
            .started
            .get()
            .map_or(0, |s| at.saturating_duration_since(*s).as_nanos() as u64);
        self.behind_ns
            .store(taken.saturating_sub(ideal_ns), Ordering::Relaxed);
    }

    pub fn finished(&self, elapsed_ns: u64) {
        self.finished_ns.store(elapsed_ns.max(1), Ordering::Relaxed);
    }

    /// A copy of the rank's op figures, by op name, as its result keeps them.
    pub fn ops(&self) -> BTreeMap<String, OpStats> {
        let ops = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        ops.iter()
            .map(|(k, s)| (k.to_string(), s.clone()))
            .collect()
    }

    fn is_finished(&self) -> bool {
        self.finished_ns.load(Ordering::Relaxed) != 0
    }

    /// How far behind its schedule the rank is, as the report counts it:
    /// time taken less the time it would have taken. While it runs, as of
    /// its latest call: measured from now, a rank waiting out one of the
    /// trace's compute gaps would look as if it were falling behind.
    fn stall_ns(&self) -> u64 {
        match self.finished_ns.load(Ordering::Relaxed) {
            0 => self.behind_ns.load(Ordering::Relaxed),
            done => done.saturating_sub(self.ideal_ns.load(Ordering::Relaxed)),
        }
    }
}

/// Every rank this process runs.
pub struct LiveRanks {
    ranks: Vec<(u32, Arc<RankLive>)>,
    /// Whether the replay keeps the trace's compute gaps (else no stall).
    keeps_gaps: bool,
    /// Ops this process will replay, and how many it has.
    planned_ops: u64,
    done_ops: Arc<AtomicU64>,
    /// This process's rank under a launcher.
    pub launched_rank: Option<u32>,
    pub created: Instant,
}

/// The ranks' figures merged, at one moment.
pub struct Totals {
    pub at: Instant,
    pub ops: OpTally<OpStats>,
    /// The most any rank is (was) behind its schedule.
    pub stall_ns: u64,
    pub ranks: usize,
    pub finished: bool,
    /// Share of the planned ops replayed, 0 to 1.
    pub progress: f64,
    /// The requests to an object-storage target (empty for a directory).
    pub requests: RequestStats,
}

impl Totals {
    /// Nothing done yet, at `at`: what the first interval is measured from.
    pub fn empty(at: Instant, ranks: usize) -> Totals {
        Totals {
            at,
            ops: OpTally::default(),
            stall_ns: 0,
            ranks,
            finished: false,
            progress: 0.0,
            requests: RequestStats::default(),
        }
    }

    pub fn bytes(&self, op: Op) -> u64 {
        self.ops.bytes(op)
    }
}

impl LiveRanks {
    pub fn new(
        ranks: impl IntoIterator<Item = u32>,
        keeps_gaps: bool,
        planned_ops: u64,
        done_ops: Arc<AtomicU64>,
        launched_rank: Option<u32>,
    ) -> LiveRanks {
        let mut ranks: Vec<(u32, Arc<RankLive>)> =
            ranks.into_iter().map(|r| (r, Arc::default())).collect();
        ranks.sort_by_key(|(r, _)| *r);
        LiveRanks {
            ranks,
            keeps_gaps,
            planned_ops,
            done_ops,
            launched_rank,
            created: Instant::now(),
        }
    }

    /// The figures of target rank `rank`, which this process runs.
    pub fn rank(&self, rank: u32) -> Arc<RankLive> {
        let i = self
            .ranks
            .binary_search_by_key(&rank, |(r, _)| *r)
            .expect("a rank this process runs");
        self.ranks[i].1.clone()
    }

    pub fn totals(&self) -> Totals {
        let at = Instant::now();
        let mut ops = OpTally::<OpStats>::default();
        let mut stall_ns = 0;
        let mut requests = RequestStats::default();
        for (_, r) in &self.ranks {
            ops.merge(&r.ops.lock().unwrap_or_else(|p| p.into_inner()));
            requests.merge(&r.requests.lock().unwrap_or_else(|p| p.into_inner()));
            if self.keeps_gaps {
                stall_ns = stall_ns.max(r.stall_ns());
            }
        }
        let done = self.done_ops.load(Ordering::Relaxed);
        let finished = self.ranks.iter().all(|(_, r)| r.is_finished());
        Totals {
            at,
            ops,
            stall_ns,
            ranks: self.ranks.len(),
            finished,
            requests,
            // Calls skipped as tolerated errors never count as done.
            progress: if finished || self.planned_ops == 0 {
                1.0
            } else {
                (done as f64 / self.planned_ops as f64).min(1.0)
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ranks_merge_and_stall_counts_like_the_report() {
        let done = Arc::new(AtomicU64::new(0));
        let live = LiveRanks::new([3, 1], true, 4, done.clone(), None);
        let (a, b) = (live.rank(1), live.rank(3));
        a.record(Op::Read, 4096, 1_000, true, false);
        b.record(Op::Read, 4096, 3_000, true, false);
        b.record(Op::Write, 100, 2_000, true, false);
        done.store(3, Ordering::Relaxed);
        let t0 = Instant::now() - Duration::from_secs(2);
        a.started(t0);
        a.advanced(500_000_000, t0 + Duration::from_secs(2));
        b.started(t0);
        b.advanced(2_000_000_000, t0 + Duration::from_secs(2));
        b.finished(2_000_000_000);
        let t = live.totals();
        let reads = t.ops.get(Op::Read).unwrap();
        assert_eq!(
            (reads.figures.count, t.bytes(Op::Read), t.bytes(Op::Write)),
            (2, 8192, 100)
        );
        assert!(!t.finished);
        assert_eq!(t.progress, 0.75);
        // Rank 1 is 1.5 s behind (2 s taken, 0.5 s planned); rank 3 is not.
        assert_eq!(t.stall_ns, 1_500_000_000);
        // Later, in a compute gap of the trace, it is no further behind.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(live.totals().stall_ns, 1_500_000_000);
        a.finished(2_100_000_000);
        let t = live.totals();
        assert!(t.finished);
        assert_eq!(t.stall_ns, 1_600_000_000);
        let afap = LiveRanks::new([0], false, 0, done, Some(0));
        afap.rank(0).started(t0);
        assert_eq!(afap.totals().stall_ns, 0);
    }
}
