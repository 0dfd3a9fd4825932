//! When each op should start. `afap` issues ops back to back; `original` and
//! a scale factor keep each rank's compute gaps from the trace (scaled), so
//! slow I/O pushes the rank behind the schedule it would have kept on the
//! traced storage. Latency is measured from the intended start, so time an op
//! waited because the rank was behind counts against the storage (no
//! coordinated omission).
//!
//! At N ranks sharing a traced rank's dataset reads (`--data shard`), each
//! replayed rank makes 1/k of that rank's steps (k = the ranks sharing it),
//! each with the traced compute: the gaps between its reads span k traced
//! steps, so in its read phases the rank's clock runs k times as fast as
//! the trace's ([`Schedule::set_speedup`]). An epoch then takes 1/k of the
//! traced time when the storage keeps up, the N ranks ask for N/R times the
//! traced bandwidth, and a rank whose reads are slower waits for its batch,
//! as the job's training loop would: that wait is the stall. The sharers
//! make their steps side by side (see `plan::scale::route`). Checkpoints
//! keep the traced gaps between the writers' calls (the ranks meet around
//! them).

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Timing {
    Afap,
    /// Compute gaps multiplied by this factor (1.0 = original).
    Scaled(f64),
}

/// `--timing`. Parsed here rather than by a clap `ValueEnum`, which takes
/// a fixed list of words: besides `afap` and `original`, any non-negative
/// factor is a timing.
impl std::str::FromStr for Timing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "afap" => Ok(Timing::Afap),
            "original" => Ok(Timing::Scaled(1.0)),
            _ => match s.parse::<f64>() {
                Ok(f) if f.is_finite() && f >= 0.0 => Ok(Timing::Scaled(f)),
                _ => Err(format!("`{s}` is not a timing (afap, original, or a non-negative scale factor like 0.5)")),
            },
        }
    }
}

impl Timing {
    /// How the report names it: `afap`, `original`, or `x` and the factor.
    pub fn label(self) -> String {
        match self {
            Timing::Afap => "afap".into(),
            Timing::Scaled(1.0) => "original".into(),
            Timing::Scaled(f) => format!("x{f}"),
        }
    }
}

/// One rank's clock against the trace.
#[derive(Debug)]
pub struct Schedule {
    timing: Timing,
    /// End of the previous op in trace time.
    prev_trace_end: Option<i64>,
    /// When the previous op (or barrier) ended in the replay.
    prev_end: Instant,
    pub compute_ns: u64,
    pub ideal_ns: u64,
    /// How many traced steps one step of this rank stands for, in the phase
    /// it is in (1 outside shared read phases).
    speedup: f64,
}

impl Schedule {
    /// A clock that starts at `now`, standing for trace time `origin_ns`:
    /// each rank's first op waits its own offset from there, as it did in
    /// the trace (ranks and loader workers do not all start at once).
    pub fn new(timing: Timing, now: Instant, origin_ns: i64) -> Self {
        Schedule {
            timing,
            prev_trace_end: Some(origin_ns),
            prev_end: now,
            compute_ns: 0,
            ideal_ns: 0,
            speedup: 1.0,
        }
    }

    /// From now on, trace time passes `k` times as fast for this rank (see
    /// the module's doc); `k` >= 1.
    pub fn set_speedup(&mut self, k: f64) {
        self.speedup = k.max(1.0);
    }

    /// The compute factor now: the timing's, over the speed-up.
    fn factor(&self) -> Option<f64> {
        match self.timing {
            Timing::Afap => None,
            Timing::Scaled(f) => Some(f / self.speedup),
        }
    }

    /// How far through the trace this rank is: the end of its latest op in
    /// trace time.
    pub fn trace_clock(&self) -> i64 {
        self.prev_trace_end.unwrap_or(i64::MIN)
    }

    /// After a barrier the rank resumes from `now`, which stands for trace
    /// time `ready_ns`: when the last rank to arrive had done all it did
    /// before the barrier (the largest [`Schedule::trace_clock`]). Waiting
    /// at the barrier was not compute; the compute between that moment and
    /// the rank's next op in the trace still is.
    ///
    /// The part of the wait the trace itself had (this rank was at `p` in
    /// the trace when the last one got to `ready_ns`) is time the rank would
    /// have spent at the barrier on the traced storage too, so it counts in
    /// [`Schedule::ideal_ns`] and not as stall; only waiting beyond it (for
    /// ranks that I/O held up) is stall.
    pub fn resume(&mut self, now: Instant, ready_ns: i64) {
        if let (Some(f), Some(p)) = (self.factor(), self.prev_trace_end) {
            self.ideal_ns += ((ready_ns - p).max(0) as f64 * f) as u64;
        }
        self.prev_end = now;
        self.prev_trace_end = Some(self.prev_trace_end.map_or(ready_ns, |p| p.max(ready_ns)));
    }

    /// The intended start of an op at trace time `ts` lasting `dur` in the
    /// trace, `elsewhere` of the traced time before it having been other
    /// ranks' reads (see [`crate::plan::ops::PlannedOp::elsewhere_ns`]),
    /// not this rank's compute; waits until then (returns at once when
    /// behind).
    pub fn start(&mut self, ts: i64, dur: i64, elsewhere: i64) -> Instant {
        self.ideal_ns += dur.max(0) as u64;
        let Some(f) = self.factor() else {
            return Instant::now();
        };
        let gap = self
            .prev_trace_end
            .map_or(0, |p| (ts - p - elsewhere.max(0)).max(0));
        let gap = (gap as f64 * f) as u64;
        self.compute_ns += gap;
        self.ideal_ns += gap;
        self.prev_trace_end = Some(self.prev_trace_end.map_or(ts + dur, |p| p.max(ts + dur)));
        let intended = self.prev_end + Duration::from_nanos(gap);
        wait_until(intended);
        intended
    }

    /// As [`Schedule::start`], for the first op of a process this rank has
    /// not made one for, a process whose first call was traced at
    /// `started_ns`. The time up to then is the process's start-up (a
    /// DataLoader worker forked, an interpreter importing), as long at any
    /// N, so it keeps the traced pace; from then on the process makes steps,
    /// whose gaps shrink as the rank's others do. A rank sharing its traced
    /// rank's reads may make none of the process's first calls (another
    /// sharer makes those visits): its first op of the process can come
    /// several traced steps after the start-up ended.
    pub fn start_of_process(&mut self, started_ns: i64, ts: i64, dur: i64) -> Instant {
        let k = std::mem::replace(&mut self.speedup, 1.0);
        self.wait_for(started_ns.min(ts));
        self.speedup = k;
        self.start(ts, dur, 0)
    }

    /// Waits, as the rank's compute, until trace time `ts` (at once when
    /// the rank is already there or the timing keeps no gaps).
    pub fn wait_for(&mut self, ts: i64) {
        if self.factor().is_none() || self.prev_trace_end.is_some_and(|p| p >= ts) {
            return;
        }
        let intended = self.start(ts, 0, 0);
        self.prev_end = intended;
    }

    /// The op meant to start at `intended` was issued at `issued` and
    /// returned at `end`. The rank's clock moves on by the call's own
    /// duration: waking up late (the replay's thread not scheduled on time)
    /// is not the storage's delay, and over thousands of ops it would pile
    /// up into a drift the trace never had. When the rank is behind because
    /// earlier calls were slow, `intended` is already late and nothing of
    /// that is lost.
    pub fn finished(&mut self, intended: Instant, issued: Instant, end: Instant) {
        let woke_late = issued.saturating_duration_since(intended);
        self.prev_end = end.checked_sub(woke_late).unwrap_or(end).max(intended);
    }
}

/// Sleeps most of the way, then yields, so ops start within microseconds of plan.
fn wait_until(t: Instant) {
    loop {
        let now = Instant::now();
        if now >= t {
            return;
        }
        let left = t - now;
        if left > Duration::from_micros(200) {
            std::thread::sleep(left - Duration::from_micros(100));
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_timings() {
        assert_eq!("afap".parse::<Timing>().unwrap(), Timing::Afap);
        assert_eq!("original".parse::<Timing>().unwrap(), Timing::Scaled(1.0));
        assert_eq!("0.5".parse::<Timing>().unwrap(), Timing::Scaled(0.5));
        assert!("-1".parse::<Timing>().is_err());
        assert!("fast".parse::<Timing>().is_err());
    }

    #[test]
    fn a_wait_the_trace_had_at_a_barrier_is_not_stall() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Timing::Scaled(1.0), t0, 0);
        let op = s.start(0, 1_000_000, 0);
        s.finished(op, op, t0 + Duration::from_millis(1));
        // The last rank got to the barrier 2 s later in the trace.
        s.resume(t0 + Duration::from_secs(2), 2_000_000_000);
        assert_eq!(s.ideal_ns, 2_000_000_000);
        let mut afap = Schedule::new(Timing::Afap, t0, 0);
        afap.resume(t0, 2_000_000_000);
        assert_eq!(afap.ideal_ns, 0);
    }

    #[test]
    fn original_timing_keeps_gaps() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Timing::Scaled(1.0), t0, 0);
        let first = s.start(0, 1_000, 0);
        s.finished(first, first, Instant::now());
        let intended = s.start(20_001_000, 1_000, 0); // 20 ms compute gap
        assert!(intended.duration_since(t0) >= Duration::from_millis(20));
        assert!(Instant::now() >= intended);
        assert_eq!(s.compute_ns, 20_000_000);
    }

    #[test]
    fn other_ranks_reads_in_a_gap_are_not_compute() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Timing::Scaled(1.0), t0, 0);
        let first = s.start(0, 1_000, 0);
        s.finished(first, first, Instant::now());
        // 20 ms traced, 5 ms of it another rank's read: 15 ms of compute.
        let intended = s.start(20_001_000, 1_000, 5_000_000);
        assert!(intended.duration_since(t0) >= Duration::from_millis(15));
        assert_eq!(s.compute_ns, 15_000_000);
    }

    #[test]
    fn a_new_processs_start_up_keeps_the_traced_pace() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Timing::Scaled(1.0), t0, 0);
        s.set_speedup(4.0);
        let first = s.start_of_process(8_000_000, 8_000_000, 0);
        assert!(first.duration_since(t0) >= Duration::from_millis(8));
        s.finished(first, first, first);
        // Its steps then run 4 times as fast.
        let next = s.start(16_000_000, 0, 0);
        assert_eq!(next.duration_since(first), Duration::from_millis(2));
        assert_eq!(s.compute_ns, 10_000_000);
    }

    #[test]
    fn a_process_first_met_after_its_start_up_makes_the_steps_since_at_the_rank_pace() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Timing::Scaled(1.0), t0, 0);
        s.set_speedup(4.0);
        // Started at 8 ms; this rank's first op of it was traced at 48 ms,
        // 40 ms of steps later, which take 10 ms at 4 times the pace.
        let first = s.start_of_process(8_000_000, 48_000_000, 0);
        assert_eq!(first.duration_since(t0), Duration::from_millis(18));
        assert_eq!(s.compute_ns, 18_000_000);
        // A process already under way when the rank got to it: all steps.
        let mut s = Schedule::new(Timing::Scaled(1.0), t0, 0);
        s.set_speedup(4.0);
        let first = s.start_of_process(-1, 40_000_000, 0);
        assert_eq!(first.duration_since(t0), Duration::from_millis(10));
    }

    #[test]
    fn waiting_for_a_phase_start_moves_the_clock_there() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Timing::Scaled(1.0), t0, 0);
        s.wait_for(10_000_000);
        assert_eq!((s.compute_ns, s.trace_clock()), (10_000_000, 10_000_000));
        assert!(t0.elapsed() >= Duration::from_millis(10));
        // The next op's gap counts from the phase start, not from the origin.
        let op = s.start(12_000_000, 0, 0);
        assert!(op.duration_since(t0) >= Duration::from_millis(12));
        assert_eq!(s.compute_ns, 12_000_000);
        // Already past it: nothing to wait for.
        s.wait_for(5_000_000);
        assert_eq!(s.compute_ns, 12_000_000);
    }

    #[test]
    fn waking_late_does_not_pile_up() {
        // Ops 1 ms apart in the trace; the replay wakes 5 ms late for the
        // first one. The next op is still meant for 1 ms after the first one
        // was meant to end, not 1 ms after it really did.
        let t0 = Instant::now();
        let mut s = Schedule::new(Timing::Scaled(1.0), t0, 0);
        let first = s.start(0, 1_000, 0);
        let (issued, end) = (
            first + Duration::from_millis(5),
            first + Duration::from_millis(5) + Duration::from_micros(1),
        );
        s.finished(first, issued, end);
        let second = s.start(1_001_000, 1_000, 0);
        let gap = second.duration_since(first);
        assert!(
            gap >= Duration::from_micros(1_000) && gap < Duration::from_millis(2),
            "{gap:?}"
        );
    }

    #[test]
    fn a_barrier_resumes_from_the_last_rank_ready() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Timing::Scaled(1.0), t0, 0);
        let a = s.start(0, 1_000, 0);
        s.finished(a, a, a);
        assert_eq!(s.trace_clock(), 1_000);
        // The last rank was ready at 5 ms of trace time; this rank's next op
        // is at 8 ms: 3 ms of compute after the barrier.
        let now = Instant::now();
        s.resume(now, 5_000_000);
        let b = s.start(8_000_000, 1_000, 0);
        assert!(b.duration_since(now) >= Duration::from_millis(3));
        assert!(b.duration_since(now) < Duration::from_millis(4));
    }

    #[test]
    fn a_rank_sharing_reads_with_three_others_runs_four_times_as_fast() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Timing::Scaled(1.0), t0, 0);
        s.set_speedup(4.0);
        let a = s.start(0, 1_000, 0);
        s.finished(a, a, a);
        // 40 ms of traced time between two of its reads: 4 traced steps.
        let b = s.start(40_001_000, 1_000, 0);
        let gap = b.duration_since(a);
        assert!(
            gap >= Duration::from_millis(10) && gap < Duration::from_millis(12),
            "{gap:?}"
        );
        assert_eq!(s.compute_ns, 10_000_000);
    }

    #[test]
    fn first_op_keeps_its_offset_from_the_origin() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Timing::Scaled(1.0), t0, 1_000_000_000);
        let intended = s.start(1_015_000_000, 1_000, 0); // 15 ms after the origin
        assert!(intended.duration_since(t0) >= Duration::from_millis(15));
        let t1 = Instant::now();
        let mut fast = Schedule::new(Timing::Afap, t1, 1_000_000_000);
        let at = fast.start(1_015_000_000, 1_000, 0);
        assert!(at.duration_since(t1) < Duration::from_millis(15));
    }
}
