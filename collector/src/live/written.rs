//! What the capture has written so far, counted as rows leave the reorder
//! window: the shared per-op tally (calls, bytes and latency per op kind)
//! and the rows themselves, the manifest's `events`. Counted on the capture
//! thread without a lock; the capture loop publishes a copy now and then
//! (see [`super::Live`]), so the figures agree with the trace row for row.

use iorepro_format::EventRow;
use iorepro_telemetry::tally::OpTally;

#[derive(Debug, Clone, Default)]
pub struct Written {
    pub ops: OpTally,
    /// Rows written: the manifest's `events` (a run of calls is one row).
    pub rows: u64,
}

impl Written {
    /// Counts a row as it is written to the trace: a run of calls counts
    /// each call at the run's mean time, and only data ops move bytes.
    pub fn add(&mut self, row: &EventRow) {
        self.rows += 1;
        let bytes = if row.op.moves_data() && row.ret > 0 {
            row.ret as u64
        } else {
            0
        };
        self.ops
            .entry(row.op)
            .record_run(row.calls.max(1) as u64, bytes, row.dur_ns.max(0) as u64);
    }
}
