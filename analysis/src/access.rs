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

/// A list from the spares, with the length (and the stale items) it had:
/// the grouping's scratch is written over before it is read, so it need not
/// be zeroed again for every part.
fn spare_scratch() -> Vec<Access> {
    SPARE.with(|s| s.borrow_mut().pop()).unwrap_or_default()
}

/// An empty list from the spares.
fn spare_list() -> Vec<Access> {
    let mut v = spare_scratch();
    v.clear();
    v
}

fn give_back(v: Vec<Access>) {
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

/// A part's stream keys in as few bits as they need: file ids and owner
/// slots are dense from 0, so `file << slot_bits | slot` is small.
struct CompactKeys {
    slot_bits: u32,
    bits: u32,
}

impl CompactKeys {
    /// The widths of keys whose bits, ORed together, are `any`: an OR has
    /// the bit length of the largest, which is all the widths need, and is
    /// kept as the accesses are recorded rather than found in a pass.
    fn covering(any: u64) -> Self {
        let (files, slots) = (any >> 32, any & SLOT_MASK);
        let slot_bits = 64 - slots.leading_zeros();
        let bits = 64 - ((files << slot_bits) | slots).leading_zeros();
        CompactKeys { slot_bits, bits }
    }

    /// The compact key of a stream (`file << 32 | slot`).
    #[inline(always)]
    fn of_stream(&self, stream: u64) -> u64 {
        ((stream >> 32) << self.slot_bits) | (stream & SLOT_MASK)
    }
}

/// The high bits of the compact key the accesses are grouped by, in one
/// scattering pass: 512 groups stay within the TLB while scattering, and
/// leave each group small enough to judge in cache.
const GROUP_BITS: u32 = 9;
/// The most low bits a group's streams are found by in a dense table (16
/// KiB); a part with more (a great many files and owners) uses a hash map.
const DENSE_LOW_BITS: u32 = 12;
const NO_STREAM: u32 = u32::MAX;

/// Groups accesses by the high bits of their compact key into `into`
/// (one stable scattering pass: each stream's accesses stay in time order,
/// and a stream's accesses all land in one group). Returns where each
/// group starts, and ends (the last entry).
fn group_by_high_bits(
    v: &[Access],
    keys: &CompactKeys,
    low_bits: u32,
    into: &mut Vec<Access>,
) -> Vec<usize> {
    let groups = 1usize << (keys.bits - low_bits);
    let group = |a: &Access| (keys.of_stream(a.stream()) >> low_bits) as usize;
    let mut starts = vec![0usize; groups + 1];
    for a in v {
        starts[group(a) + 1] += 1;
    }
    for g in 0..groups {
        starts[g + 1] += starts[g];
    }
    if into.len() < v.len() {
        into.resize(v.len(), NO_ACCESS);
    }
    let mut at = starts.clone();
    for a in v {
        let g = group(a);
        into[at[g]] = *a;
        at[g] += 1;
    }
    starts
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
    /// The keys of `pending` ORed together (see [`CompactKeys::covering`]).
    pending_bits: u64,
    /// This part's streams, after [`AccessTracker::seal`].
    streams: Vec<PartStream>,
    /// Of the merged trace: each stream's next offset.
    table: NextTable,
    pub read: AccessCounts,
    pub write: AccessCounts,
}

impl AccessTracker {
    /// Records a data access of `len` bytes at `offset` to file `file` by `owner`.
    ///
    /// `calls` back-to-back accesses covering `len` bytes from `offset` (one
    /// access, or a run of calls, each after the last): all but the first are
    /// sequential, and counted here; the first is judged against its stream.
    #[inline(always)]
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
        let key = (file as u64) << 32 | (write as u64) << 31 | (slot & SLOT_MASK);
        self.pending_bits |= key;
        self.pending.push(Access {
            key,
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
    /// first access to the merge. The accesses are grouped by the high bits
    /// of their stream, and each group judged on its own, its streams found
    /// by the low bits: one scattering pass over the list in memory (after
    /// the read that counts the groups), the rest in cache.
    pub fn seal(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        if pending.is_empty() {
            give_back(pending);
            return;
        }
        let keys = CompactKeys::covering(std::mem::take(&mut self.pending_bits) & !WRITE_BIT);
        let low_bits = keys.bits.saturating_sub(GROUP_BITS);
        let mut grouped = spare_scratch();
        let starts = group_by_high_bits(&pending, &keys, low_bits, &mut grouped);
        give_back(pending);
        let low_mask = (1u64 << low_bits) - 1;
        let dense = low_bits <= DENSE_LOW_BITS;
        let mut table = vec![NO_STREAM; if dense { 1 << low_bits } else { 0 }];
        let mut sparse: FxHashMap<u64, u32> = FxHashMap::default();
        for bounds in starts.windows(2) {
            let first_stream = self.streams.len();
            for a in &grouped[bounds[0]..bounds[1]] {
                let low = keys.of_stream(a.stream()) & low_mask;
                let at = if dense {
                    &mut table[low as usize]
                } else {
                    sparse.entry(low).or_insert(NO_STREAM)
                };
                if *at == NO_STREAM {
                    *at = self.streams.len() as u32;
                    self.streams.push(PartStream {
                        stream: a.stream(),
                        first_offset: a.offset,
                        first_write: a.write(),
                        next: a.next,
                    });
                    continue;
                }
                let s = &mut self.streams[*at as usize];
                let c = if a.write() {
                    &mut self.write
                } else {
                    &mut self.read
                };
                // Without a branch: whether an access follows the last is
                // as good as random in a shuffled read.
                let sequential = (a.offset == s.next) as u64;
                c.sequential += sequential;
                c.random += 1 - sequential;
                s.next = a.next;
            }
            // The next group's streams are others: forget this one's.
            if dense {
                for s in &self.streams[first_stream..] {
                    table[(keys.of_stream(s.stream) & low_mask) as usize] = NO_STREAM;
                }
            } else {
                sparse.clear();
            }
        }
        give_back(grouped);
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
        // The part's owner slots as this tracker's, looked up once.
        let owners: Vec<u32> = other
            .owners
            .owner
            .iter()
            .map(|&o| self.owners.slot(o))
            .collect();
        for s in &other.streams {
            let file = file_ids[(s.stream >> 32) as usize] as usize;
            let owner = owners[(s.stream & 0xffff_ffff) as usize];
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
            pending_bits: std::mem::take(&mut self.pending_bits),
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

    /// Each access judged against the one before it in its stream, the
    /// obvious way: what the grouped judgement must agree with.
    fn judged_one_by_one(accesses: &[(u32, i64, i64, bool)]) -> (AccessCounts, AccessCounts) {
        let mut next: std::collections::HashMap<(u32, i64), i64> = Default::default();
        let (mut read, mut write) = (AccessCounts::default(), AccessCounts::default());
        for &(file, owner, offset, is_write) in accesses {
            let expected = next.insert((file, owner), offset + 4096).unwrap_or(0);
            let c = if is_write { &mut write } else { &mut read };
            c.count(offset == expected);
        }
        (read, write)
    }

    #[test]
    fn grouped_judgement_agrees_with_one_by_one_for_few_and_many_streams() {
        let mut x: u64 = 42;
        let mut random = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        // 8 files of 3 owners (one group); 4,096 files of 64 owners (the
        // dense table); file ids past 16,384 of 200 owners (the hash map).
        for (files, spread, owners) in [(8u64, 1u64, 3u64), (4096, 1, 64), (5000, 4, 200)] {
            let mut at: std::collections::HashMap<(u32, i64), i64> = Default::default();
            let accesses: Vec<(u32, i64, i64, bool)> = (0..60_000)
                .map(|_| {
                    let file = ((random() % files) * spread) as u32;
                    let owner = (random() % owners) as i64 * 7;
                    let pos = at.entry((file, owner)).or_insert(0);
                    // Mostly on from the last access, sometimes a jump.
                    let offset = if random() % 4 == 0 {
                        (random() % 64) as i64 * 4096
                    } else {
                        *pos
                    };
                    *pos = offset + 4096;
                    (file, owner, offset, random() % 5 == 0)
                })
                .collect();
            let mut whole = AccessTracker::default();
            for &(file, owner, offset, is_write) in &accesses {
                whole.record(file, owner, offset, 4096, is_write, 1);
            }
            let mut merged = AccessTracker::default();
            let ids: Vec<u32> = (0..=(files * spread) as u32).collect();
            for part in accesses.chunks(7_000) {
                let mut p = AccessTracker::default();
                for &(file, owner, offset, is_write) in part {
                    p.record(file, owner, offset, 4096, is_write, 1);
                }
                merged.merge(p, &ids);
            }
            let expected = judged_one_by_one(&accesses);
            assert_eq!(whole.counts(), expected, "{files} files, one part");
            assert_eq!(merged.counts(), expected, "{files} files, in parts");
            assert!(expected.0.sequential > 0 && expected.0.random > 0);
        }
    }
}
