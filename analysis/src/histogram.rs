//! Request sizes in power-of-two buckets: bucket `b` holds sizes in
//! `[2^b, 2^(b+1))`, and size 0 has its own bucket. Fixed size, so memory does
//! not grow with the trace.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// 0 plus 2^0 .. 2^63.
const BUCKETS: usize = 65;

#[derive(Debug, Clone, PartialEq)]
pub struct SizeHistogram {
    counts: [u64; BUCKETS],
}

impl Default for SizeHistogram {
    fn default() -> Self {
        SizeHistogram {
            counts: [0; BUCKETS],
        }
    }
}

impl SizeHistogram {
    /// Bucket index of a size: 0 for 0, otherwise 1 + floor(log2(size)).
    #[inline]
    pub fn bucket(size: u64) -> usize {
        if size == 0 {
            0
        } else {
            64 - size.leading_zeros() as usize
        }
    }

    /// Smallest size that falls into bucket `b`.
    pub fn bucket_floor(b: usize) -> u64 {
        if b == 0 {
            0
        } else {
            1u64 << (b - 1)
        }
    }

    #[inline]
    pub fn add(&mut self, size: u64) {
        self.counts[Self::bucket(size)] += 1;
    }

    /// `calls` requests of `size` bytes each (the calls of a run).
    #[inline]
    pub fn add_calls(&mut self, size: u64, calls: u64) {
        self.counts[Self::bucket(size)] += calls;
    }

    pub fn merge(&mut self, other: &SizeHistogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Non-empty buckets as (smallest size in the bucket, count), smallest first.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(b, &c)| (Self::bucket_floor(b), c))
    }
}

/// As a JSON object `{ "<bucket floor in bytes>": count }`, which DuckDB and
/// jq users can join on directly.
impl Serialize for SizeHistogram {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (floor, count) in self.buckets() {
            m.serialize_entry(&floor.to_string(), &count)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(SizeHistogram::bucket(0), 0);
        assert_eq!(SizeHistogram::bucket(1), 1);
        assert_eq!(SizeHistogram::bucket(4095), 12);
        assert_eq!(SizeHistogram::bucket(4096), 13);
        assert_eq!(SizeHistogram::bucket_floor(13), 4096);
        let mut h = SizeHistogram::default();
        for s in [4096, 5000, 8191, 8192, 0] {
            h.add(s);
        }
        let b: Vec<_> = h.buckets().collect();
        assert_eq!(b, vec![(0, 1), (4096, 3), (8192, 1)]);
    }
}
