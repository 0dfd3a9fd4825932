//! What the capture has written so far, counted as rows leave the reorder
//! window: calls, bytes and latency per op kind. Counted on the capture
//! thread without a lock; the capture loop publishes a copy now and then
//! (see [`super::Live`]), so the figures agree with the trace row for row.

use hdrhistogram::Histogram;
use iorepro_format::Op;

use iorepro_format::EventRow;

/// One op kind's figures.
#[derive(Debug, Clone)]
pub struct OpTally {
    /// Calls (a run of n calls counts n).
    pub count: u64,
    /// Bytes moved (reads and writes).
    pub bytes: u64,
    /// Time each call took, in ns (a run's calls each count its mean).
    pub latency_ns: Histogram<u64>,
}

impl Default for OpTally {
    fn default() -> Self {
        OpTally {
            count: 0,
            bytes: 0,
            latency_ns: iorepro_telemetry::status::latency_histogram(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Tally {
    /// By `Op as usize`, created on the op's first row.
    ops: Vec<Option<OpTally>>,
    /// Rows written: the manifest's `events`.
    pub rows: u64,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            ops: vec![None; Op::ALL.len()],
            rows: 0,
        }
    }
}

impl Tally {
    /// Counts a row as it is written to the trace.
    pub fn add(&mut self, row: &EventRow) {
        self.rows += 1;
        let calls = row.calls.max(1) as u64;
        let t = self.ops[row.op as usize].get_or_insert_with(OpTally::default);
        t.count += calls;
        if row.op.moves_data() && row.ret > 0 {
            t.bytes += row.ret as u64;
        }
        let mean = (row.dur_ns.max(0) as u64 / calls).max(1);
        t.latency_ns.saturating_record_n(mean, calls);
    }

    /// The op kinds seen, by name.
    pub fn ops(&self) -> impl Iterator<Item = (&'static str, &OpTally)> {
        self.ops
            .iter()
            .enumerate()
            .filter_map(|(i, t)| Some((Op::ALL[i].as_str(), t.as_ref()?)))
    }

    pub fn op(&self, name: &str) -> Option<&OpTally> {
        self.ops().find(|(n, _)| *n == name).map(|(_, t)| t)
    }

    pub fn bytes(&self, name: &str) -> u64 {
        self.op(name).map_or(0, |t| t.bytes)
    }
}
