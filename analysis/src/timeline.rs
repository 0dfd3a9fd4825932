//! Bytes moved per fixed time window, from the first event on: the view of
//! "how busy was storage when" that peaks and plots share. Bytes are counted
//! at the entry `ts` of the call that moved them. Windows are aligned to the
//! first event of the whole trace, so timelines of parts of a trace (row
//! groups read in parallel) add up window by window.

use serde::Serialize;

/// Resolution of the timeline that summary and plots start from.
pub const BASE_WINDOW_NS: i64 = 100_000_000;

use iorepro_format::units::GIB;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Timeline {
    /// `ts` of the first event of the trace (any op), in Unix ns.
    pub origin_ns: i64,
    pub window_ns: i64,
    /// Bytes read and written per window, from window `first` on.
    read: Vec<u64>,
    write: Vec<u64>,
    first: usize,
    /// The window last added to and its span, so rows in time order cost a compare.
    #[serde(skip)]
    cursor: (usize, i64, i64),
}

impl Timeline {
    pub fn new(origin_ns: i64, window_ns: i64) -> Self {
        Timeline {
            origin_ns,
            window_ns: window_ns.max(1),
            read: Vec::new(),
            write: Vec::new(),
            first: 0,
            cursor: (0, i64::MAX, i64::MIN),
        }
    }

    /// Index of the window holding `ts`, grown into the vectors.
    #[inline(always)]
    fn slot(&mut self, ts: i64) -> usize {
        let (at, lo, hi) = self.cursor;
        if lo <= ts && ts < hi {
            return at;
        }
        self.move_to(ts)
    }

    /// [`Timeline::slot`] for a `ts` outside the window last added to
    /// (once a window for rows in time order): kept out of the row loops.
    #[cold]
    #[inline(never)]
    fn move_to(&mut self, ts: i64) -> usize {
        let w = ((ts - self.origin_ns).max(0) / self.window_ns) as usize;
        if self.read.is_empty() {
            self.first = w;
        }
        if w < self.first {
            let grow = self.first - w;
            self.read.splice(0..0, std::iter::repeat_n(0, grow));
            self.write.splice(0..0, std::iter::repeat_n(0, grow));
            self.first = w;
        }
        let at = w - self.first;
        if at >= self.read.len() {
            self.read.resize(at + 1, 0);
            self.write.resize(at + 1, 0);
        }
        let lo = self.origin_ns + w as i64 * self.window_ns;
        self.cursor = (at, lo, lo + self.window_ns);
        at
    }

    #[inline]
    pub fn add_read(&mut self, ts: i64, bytes: u64) {
        let s = self.slot(ts);
        self.read[s] += bytes;
    }

    #[inline]
    pub fn add_write(&mut self, ts: i64, bytes: u64) {
        let s = self.slot(ts);
        self.write[s] += bytes;
    }

    /// Adds another part's windows (same origin and width) to these.
    pub fn merge(&mut self, other: &Timeline) {
        if other.read.is_empty() {
            return;
        }
        debug_assert_eq!(
            (self.origin_ns, self.window_ns),
            (other.origin_ns, other.window_ns)
        );
        let start = self.origin_ns + other.first as i64 * self.window_ns;
        let end = self.origin_ns + (other.first + other.read.len() - 1) as i64 * self.window_ns;
        self.slot(start);
        self.slot(end);
        let offset = other.first - self.first;
        for (i, (&r, &w)) in other.read.iter().zip(&other.write).enumerate() {
            self.read[offset + i] += r;
            self.write[offset + i] += w;
        }
    }

    /// Pads with empty windows from the first event up to `end_ns`, so quiet
    /// stretches at either end show.
    pub fn close(&mut self, end_ns: i64) {
        self.slot(self.origin_ns);
        self.slot(end_ns.max(self.origin_ns));
        self.cursor = (0, i64::MAX, i64::MIN);
    }

    pub fn len(&self) -> usize {
        self.read.len()
    }

    pub fn is_empty(&self) -> bool {
        self.read.is_empty()
    }

    /// Bytes read per window, from the first event's window on (after [`Timeline::close`]).
    pub fn read(&self) -> &[u64] {
        &self.read
    }

    pub fn write(&self) -> &[u64] {
        &self.write
    }

    pub fn window_s(&self) -> f64 {
        self.window_ns as f64 / 1e9
    }

    /// Merges `factor` consecutive windows into one.
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
            first: self.first / factor,
            cursor: (0, i64::MAX, i64::MIN),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_add_up_window_by_window() {
        let calls: Vec<(i64, u64, bool)> = (0..1000)
            .map(|i| (5 + i * 7_919_993 % 3_000_000_000, i as u64, i % 3 == 0))
            .collect();
        let origin = 5;
        let mut whole = Timeline::new(origin, BASE_WINDOW_NS);
        for &(t, b, w) in &calls {
            if w {
                whole.add_write(t, b)
            } else {
                whole.add_read(t, b)
            }
        }
        whole.close(3_000_000_000);
        let mut merged = Timeline::new(origin, BASE_WINDOW_NS);
        for part in calls.chunks(97).rev() {
            let mut p = Timeline::new(origin, BASE_WINDOW_NS);
            for &(t, b, w) in part {
                if w {
                    p.add_write(t, b)
                } else {
                    p.add_read(t, b)
                }
            }
            merged.merge(&p);
        }
        merged.close(3_000_000_000);
        assert_eq!(merged.read(), whole.read());
        assert_eq!(merged.write(), whole.write());
        assert_eq!(whole.len(), 30);
    }
}
