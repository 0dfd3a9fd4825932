//! Bytes moved per fixed time window, from the first event on: the one view of
//! "how busy was storage when" that peaks, phases, plots and comparisons share.
//! Bytes are counted at the entry `ts` of the call that moved them.

use rustc_hash::FxHashMap;
use serde::Serialize;

/// Resolution of the timeline that summary, phases and plots start from.
pub const BASE_WINDOW_NS: i64 = 100_000_000;

/// Phase detection works on at most this many windows; longer traces are
/// coarsened, so a week-long capture costs the same as a short one.
pub const MAX_PHASE_WINDOWS: usize = 20_000;

const GIB: f64 = (1u64 << 30) as f64;

/// The span of a window without calls.
pub const NO_SPAN: (i64, i64) = (i64::MAX, i64::MIN);

#[inline]
fn widen(span: &mut (i64, i64), ts: i64, dur: i64) {
    span.0 = span.0.min(ts);
    span.1 = span.1.max(ts + dur.max(0));
}

/// The smallest span holding all of `spans`.
pub fn join_spans(spans: &[(i64, i64)]) -> (i64, i64) {
    spans
        .iter()
        .fold(NO_SPAN, |a, b| (a.0.min(b.0), a.1.max(b.1)))
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Timeline {
    /// `ts` of the first event of the trace (any op), in Unix ns.
    pub origin_ns: i64,
    pub window_ns: i64,
    pub read: Vec<u64>,
    pub write: Vec<u64>,
    /// Distinct ranks (or processes, when ranks are unknown) that started a
    /// write in the window: a checkpoint is many writers at once, a log is one.
    pub writers: Vec<u32>,
    /// Earliest start and latest end (`ts + dur_ns`) of the reads, and of the
    /// writes, of each window (`i64::MAX` / `i64::MIN` when none), so phase
    /// edges are exact rather than rounded to windows.
    pub read_span: Vec<(i64, i64)>,
    pub write_span: Vec<(i64, i64)>,
    /// `ts` of the last event, so idle time at the end is part of the timeline.
    pub end_ns: i64,
    /// Last window each writer wrote in, to count writers once per window.
    #[serde(skip)]
    last_write_slot: FxHashMap<i64, usize>,
}

impl Timeline {
    pub fn new(window_ns: i64) -> Self {
        Timeline {
            origin_ns: i64::MIN,
            window_ns,
            read: Vec::new(),
            write: Vec::new(),
            writers: Vec::new(),
            read_span: Vec::new(),
            write_span: Vec::new(),
            end_ns: i64::MIN,
            last_write_slot: FxHashMap::default(),
        }
    }

    /// Marks that an event happened at `ts` (any op): starts and stretches the timeline.
    #[inline]
    pub fn touch(&mut self, ts: i64) {
        if self.origin_ns == i64::MIN {
            self.origin_ns = ts;
        }
        if ts > self.end_ns {
            self.end_ns = ts;
        }
    }

    #[inline]
    pub fn slot(&mut self, ts: i64) -> usize {
        let slot = ((ts - self.origin_ns).max(0) / self.window_ns) as usize;
        if self.read.len() <= slot {
            self.read.resize(slot + 1, 0);
            self.write.resize(slot + 1, 0);
            self.writers.resize(slot + 1, 0);
            self.read_span.resize(slot + 1, NO_SPAN);
            self.write_span.resize(slot + 1, NO_SPAN);
        }
        slot
    }

    /// Adds bytes read by a call at `ts` lasting `dur` (after [`Timeline::touch`]
    /// of the first event).
    #[inline]
    pub fn add_read(&mut self, ts: i64, dur: i64, bytes: u64) {
        let s = self.slot(ts);
        self.read[s] += bytes;
        widen(&mut self.read_span[s], ts, dur);
    }

    /// Adds bytes written at `ts` by `writer` (a rank, or a process id when
    /// the rank is unknown).
    #[inline]
    pub fn add_write(&mut self, ts: i64, dur: i64, bytes: u64, writer: i64) {
        let s = self.slot(ts);
        self.write[s] += bytes;
        widen(&mut self.write_span[s], ts, dur);
        let last = self.last_write_slot.entry(writer).or_insert(usize::MAX);
        if *last != s {
            *last = s;
            self.writers[s] += 1;
        }
    }

    pub fn len(&self) -> usize {
        self.read.len()
    }

    pub fn is_empty(&self) -> bool {
        self.read.is_empty()
    }

    /// Seconds from the first to the last event.
    pub fn duration_s(&self) -> f64 {
        if self.origin_ns == i64::MIN {
            0.0
        } else {
            (self.end_ns - self.origin_ns) as f64 / 1e9
        }
    }

    /// Pads with empty windows up to the last event, so quiet tails show.
    pub fn close(&mut self) {
        if self.origin_ns != i64::MIN {
            let end = self.end_ns;
            self.slot(end);
        }
    }

    pub fn window_s(&self) -> f64 {
        self.window_ns as f64 / 1e9
    }

    /// Merges `factor` consecutive windows into one (counts of writers are
    /// summed, an upper bound of distinct writers).
    pub fn coarsen(&self, factor: usize) -> Timeline {
        let factor = factor.max(1);
        let fold = |v: &[u64]| {
            v.chunks(factor)
                .map(|c| c.iter().sum())
                .collect::<Vec<u64>>()
        };
        Timeline {
            origin_ns: self.origin_ns,
            window_ns: self.window_ns * factor as i64,
            read: fold(&self.read),
            write: fold(&self.write),
            writers: self
                .writers
                .chunks(factor)
                .map(|c| c.iter().copied().max().unwrap_or(0))
                .collect(),
            read_span: self.read_span.chunks(factor).map(join_spans).collect(),
            write_span: self.write_span.chunks(factor).map(join_spans).collect(),
            end_ns: self.end_ns,
            last_write_slot: FxHashMap::default(),
        }
    }

    /// Coarsened so that it has at most `max` windows.
    pub fn at_most(&self, max: usize) -> Timeline {
        if self.len() <= max {
            self.clone()
        } else {
            self.coarsen(self.len().div_ceil(max))
        }
    }

    /// Highest read and write GiB/s over windows of `factor` base windows,
    /// aligned to the first event.
    pub fn peaks_gib_s(&self, factor: usize) -> (f64, f64) {
        let secs = self.window_s() * factor as f64;
        let peak = |v: &[u64]| {
            v.chunks(factor.max(1))
                .map(|c| c.iter().sum::<u64>())
                .max()
                .unwrap_or(0) as f64
                / GIB
                / secs
        };
        (peak(&self.read), peak(&self.write))
    }
}
