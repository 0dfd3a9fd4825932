//! The read burst: the bytes a rank read in each window of 100 ms, so the
//! report can give the peak rate the storage served, in all and per rank.
//!
//! Windows are aligned to multiples of their width in Unix time, so the
//! ranks' timelines (threads of one process, or processes on several
//! nodes as far as their clocks agree) add up window by window. A rank
//! keeps at most [`MAX_WINDOWS`]; a longer replay doubles the width, and
//! the report names the width its peak is over.

use serde::{Deserialize, Serialize};

/// The narrowest window: 100 ms.
pub const WINDOW_NS: u64 = 100_000_000;
/// Windows a rank keeps before it doubles their width (8 KiB a rank).
pub const MAX_WINDOWS: usize = 1024;

/// Bytes read per window, from the window that holds `origin_ns`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReadTimeline {
    /// The first window's start (Unix ns, a multiple of `window_ns`).
    pub origin_ns: i64,
    /// The windows' width (0 until the first read).
    pub window_ns: u64,
    pub bytes: Vec<u64>,
}

impl ReadTimeline {
    /// `bytes` read at `unix_ns`.
    pub fn add(&mut self, unix_ns: i64, bytes: u64) {
        if bytes == 0 {
            return;
        }
        if self.window_ns == 0 {
            self.window_ns = WINDOW_NS;
            self.origin_ns = floor_to(unix_ns, WINDOW_NS);
        }
        // A clock stepped back by a moment counts in the first window.
        let mut at = ((unix_ns - self.origin_ns).max(0) as u64 / self.window_ns) as usize;
        while at >= MAX_WINDOWS {
            self.widen();
            at = ((unix_ns - self.origin_ns).max(0) as u64 / self.window_ns) as usize;
        }
        if at >= self.bytes.len() {
            self.bytes.resize(at + 1, 0);
        }
        self.bytes[at] += bytes;
    }

    /// Twice the width: each pair of windows becomes one.
    fn widen(&mut self) {
        *self = self.at_width(self.window_ns * 2);
    }

    /// The same reads in windows of `width` (a multiple of this one's).
    fn at_width(&self, width: u64) -> ReadTimeline {
        let origin = floor_to(self.origin_ns, width);
        let mut out = ReadTimeline {
            origin_ns: origin,
            window_ns: width,
            bytes: Vec::new(),
        };
        for (i, b) in self.bytes.iter().enumerate() {
            let start = self.origin_ns + (i as u64 * self.window_ns) as i64;
            let at = ((start - origin) as u64 / width) as usize;
            if at >= out.bytes.len() {
                out.bytes.resize(at + 1, 0);
            }
            out.bytes[at] += b;
        }
        out
    }

    /// The busiest window's rate, bytes per second.
    pub fn peak_bytes_s(&self) -> f64 {
        match self.window_ns {
            0 => 0.0,
            w => self.bytes.iter().copied().max().unwrap_or(0) as f64 * 1e9 / w as f64,
        }
    }

    /// Every timeline added window by window, at the widest of their widths.
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a ReadTimeline>) -> ReadTimeline {
        let all: Vec<&ReadTimeline> = all.into_iter().filter(|t| t.window_ns > 0).collect();
        let Some(width) = all.iter().map(|t| t.window_ns).max() else {
            return ReadTimeline::default();
        };
        let origin = all
            .iter()
            .map(|t| floor_to(t.origin_ns, width))
            .min()
            .unwrap_or(0);
        let mut out = ReadTimeline {
            origin_ns: origin,
            window_ns: width,
            bytes: Vec::new(),
        };
        for t in all {
            let t = t.at_width(width);
            let shift = ((t.origin_ns - origin) as u64 / width) as usize;
            if shift + t.bytes.len() > out.bytes.len() {
                out.bytes.resize(shift + t.bytes.len(), 0);
            }
            for (i, b) in t.bytes.iter().enumerate() {
                out.bytes[shift + i] += b;
            }
        }
        out
    }
}

/// `t` down to a multiple of `width`.
fn floor_to(t: i64, width: u64) -> i64 {
    t.div_euclid(width as i64) * width as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn two_ranks_add_up_window_by_window() {
        let t0 = 1_700_000_000_000 * MS;
        let mut a = ReadTimeline::default();
        let mut b = ReadTimeline::default();
        a.add(t0 + 10 * MS, 100);
        a.add(t0 + 150 * MS, 50);
        b.add(t0 + 90 * MS, 200);
        b.add(t0 + 250 * MS, 10);
        assert_eq!(a.peak_bytes_s(), 1000.0);
        let all = ReadTimeline::sum([&a, &b]);
        assert_eq!(all.bytes, vec![300, 50, 10]);
        assert_eq!(all.peak_bytes_s(), 3000.0);
    }

    #[test]
    fn a_long_replay_widens_its_windows_and_keeps_every_byte() {
        let t0 = 1_700_000_000_000 * MS;
        let mut a = ReadTimeline::default();
        for i in 0..3000 {
            a.add(t0 + i * 100 * MS, 1);
        }
        assert!(a.bytes.len() <= MAX_WINDOWS, "{}", a.bytes.len());
        assert_eq!(a.window_ns, 4 * WINDOW_NS);
        assert_eq!(a.bytes.iter().sum::<u64>(), 3000);
        let mut b = ReadTimeline::default();
        b.add(t0, 7);
        let all = ReadTimeline::sum([&a, &b]);
        assert_eq!(all.window_ns, 4 * WINDOW_NS);
        assert_eq!(all.bytes.iter().sum::<u64>(), 3007);
    }
}
