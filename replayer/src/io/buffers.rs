//! The bytes the replay moves, with as little memory per rank as a
//! faithful replay allows: one [`SharedData`] buffer per process that every
//! rank reads into and writes from; [`StampedWrite`] for writes up to
//! [`STAMPED_MAX`], gathered from it behind the rank's own stamp in every
//! 4 KiB block; and [`PrivateCopies`], a bounded pool of stamped private
//! buffers for larger writes and for O_DIRECT, which cannot be gathered from
//! 8-byte pieces. All of them are [`AlignedBuf`]s: page-aligned, as
//! O_DIRECT needs, filled with incompressible bytes, and stamped per 4 KiB
//! block so that no two blocks written are alike.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::os::fd::RawFd;
use std::sync::{Condvar, Mutex};

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use crate::io::engine::Engine;

/// Alignment that satisfies O_DIRECT on every Linux filesystem in use.
pub const ALIGN: usize = 4096;
/// Largest single transfer; bigger trace ops are issued in pieces of this size.
pub const MAX_IO: usize = 16 << 20;

/// Bytes of the stamp at the start of each 4 KiB block.
pub const STAMP: usize = 8;

/// A page-aligned buffer of incompressible bytes.
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is exclusively owned; raw pointer is not shared.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub fn new(len: usize, seed: u64) -> Self {
        let len = len.max(ALIGN).next_multiple_of(ALIGN);
        let layout = Layout::from_size_align(len, ALIGN).expect("valid layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory allocating {len} bytes");
        let mut b = AlignedBuf { ptr, len };
        SmallRng::seed_from_u64(seed).fill_bytes(b.as_mut_slice());
        b
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The start of the buffer, for a caller that hands it to the kernel
    /// without forming references (see [`SharedData`]).
    pub fn raw_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes for the buffer's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Makes the first `n` bytes differ from the last write, so storage that
    /// deduplicates blocks cannot flatter the result: one word per 4 KiB block.
    pub fn stamp(&mut self, n: usize, tag: u64) {
        let n = n.min(self.len);
        for (i, block) in self.as_mut_slice()[..n].chunks_mut(ALIGN).enumerate() {
            let v = stamp_value(tag, i);
            let w = block.len().min(STAMP);
            block[..w].copy_from_slice(&v.to_le_bytes()[..w]);
        }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this exact layout.
        unsafe {
            dealloc(
                self.ptr,
                Layout::from_size_align(self.len, ALIGN).expect("valid layout"),
            )
        }
    }
}

/// The stamp of block `i` of a write tagged `tag`.
fn stamp_value(tag: u64, i: usize) -> u64 {
    tag.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i as u64)
}

/// The shared data buffer covers the trace's largest op up to [`MAX_IO`]
/// (larger ops go in pieces), so it is allocated and filled once before the
/// clock starts rather than mid-checkpoint.
fn data_buffer_len(max_io_bytes: u64) -> usize {
    const FLOOR: u64 = 1 << 20;
    max_io_bytes.clamp(FLOOR, MAX_IO as u64) as usize
}

/// The data buffer and the pool of private copies of a process running
/// `ranks` ranks of a trace whose largest op moves `max_io_bytes` and
/// largest write `max_write_bytes`. The copies a rank will need are made
/// now, before the clock starts.
pub fn for_process(
    ranks: usize,
    max_io_bytes: u64,
    max_write_bytes: u64,
    direct_writes: bool,
) -> (SharedData, PrivateCopies) {
    let data_len = data_buffer_len(max_io_bytes);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let copies_limit = PrivateCopies::limit_for(ranks, cores, data_len);
    let needs_copies = direct_writes || max_write_bytes > STAMPED_MAX as u64;
    let ready = if needs_copies { ranks.min(cores) } else { 0 };
    let copies = PrivateCopies::new(data_len, copies_limit, ready);
    (SharedData::new(data_len), copies)
}

/// The one data buffer of a process, as large as the trace's largest op
/// (within [`MAX_IO`]), filled with incompressible bytes once: every rank
/// reads into it, and buffered writes take their bytes from it (each 4 KiB
/// block behind the writing rank's own stamp, see [`StampedWrite`]). Memory
/// stays at one largest op, however many ranks the process runs.
///
/// What reads bring in lands here while other ranks write from it; the
/// bytes written are then partly those of a data file, still incompressible
/// and still unique per block behind their stamps. No Rust reference to the
/// bytes is ever formed after the fill: only pointers handed to the kernel.
pub struct SharedData {
    buf: AlignedBuf,
}

// SAFETY: after construction the buffer is only passed to system calls as a
// raw pointer; concurrent kernel reads and writes of its bytes are harmless
// to the replay, which never inspects them.
unsafe impl Sync for SharedData {}

impl SharedData {
    pub fn new(len: usize) -> Self {
        SharedData {
            buf: AlignedBuf::new(len, 0x5eed),
        }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn ptr(&self) -> *mut u8 {
        self.buf.raw_ptr()
    }
}

/// Most pieces one vectored write takes (Linux's `UIO_MAXIOV`).
const IOV_MAX: usize = 1024;
/// Most bytes one stamped vectored write carries: two pieces per block.
/// Larger writes take a private copy, so that every trace write is still
/// one call of its own size: the kernel's cost per byte depends on the size
/// of the call (large page-cache folios), and splitting a 9 MiB write into
/// 2 MiB pieces made it several times faster than the job's own.
pub const STAMPED_MAX: usize = IOV_MAX / 2 * ALIGN;

/// A buffered write of unique 4 KiB blocks without a private copy of its
/// bytes: each block is its stamp (8 bytes of the rank's own) followed by
/// 4,088 bytes of [`SharedData`], as the pieces of one vectored write.
/// A rank keeps one of these (about 24 KiB) instead of a buffer as large as
/// its largest write.
#[derive(Default)]
pub struct StampedWrite {
    stamps: Vec<[u8; STAMP]>,
    iov: Vec<libc::iovec>,
}

// SAFETY: the iovecs point into the stamps (owned) and into SharedData
// (shared, Sync); they are rebuilt before every call.
unsafe impl Send for StampedWrite {}

impl StampedWrite {
    /// Writes `len` (at most [`STAMPED_MAX`]) bytes at `offset`, block `i`
    /// stamped with a value derived from `tag` and `i`; returns the bytes
    /// written, which may be fewer (the caller writes the rest).
    pub fn write(
        &mut self,
        engine: &mut dyn Engine,
        fd: RawFd,
        data: &SharedData,
        len: usize,
        offset: u64,
        tag: u64,
    ) -> io::Result<usize> {
        let len = len.min(STAMPED_MAX).min(data.len());
        let blocks = len.div_ceil(ALIGN);
        self.stamps.clear();
        self.stamps
            .extend((0..blocks).map(|i| stamp_value(tag, i).to_le_bytes()));
        self.iov.clear();
        for (i, stamp) in self.stamps.iter().enumerate() {
            let start = i * ALIGN;
            let block = (len - start).min(ALIGN);
            let head = block.min(STAMP);
            self.iov.push(libc::iovec {
                iov_base: stamp.as_ptr() as *mut libc::c_void,
                iov_len: head,
            });
            if block > head {
                self.iov.push(libc::iovec {
                    // SAFETY: start + block <= len <= data.len().
                    iov_base: unsafe { data.ptr().add(start + head) }.cast(),
                    iov_len: block - head,
                });
            }
        }
        // SAFETY: every piece points into self.stamps or data, both alive
        // and unchanged for the duration of the call.
        unsafe { engine.write_vectored_at(fd, &self.iov, offset) }
    }
}

/// Private stamped copies, lent for one call at a time: a process holds at
/// most `limit` of them (as large as the largest op), however many ranks it
/// runs; a rank that finds none free waits for one.
pub struct PrivateCopies {
    len: usize,
    limit: usize,
    state: Mutex<Pool>,
    returned: Condvar,
}

struct Pool {
    free: Vec<AlignedBuf>,
    made: usize,
}

impl PrivateCopies {
    /// Up to `limit` copies of `len` bytes, `ready` of them made now (before
    /// the clock starts: making one fills it, which takes milliseconds).
    pub fn new(len: usize, limit: usize, ready: usize) -> Self {
        let limit = limit.max(1);
        let free: Vec<AlignedBuf> = (0..ready.min(limit))
            .map(|i| AlignedBuf::new(len, 0x1e57 ^ i as u64))
            .collect();
        PrivateCopies {
            len,
            limit,
            state: Mutex::new(Pool {
                made: free.len(),
                free,
            }),
            returned: Condvar::new(),
        }
    }

    /// How many copies a process of `ranks` ranks may hold: one per core
    /// (or rank), and beyond that half a MiB per rank, so memory stays under
    /// the largest op plus 1 MiB per rank however many ranks there are.
    pub fn limit_for(ranks: usize, cores: usize, len: usize) -> usize {
        let by_memory = ranks * (512 << 10) / len.max(1);
        ranks.min(cores).max(by_memory).max(1)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A copy, for one call; give it back with [`PrivateCopies::give`].
    pub fn take(&self) -> AlignedBuf {
        let mut pool = self.state.lock().expect("pool lock");
        loop {
            if let Some(b) = pool.free.pop() {
                return b;
            }
            if pool.made < self.limit {
                pool.made += 1;
                let seed = pool.made as u64;
                drop(pool);
                return AlignedBuf::new(self.len, 0x1e57 ^ seed);
            }
            pool = self.returned.wait(pool).expect("pool lock");
        }
    }

    pub fn give(&self, buf: AlignedBuf) {
        self.state.lock().expect("pool lock").free.push(buf);
        self.returned.notify_one();
    }

    /// Copies made so far (for tests and reports).
    pub fn made(&self) -> usize {
        self.state.lock().expect("pool lock").made
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::engine::Psync;
    use std::os::fd::AsRawFd;
    use std::sync::Arc;

    #[test]
    fn stamped_writes_make_every_block_unique_and_match_a_stamped_copy() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        let data = SharedData::new(3 * ALIGN);
        let mut w = StampedWrite::default();
        let len = 2 * ALIGN + 100; // a last block shorter than a page
        let mut engine = Psync;
        assert_eq!(
            w.write(&mut engine, f.as_raw_fd(), &data, len, 0, 7)
                .unwrap(),
            len
        );
        assert_eq!(
            w.write(&mut engine, f.as_raw_fd(), &data, len, len as u64, 8)
                .unwrap(),
            len
        );
        let back = std::fs::read(dir.path().join("f")).unwrap();
        // The same bytes as a private copy of the shared data, stamped.
        let mut copy = AlignedBuf::new(3 * ALIGN, 0);
        // SAFETY: reading the shared buffer in a test where nothing writes it.
        let shared = unsafe { std::slice::from_raw_parts(data.ptr(), data.len()) };
        copy.as_mut_slice().copy_from_slice(shared);
        copy.stamp(len, 7);
        assert_eq!(&back[..len], &copy.as_slice()[..len]);
        // No two 4 KiB blocks alike, across both writes.
        let blocks: std::collections::HashSet<&[u8]> = back.chunks(ALIGN).collect();
        assert_eq!(blocks.len(), back.len().div_ceil(ALIGN));
    }

    #[test]
    fn the_pool_lends_no_more_than_its_limit() {
        assert_eq!(PrivateCopies::limit_for(2, 2, 9 << 20), 2);
        assert_eq!(PrivateCopies::limit_for(512, 2, 4 << 20), 64);
        assert_eq!(PrivateCopies::limit_for(1, 16, 4 << 20), 1);
        let pool = Arc::new(PrivateCopies::new(ALIGN, 2, 1));
        let (a, b) = (pool.take(), pool.take());
        assert_eq!(pool.made(), 2);
        let waiter = {
            let pool = pool.clone();
            std::thread::spawn(move || pool.take().len())
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "a third copy waits");
        pool.give(a);
        assert_eq!(waiter.join().unwrap(), ALIGN);
        pool.give(b);
        assert_eq!(pool.made(), 2);
    }
}
