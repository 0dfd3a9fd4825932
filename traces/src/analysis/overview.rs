//! The shape of a trace over time: how long it ran, the bytes it moved, its
//! bandwidth per window and peaks, and its phases. This is what `phases`,
//! `plot` and `compare` need, read from six columns; `summary` computes the
//! same from its own fuller pass. Both run the trace through
//! [`crate::format::scan`]: row groups tallied on every core, merged in time
//! order.

use serde::Serialize;

use crate::analysis::phases::{self, Phase};
use crate::analysis::tally::{Depth, Tally};
use crate::analysis::timeline::{Timeline, BASE_WINDOW_NS};
use crate::error::TraceResult;
use crate::format::reader::TraceReader;
use crate::format::scan::{scan, Fold, ScanBatch};
use crate::format::schema::{Op, COL_TS};

/// What a trace did over time.
#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    pub events: u64,
    /// From the first call's start to the last call's end.
    pub duration_s: f64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Over 1 s windows aligned to the first event.
    pub peak_read_gib_s: f64,
    pub peak_write_gib_s: f64,
    /// Over 100 ms windows.
    pub peak_read_gib_s_100ms: f64,
    pub peak_write_gib_s_100ms: f64,
    pub phases: Vec<Phase>,
    /// Bytes per 100 ms window, for plots.
    #[serde(skip)]
    pub timeline: Timeline,
}

impl Overview {
    /// One parallel pass over the columns the overview needs.
    pub fn compute(reader: &TraceReader) -> TraceResult<Overview> {
        let mut t = tally(reader, Depth::Overview)?;
        Ok(Overview::from_tally(&mut t))
    }

    /// The overview of a merged tally (it pads the tally's timeline to the
    /// trace's end and finishes its activity).
    pub fn from_tally(t: &mut Tally) -> Overview {
        t.activity.finish();
        let phases = phases::detect(&t.activity);
        let (first, end) = if t.activity.is_empty() {
            (t.timeline.origin_ns, t.timeline.origin_ns)
        } else {
            (t.activity.first_ns, t.activity.end_ns)
        };
        if t.events > 0 {
            t.timeline.close(end);
        }
        let (peak_read_100ms, peak_write_100ms) = t.timeline.peaks_gib_s(1);
        let per_second = (1_000_000_000 / BASE_WINDOW_NS) as usize;
        let (peak_read, peak_write) = t.timeline.peaks_gib_s(per_second);
        Overview {
            events: t.events,
            duration_s: (end - first).max(0) as f64 / 1e9,
            read_bytes: t.op(Op::Read).bytes,
            write_bytes: t.op(Op::Write).bytes,
            peak_read_gib_s: peak_read,
            peak_write_gib_s: peak_write,
            peak_read_gib_s_100ms: peak_read_100ms,
            peak_write_gib_s_100ms: peak_write_100ms,
            phases,
            timeline: t.timeline.clone(),
        }
    }
}

/// The first `ts` of the trace, which windows are aligned to: from the
/// segment footers, or (a foreign trace without statistics) from a scan of
/// the `ts` column.
pub fn origin_ns(reader: &TraceReader) -> TraceResult<i64> {
    if let Some((first, _)) = reader.ts_span_ns() {
        return Ok(first);
    }
    struct First(i64);
    impl Fold for First {
        fn add(&mut self, b: &ScanBatch) {
            self.0 = b.ts().iter().copied().fold(self.0, i64::min);
        }
    }
    let mut first = i64::MAX;
    scan(
        reader,
        &[COL_TS],
        || First(i64::MAX),
        |m| first = first.min(m.0),
    )?;
    Ok(if first == i64::MAX { 0 } else { first })
}

/// Every row group of the trace tallied at `depth` on every core, merged in
/// time order.
pub fn tally(reader: &TraceReader, depth: Depth) -> TraceResult<Tally> {
    let origin = origin_ns(reader)?;
    let mut total = Tally::new(depth, origin, BASE_WINDOW_NS);
    scan(
        reader,
        depth.columns(),
        || Tally::new(depth, origin, BASE_WINDOW_NS),
        |part| total.merge(part),
    )?;
    Ok(total)
}
