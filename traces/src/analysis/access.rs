//! Sequential versus random access, per stream. A stream is one file as seen by
//! one rank (or one process when the rank is unknown), so a DataLoader that
//! reopens a shard for every sample still counts as reading it in order. An
//! access is sequential when it starts where the stream's previous access
//! ended (or at offset 0 for a stream's first access), random otherwise.
//!
//! Parts of a trace tracked apart (row groups read in parallel) merge in time
//! order into exactly the counts of one pass: a part leaves each stream's
//! first access to be judged by the parts before it.

use std::collections::hash_map::Entry;

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

    fn count(&mut self, sequential: bool) {
        if sequential {
            self.sequential += 1;
        } else {
            self.random += 1;
        }
    }

    fn add(&mut self, other: AccessCounts) {
        self.sequential += other.sequential;
        self.random += other.random;
    }
}

/// A stream's first access in a part, and where its next sequential access
/// would start.
#[derive(Debug, Clone, Copy)]
struct Stream {
    first_offset: i64,
    first_write: bool,
    next: i64,
}

/// Streams keyed by (file id, owner); memory grows with files × ranks only.
#[derive(Debug, Clone, Default)]
pub struct AccessTracker {
    streams: FxHashMap<(u32, i64), Stream>,
    pub read: AccessCounts,
    pub write: AccessCounts,
}

impl AccessTracker {
    /// Records a data access of `len` bytes at `offset` to file `file` by `owner`.
    #[inline]
    pub fn record(&mut self, file: u32, owner: i64, offset: i64, len: i64, write: bool) {
        let next = offset + len.max(0);
        match self.streams.entry((file, owner)) {
            Entry::Occupied(mut e) => {
                let s = e.get_mut();
                let c = if write {
                    &mut self.write
                } else {
                    &mut self.read
                };
                c.count(s.next == offset);
                s.next = next;
            }
            Entry::Vacant(e) => {
                e.insert(Stream {
                    first_offset: offset,
                    first_write: write,
                    next,
                });
            }
        }
    }

    /// Takes in the tracker of the part that follows; `file_ids` maps its
    /// file ids to this tracker's.
    pub fn merge(&mut self, other: AccessTracker, file_ids: &[u32]) {
        self.read.add(other.read);
        self.write.add(other.write);
        for ((file, owner), s) in other.streams {
            let key = (file_ids[file as usize], owner);
            let c = if s.first_write {
                &mut self.write
            } else {
                &mut self.read
            };
            match self.streams.get_mut(&key) {
                Some(mine) => {
                    c.count(mine.next == s.first_offset);
                    mine.next = s.next;
                }
                None => {
                    c.count(s.first_offset == 0);
                    self.streams.insert(key, s);
                }
            }
        }
    }

    /// The counts of the whole trace once every part is merged: streams whose
    /// first access no earlier part judged count as the stream's start.
    pub fn counts(&self) -> (AccessCounts, AccessCounts) {
        (self.read, self.write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_merged_in_order_count_like_one_pass() {
        // Two streams reading 4 KiB blocks, one in order, one jumping.
        let accesses: Vec<(u32, i64, i64)> = (0..300)
            .map(|i| {
                if i % 2 == 0 {
                    (0, 7, (i / 2) * 4096)
                } else {
                    (1, 8, ((i * 37) % 50) * 4096)
                }
            })
            .collect();
        let mut whole = AccessTracker::default();
        for &(f, o, off) in &accesses {
            whole.record(f, o, off, 4096, false);
        }
        // Parts with their own file ids (reversed), merged in time order.
        let mut merged = AccessTracker::default();
        for part in accesses.chunks(41) {
            let mut p = AccessTracker::default();
            for &(f, o, off) in part {
                p.record(1 - f, o, off, 4096, false);
            }
            merged.merge(p, &[1, 0]);
        }
        // One pass judges each stream's very first access too.
        let mut first_pass = AccessTracker::default();
        first_pass.merge(whole, &[0, 1]);
        assert_eq!(merged.counts(), first_pass.counts());
        assert!(merged.read.sequential >= 150);
    }
}
