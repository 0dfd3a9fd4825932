//! Splits a trace's timeline into phases — `load`, `read`, `checkpoint`,
//! `idle`, the vocabulary of the analysis tools — so the replay knows where all
//! ranks meet. Checkpoints are found as write bursts: writes close together in
//! time, not interrupted by data reads, adding up to at least a minimum size.
//! The detector is behind [`PhaseDetector`], so a better one can replace it
//! without touching planning or execution.

use iorepro_traces::Op;

/// The phase vocabulary is the analysis one, so reports and `compare` agree.
pub use iorepro_traces::analysis::phases::PhaseKind;

/// One phase of the trace timeline, in trace nanoseconds; phases are contiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    pub kind: PhaseKind,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// What a detector sees of each row (in `ts` order across all ranks).
#[derive(Debug, Clone, Copy)]
pub struct PhaseRow {
    pub ts: i64,
    pub end: i64,
    pub op: Op,
    pub bytes: u64,
}

pub trait PhaseDetector {
    fn observe(&mut self, row: &PhaseRow);
    /// The phases covering `[start, end]` of the trace.
    fn finish(&mut self, start: i64, end: i64) -> Vec<Phase>;
}

/// Checkpoints as write bursts; a leading read burst as `load`; the rest `read`
/// where data is read, `idle` where nothing is.
#[derive(Debug)]
pub struct WriteBurstDetector {
    /// A burst must write at least this much to count as a checkpoint (log files are not).
    pub min_checkpoint_bytes: u64,
    /// Writes further apart than this with reads between them are separate bursts.
    pub split_after_reads_ns: i64,
    /// Writes further apart than this are separate bursts regardless.
    pub split_ns: i64,
    /// The leading load burst ends at the first pause in reads longer than this.
    pub load_gap_ns: i64,
    bursts: Vec<(i64, i64, u64)>,
    current: Option<(i64, i64, u64)>,
    reads_since_write: bool,
    first_data_is_read: Option<bool>,
    load_last: Option<i64>,
    load_end: Option<i64>,
    read_runs: Vec<(i64, i64)>,
}

impl Default for WriteBurstDetector {
    fn default() -> Self {
        WriteBurstDetector {
            min_checkpoint_bytes: 1 << 20,
            split_after_reads_ns: 5_000_000,
            split_ns: 2_000_000_000,
            load_gap_ns: 10_000_000,
            bursts: Vec::new(),
            current: None,
            reads_since_write: false,
            first_data_is_read: None,
            load_last: None,
            load_end: None,
            read_runs: Vec::new(),
        }
    }
}

impl WriteBurstDetector {
    fn close_burst(&mut self) {
        if let Some(b) = self.current.take() {
            if b.2 >= self.min_checkpoint_bytes {
                self.bursts.push(b);
            }
        }
    }
}

impl PhaseDetector for WriteBurstDetector {
    fn observe(&mut self, r: &PhaseRow) {
        match r.op {
            Op::Write => {
                if self.first_data_is_read.is_none() {
                    self.first_data_is_read = Some(false);
                }
                let split = match self.current {
                    Some((_, end, _)) => {
                        let gap = r.ts - end;
                        gap > self.split_ns
                            || (self.reads_since_write && gap > self.split_after_reads_ns)
                    }
                    None => true,
                };
                if split {
                    self.close_burst();
                    self.current = Some((r.ts, r.end, 0));
                }
                let b = self.current.as_mut().expect("burst just opened");
                b.1 = b.1.max(r.end);
                b.2 += r.bytes;
                self.reads_since_write = false;
            }
            Op::Fsync | Op::Fdatasync | Op::Close | Op::Rename => {
                if let Some(b) = self.current.as_mut() {
                    if !self.reads_since_write && r.ts - b.1 <= self.split_ns {
                        b.1 = b.1.max(r.end);
                    }
                }
            }
            Op::Read | Op::Fault => {
                if self.first_data_is_read.is_none() {
                    self.first_data_is_read = Some(true);
                }
                self.reads_since_write = true;
                if self.first_data_is_read == Some(true) && self.load_end.is_none() {
                    match self.load_last {
                        Some(last) if r.ts - last > self.load_gap_ns => self.load_end = Some(last),
                        _ => self.load_last = Some(self.load_last.unwrap_or(r.end).max(r.end)),
                    }
                }
                match self.read_runs.last_mut() {
                    Some(run) if r.ts - run.1 <= self.split_ns / 2 => run.1 = run.1.max(r.end),
                    _ => self.read_runs.push((r.ts, r.end)),
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self, start: i64, end: i64) -> Vec<Phase> {
        self.close_burst();
        let mut phases = Vec::new();
        let mut cursor = start;
        let push = |phases: &mut Vec<Phase>, kind, s: i64, e: i64| {
            if e > s {
                phases.push(Phase {
                    kind,
                    start_ns: s,
                    end_ns: e,
                });
            }
        };
        if self.first_data_is_read == Some(true) {
            let first_burst = self.bursts.first().map(|b| b.0).unwrap_or(end);
            let load_end = self
                .load_end
                .or(self.load_last)
                .unwrap_or(start)
                .min(first_burst);
            push(&mut phases, PhaseKind::Load, cursor, load_end);
            cursor = cursor.max(load_end);
        }
        let reads_in = |s: i64, e: i64| self.read_runs.iter().any(|r| r.0 < e && r.1 > s);
        for &(bs, be, _) in &self.bursts {
            let bs = bs.max(cursor);
            let kind = if reads_in(cursor, bs) {
                PhaseKind::Read
            } else {
                PhaseKind::Idle
            };
            push(&mut phases, kind, cursor, bs);
            push(
                &mut phases,
                PhaseKind::Checkpoint,
                bs,
                be.min(end).max(bs + 1),
            );
            cursor = cursor.max(be.min(end).max(bs + 1));
        }
        if end > cursor {
            let kind = if reads_in(cursor, end) {
                PhaseKind::Read
            } else {
                PhaseKind::Idle
            };
            push(&mut phases, kind, cursor, end);
        }
        if phases.is_empty() {
            phases.push(Phase {
                kind: PhaseKind::Idle,
                start_ns: start,
                end_ns: end.max(start + 1),
            });
        }
        phases
    }
}

/// Index of the phase holding `ts`, given contiguous sorted phases.
pub fn phase_of(phases: &[Phase], ts: i64) -> usize {
    phases
        .partition_point(|p| p.start_ns <= ts)
        .saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ts: i64, op: Op, bytes: u64) -> PhaseRow {
        PhaseRow {
            ts,
            end: ts + 1_000,
            op,
            bytes,
        }
    }

    #[test]
    fn finds_load_reads_and_checkpoints() {
        let ms = 1_000_000;
        let mut d = WriteBurstDetector::default();
        let mut rows = Vec::new();
        for i in 0..10 {
            rows.push(row(i * 100_000, Op::Read, 4 << 20)); // load burst, dense
        }
        for step in 0..3 {
            rows.push(row(20 * ms + step * 50 * ms, Op::Read, 1 << 20));
        }
        for i in 0..8 {
            rows.push(row(200 * ms + i * 10_000, Op::Write, 1 << 20));
        }
        rows.push(row(201 * ms, Op::Fsync, 0));
        rows.push(row(220 * ms, Op::Read, 1 << 20));
        for r in &rows {
            d.observe(r);
        }
        let p = d.finish(0, 230 * ms);
        let kinds: Vec<_> = p.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            vec![
                PhaseKind::Load,
                PhaseKind::Read,
                PhaseKind::Checkpoint,
                PhaseKind::Read
            ]
        );
        assert_eq!(p[2].start_ns, 200 * ms);
        assert_eq!(p[2].end_ns, 201 * ms + 1_000);
        assert_eq!(phase_of(&p, 200 * ms + 5), 2);
        assert_eq!(phase_of(&p, 0), 0);
        for w in p.windows(2) {
            assert_eq!(w[0].end_ns, w[1].start_ns);
        }
    }

    #[test]
    fn small_writes_are_not_checkpoints() {
        let mut d = WriteBurstDetector::default();
        d.observe(&row(0, Op::Read, 100));
        d.observe(&row(50_000_000, Op::Write, 4096));
        let p = d.finish(0, 100_000_000);
        assert!(p.iter().all(|p| p.kind != PhaseKind::Checkpoint));
    }
}
