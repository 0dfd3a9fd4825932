//! Sequential versus random access, per stream. A stream is one file as seen by
//! one rank (or one process when the rank is unknown), so a DataLoader that
//! reopens a shard for every sample still counts as reading it in order. An
//! access is sequential when it starts where the stream's previous access
//! ended (or at offset 0 for a stream's first access), random otherwise.
//!
//! Parts of a trace tracked apart (row groups read in parallel) merge in time
//! order into exactly the counts of one pass: a part's accesses are judged
//! when it is merged, against where each stream stood after the parts before.

use std::cell::RefCell;

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
}

/// Owners (ranks, or processes) numbered densely; ranks, small and
/// non-negative, are found by index rather than by hashing.
#[derive(Debug, Clone, Default)]
struct Owners {
    by_rank: Vec<u32>,
    others: FxHashMap<i64, u32>,
    owner: Vec<i64>,
}

const NO_SLOT: u32 = u32::MAX;
const DENSE_OWNERS: i64 = 1 << 16;

impl Owners {
    #[inline(always)]
    fn slot(&mut self, owner: i64) -> u32 {
        if (0..DENSE_OWNERS).contains(&owner) {
            let i = owner as usize;
            if i >= self.by_rank.len() {
                self.by_rank.resize(i + 1, NO_SLOT);
            }
            if self.by_rank[i] == NO_SLOT {
                self.by_rank[i] = self.owner.len() as u32;
                self.owner.push(owner);
            }
            return self.by_rank[i];
        }
        let next = self.owner.len() as u32;
        let slot = *self.others.entry(owner).or_insert(next);
        if slot == next {
            self.owner.push(owner);
        }
        slot
    }
}

/// One data access, in the order of the rows (24 bytes: the sort moves them).
#[derive(Debug, Clone, Copy)]
struct Access {
    /// File id, a write flag and the owner slot: `file << 32 | write << 31 | slot`.
    key: u64,
    offset: i64,
    next: i64,
}

const WRITE_BIT: u64 = 1 << 31;
const SLOT_MASK: u64 = WRITE_BIT - 1;

impl Access {
    /// File id and owner slot: `file << 32 | slot`.
    fn stream(&self) -> u64 {
        self.key & !WRITE_BIT
    }

    fn write(&self) -> bool {
        self.key & WRITE_BIT != 0
    }
}

/// A stream's accesses in one part, all but the first already judged.
#[derive(Debug, Clone, Copy)]
struct PartStream {
    stream: u64,
    first_offset: i64,
    first_write: bool,
    next: i64,
}

/// Where each stream's next sequential access would start, by file id and
/// owner slot (a dense table: files × owners).
#[derive(Debug, Clone, Default)]
struct NextTable {
    owners: usize,
    next: Vec<i64>,
}

/// A stream not seen yet: its first access is sequential at offset 0.
const UNSEEN: i64 = i64::MIN;

impl NextTable {
    fn cell(&mut self, file: usize, owner: usize) -> &mut i64 {
        if owner >= self.owners {
            // Re-lay the table out for more owners per file.
            let wider = (owner + 1).next_power_of_two().max(8);
            let files = self.next.len().checked_div(self.owners).unwrap_or(0);
            let mut next = vec![UNSEEN; files * wider];
            for f in 0..files {
                next[f * wider..f * wider + self.owners]
                    .copy_from_slice(&self.next[f * self.owners..(f + 1) * self.owners]);
            }
            self.owners = wider;
            self.next = next;
        }
        let at = file * self.owners + owner;
        if at >= self.next.len() {
            self.next.resize((file + 1) * self.owners, UNSEEN);
        }
        &mut self.next[at]
    }
}

thread_local! {
    /// Access lists a worker thread has finished with, kept for its next
    /// part: a part's list and the sort's scratch are tens of MiB, and fresh
    /// ones cost page faults and zeroing every time.
    static SPARE: RefCell<Vec<Vec<Access>>> = const { RefCell::new(Vec::new()) };
}

fn spare_list() -> Vec<Access> {
    SPARE.with(|s| s.borrow_mut().pop()).unwrap_or_default()
}

fn give_back(mut v: Vec<Access>) {
    v.clear();
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < 2 {
            s.push(v);
        }
    });
}

const NO_ACCESS: Access = Access {
    key: 0,
    offset: 0,
    next: 0,
};

/// Sorts accesses by stream, keeping each stream's time order (LSD radix
/// sort over the bits the keys use: a few linear passes).
fn sort_by_stream(v: &mut Vec<Access>) {
    let max_file = v.iter().map(|a| a.key >> 32).max().unwrap_or(0);
    let max_slot = v.iter().map(|a| a.key & SLOT_MASK).max().unwrap_or(0);
    // Compact keys: file ids and owner slots are dense from 0.
    let slot_bits = 64 - max_slot.leading_zeros();
    let key = |a: &Access| ((a.key >> 32) << slot_bits) | (a.key & SLOT_MASK);
    let bits = 64 - ((max_file << slot_bits) | max_slot).leading_zeros();
    // As few passes as digits of at most 11 bits allow, their bits shared
    // out evenly: a pass scatters to 2^digit places at once, and fewer
    // places stay within the TLB (4,096 files of 64 ranks: two passes of
    // 9 bits rather than 11 and 7).
    const MAX_DIGIT: u32 = 11;
    let passes = bits.div_ceil(MAX_DIGIT);
    if passes == 0 {
        return;
    }
    let digit = bits.div_ceil(passes);
    let mask = (1u64 << digit) - 1;
    let n = v.len();
    let mut scratch = spare_list();
    if scratch.len() < n {
        scratch.resize(n, NO_ACCESS);
    }
    // Every pass's counts in one read of the list.
    let buckets = 1usize << digit;
    let mut count = vec![0usize; buckets * passes as usize];
    for a in v.iter() {
        let k = key(a);
        for p in 0..passes as usize {
            count[p * buckets + ((k >> (p as u32 * digit)) & mask) as usize] += 1;
        }
    }
    for (p, counts) in count.chunks_mut(buckets).enumerate() {
        let mut sum = 0;
        for c in counts.iter_mut() {
            let k = *c;
            *c = sum;
            sum += k;
        }
        let shift = p as u32 * digit;
        let to = &mut scratch[..n];
        for a in v.iter() {
            let d = ((key(a) >> shift) & mask) as usize;
            to[counts[d]] = *a;
            counts[d] += 1;
        }
        // The sorted pass becomes the input of the next one.
        std::mem::swap(v, &mut scratch);
        v.truncate(n);
    }
    give_back(scratch);
}

/// Accesses of a part are judged per stream on the thread that read the
/// part (sorted by stream, each stream in time order); the merge, in time
/// order, judges only each stream's first access of the part against where
/// the parts before left it.
#[derive(Debug, Clone, Default)]
pub struct AccessTracker {
    owners: Owners,
    /// This part's accesses, in row order, until [`AccessTracker::seal`].
    pending: Vec<Access>,
    /// This part's streams, after [`AccessTracker::seal`].
    streams: Vec<PartStream>,
    /// Of the merged trace: each stream's next offset.
    table: NextTable,
    pub read: AccessCounts,
    pub write: AccessCounts,
}

impl AccessTracker {
    /// Records a data access of `len` bytes at `offset` to file `file` by `owner`.
    #[inline]
    ///
    /// `calls` back-to-back accesses covering `len` bytes from `offset` (one
    /// access, or a run of calls, each after the last): all but the first are
    /// sequential, and counted here; the first is judged against its stream.
    pub fn record(
        &mut self,
        file: u32,
        owner: i64,
        offset: i64,
        len: i64,
        write: bool,
        calls: u64,
    ) {
        let within_run = calls.saturating_sub(1);
        if write {
            self.write.sequential += within_run;
        } else {
            self.read.sequential += within_run;
        }
        let slot = self.owners.slot(owner) as u64;
        self.pending.push(Access {
            key: (file as u64) << 32 | (write as u64) << 31 | (slot & SLOT_MASK),
            offset,
            next: offset + len.max(0),
        });
    }

    /// Room for `n` more accesses, so a part's list is not copied as it grows.
    pub fn reserve(&mut self, n: usize) {
        if self.pending.capacity() == 0 {
            self.pending = spare_list();
        }
        self.pending.reserve(n);
    }

    /// Judges this part's accesses stream by stream, leaving each stream's
    /// first access to the merge.
    pub fn seal(&mut self) {
        let mut pending = std::mem::take(&mut self.pending);
        sort_by_stream(&mut pending);
        let mut i = 0;
        while i < pending.len() {
            let first = pending[i];
            let mut next = first.next;
            i += 1;
            while i < pending.len() && pending[i].stream() == first.stream() {
                let a = pending[i];
                let c = if a.write() {
                    &mut self.write
                } else {
                    &mut self.read
                };
                // Without a branch: whether an access follows the last is
                // as good as random in a shuffled read.
                let sequential = (a.offset == next) as u64;
                c.sequential += sequential;
                c.random += 1 - sequential;
                next = a.next;
                i += 1;
            }
            self.streams.push(PartStream {
                stream: first.stream(),
                first_offset: first.offset,
                first_write: first.write(),
                next,
            });
        }
        give_back(pending);
    }

    /// Takes in the part that follows (in time); `file_ids` maps its file ids
    /// to this tracker's.
    pub fn merge(&mut self, mut other: AccessTracker, file_ids: &[u32]) {
        self.seal_into_table();
        other.seal();
        self.read.sequential += other.read.sequential;
        self.read.random += other.read.random;
        self.write.sequential += other.write.sequential;
        self.write.random += other.write.random;
        for s in &other.streams {
            let file = file_ids[(s.stream >> 32) as usize] as usize;
            let owner = self
                .owners
                .slot(other.owners.owner[(s.stream & 0xffff_ffff) as usize]);
            let cell = self.table.cell(file, owner as usize);
            let expected = if *cell == UNSEEN { 0 } else { *cell };
            let c = if s.first_write {
                &mut self.write
            } else {
                &mut self.read
            };
            c.count(s.first_offset == expected);
            *cell = s.next;
        }
    }

    /// Moves this tracker's own accesses (a tracker fed directly rather than
    /// merged) into its table.
    fn seal_into_table(&mut self) {
        if self.pending.is_empty() && self.streams.is_empty() {
            return;
        }
        let own = AccessTracker {
            owners: self.owners.clone(),
            pending: std::mem::take(&mut self.pending),
            streams: std::mem::take(&mut self.streams),
            ..Default::default()
        };
        let files = own
            .pending
            .iter()
            .map(|a| a.stream())
            .chain(own.streams.iter().map(|s| s.stream))
            .map(|k| (k >> 32) as u32 + 1)
            .max()
            .unwrap_or(0);
        let ids: Vec<u32> = (0..files).collect();
        self.merge(own, &ids);
    }

    /// Sequential and random counts of reads and of writes, every access judged.
    pub fn counts(&mut self) -> (AccessCounts, AccessCounts) {
        self.seal_into_table();
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
            whole.record(f, o, off, 4096, false, 1);
        }
        // Parts with their own file ids (reversed), merged in time order.
        let mut merged = AccessTracker::default();
        for part in accesses.chunks(41) {
            let mut p = AccessTracker::default();
            for &(f, o, off) in part {
                p.record(1 - f, o, off, 4096, false, 1);
            }
            merged.merge(p, &[1, 0]);
        }
        assert_eq!(merged.counts(), whole.counts());
        assert!(merged.read.sequential >= 150);
    }
}
