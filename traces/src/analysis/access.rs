//! Sequential versus random access, per stream. A stream is one file as seen by
//! one rank (or one process when the rank is unknown), so a DataLoader that
//! reopens a shard for every sample still counts as reading it in order. An
//! access is sequential when it starts where the stream's previous access
//! ended (or at offset 0 for a stream's first access), random otherwise.

use rustc_hash::FxHashMap;
use serde::Serialize;

#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct AccessCounts {
    pub sequential: u64,
    pub random: u64,
}

impl AccessCounts {
    /// Share of sequential accesses (0 when there were none).
    pub fn sequential_share(&self) -> f64 {
        let n = self.sequential + self.random;
        if n == 0 {
            0.0
        } else {
            self.sequential as f64 / n as f64
        }
    }
}

/// Next expected offset per stream; memory grows with files × ranks only.
#[derive(Default)]
pub struct AccessTracker {
    next_offset: FxHashMap<(u32, i64), i64>,
    pub read: AccessCounts,
    pub write: AccessCounts,
}

impl AccessTracker {
    /// Records a data access of `len` bytes at `offset` to file `file` by `owner`.
    #[inline]
    /// `calls` back-to-back accesses covering `len` bytes from `offset` (one
    /// access, or a run of calls, each after the last: all but the first are
    /// sequential).
    pub fn record(
        &mut self,
        file: u32,
        owner: i64,
        offset: i64,
        len: i64,
        write: bool,
        calls: u64,
    ) {
        let next = self.next_offset.entry((file, owner)).or_insert(0);
        let sequential = *next == offset;
        *next = offset + len.max(0);
        let c = if write {
            &mut self.write
        } else {
            &mut self.read
        };
        if sequential {
            c.sequential += 1;
        } else {
            c.random += 1;
        }
        c.sequential += calls.saturating_sub(1);
    }
}
