//! What a replay's calls (or a bucket's requests) did, by kind: the live
//! tally's calls, bytes and latency that both binaries share, with the
//! replay's own failures beside them. Kept by whatever makes the calls,
//! merged and shown by the report and the live figures.

use iorepro_telemetry::tally::{KindFigures, OpFigures};

/// One op kind's (or request kind's) figures: the live tally's calls, bytes
/// and latency, and how many calls failed or fared otherwise than traced.
#[derive(Debug, Clone, Default)]
pub struct OpStats {
    pub figures: OpFigures,
    /// Calls that failed (as traced, or not).
    pub failed: u64,
    /// Calls whose success or failure was not the traced call's.
    pub differed: u64,
}

impl OpStats {
    pub fn record(&mut self, bytes: u64, latency_ns: u64) {
        self.figures.record(bytes, latency_ns);
    }

    pub fn note_result(&mut self, succeeded: bool, differed: bool) {
        self.failed += u64::from(!succeeded);
        self.differed += u64::from(differed);
    }
}

impl KindFigures for OpStats {
    fn figures(&self) -> &OpFigures {
        &self.figures
    }

    fn merge(&mut self, other: &OpStats) {
        self.figures.merge(&other.figures);
        self.failed += other.failed;
        self.differed += other.differed;
    }
}
