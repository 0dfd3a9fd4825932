//! How data ops reach the kernel: plain positional syscalls (`psync`) or
//! io_uring, one op in flight per rank as in the trace (each traced thread
//! issued its calls one after another). Also the page-aligned buffer that
//! O_DIRECT needs, and the one data buffer all ranks of a process share
//! ([`SharedData`]).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::os::fd::RawFd;

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Psync,
    IoUring,
}

impl std::str::FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "psync" => Ok(EngineKind::Psync),
            "io_uring" | "io-uring" => Ok(EngineKind::IoUring),
            _ => Err(format!("`{s}` is not an engine (psync or io_uring)")),
        }
    }
}

pub trait Engine: Send {
    /// Reads into `len` bytes at `buf`.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` bytes until the call returns.
    /// Nothing need own it exclusively: the replay reads into a buffer shared
    /// by every rank and never looks at what arrives.
    unsafe fn read_raw(
        &mut self,
        fd: RawFd,
        buf: *mut u8,
        len: usize,
        offset: u64,
    ) -> io::Result<usize>;
    fn write_at(&mut self, fd: RawFd, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// Writes the pieces `iov` point to, one after another, at `offset`.
    ///
    /// # Safety
    /// Every piece must be valid for reads of its length until the call returns.
    unsafe fn write_vectored_at(
        &mut self,
        fd: RawFd,
        iov: &[libc::iovec],
        offset: u64,
    ) -> io::Result<usize>;
    fn sync(&mut self, fd: RawFd, data_only: bool) -> io::Result<()>;

    fn read_at(&mut self, fd: RawFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        // SAFETY: an exclusive slice is valid for writes of its length.
        unsafe { self.read_raw(fd, buf.as_mut_ptr(), buf.len(), offset) }
    }
}

pub fn new_engine(kind: EngineKind) -> io::Result<Box<dyn Engine>> {
    Ok(match kind {
        EngineKind::Psync => Box::new(Psync),
        EngineKind::IoUring => Box::new(Uring {
            ring: io_uring::IoUring::new(4)?,
        }),
    })
}

fn ret_size(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

pub struct Psync;

impl Engine for Psync {
    unsafe fn read_raw(
        &mut self,
        fd: RawFd,
        buf: *mut u8,
        len: usize,
        offset: u64,
    ) -> io::Result<usize> {
        // SAFETY: the caller guarantees buf is valid for writes of len bytes.
        ret_size(unsafe { libc::pread(fd, buf.cast(), len, offset as i64) })
    }
    fn write_at(&mut self, fd: RawFd, buf: &[u8], offset: u64) -> io::Result<usize> {
        // SAFETY: buf is valid for reads of buf.len() bytes.
        ret_size(unsafe { libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), offset as i64) })
    }
    unsafe fn write_vectored_at(
        &mut self,
        fd: RawFd,
        iov: &[libc::iovec],
        offset: u64,
    ) -> io::Result<usize> {
        // SAFETY: the caller guarantees every piece is readable.
        ret_size(unsafe { libc::pwritev(fd, iov.as_ptr(), iov.len() as i32, offset as i64) })
    }
    fn sync(&mut self, fd: RawFd, data_only: bool) -> io::Result<()> {
        // SAFETY: plain syscalls on a descriptor.
        let r = unsafe {
            if data_only {
                libc::fdatasync(fd)
            } else {
                libc::fsync(fd)
            }
        };
        ret_size(r as isize).map(drop)
    }
}

pub struct Uring {
    ring: io_uring::IoUring,
}

impl Uring {
    fn submit_one(&mut self, entry: io_uring::squeue::Entry) -> io::Result<i32> {
        // SAFETY: the entry's buffer (if any) outlives this call, which waits
        // for the completion before returning.
        unsafe {
            self.ring
                .submission()
                .push(&entry)
                .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        }
        self.ring.submit_and_wait(1)?;
        let cqe = self
            .ring
            .completion()
            .next()
            .ok_or_else(|| io::Error::other("io_uring completion missing"))?;
        let r = cqe.result();
        if r < 0 {
            Err(io::Error::from_raw_os_error(-r))
        } else {
            Ok(r)
        }
    }
}

impl Engine for Uring {
    unsafe fn read_raw(
        &mut self,
        fd: RawFd,
        buf: *mut u8,
        len: usize,
        offset: u64,
    ) -> io::Result<usize> {
        use io_uring::{opcode, types};
        let e = opcode::Read::new(types::Fd(fd), buf, len as u32)
            .offset(offset)
            .build();
        self.submit_one(e).map(|n| n as usize)
    }
    unsafe fn write_vectored_at(
        &mut self,
        fd: RawFd,
        iov: &[libc::iovec],
        offset: u64,
    ) -> io::Result<usize> {
        use io_uring::{opcode, types};
        let e = opcode::Writev::new(types::Fd(fd), iov.as_ptr(), iov.len() as u32)
            .offset(offset)
            .build();
        self.submit_one(e).map(|n| n as usize)
    }
    fn write_at(&mut self, fd: RawFd, buf: &[u8], offset: u64) -> io::Result<usize> {
        use io_uring::{opcode, types};
        let e = opcode::Write::new(types::Fd(fd), buf.as_ptr(), buf.len() as u32)
            .offset(offset)
            .build();
        self.submit_one(e).map(|n| n as usize)
    }
    fn sync(&mut self, fd: RawFd, data_only: bool) -> io::Result<()> {
        use io_uring::{opcode, types};
        let mut f = opcode::Fsync::new(types::Fd(fd));
        if data_only {
            f = f.flags(types::FsyncFlags::DATASYNC);
        }
        self.submit_one(f.build()).map(drop)
    }
}

/// Alignment that satisfies O_DIRECT on every Linux filesystem in use.
pub const ALIGN: usize = 4096;
/// Largest single transfer; bigger trace ops are issued in pieces of this size.
pub const MAX_IO: usize = 16 << 20;

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
        self.buf.len
    }

    pub fn is_empty(&self) -> bool {
        self.buf.len == 0
    }

    pub fn ptr(&self) -> *mut u8 {
        self.buf.ptr
    }
}

/// Most pieces one vectored write takes (Linux's `UIO_MAXIOV`).
const IOV_MAX: usize = 1024;
/// Bytes of the stamp at the start of each 4 KiB block.
const STAMP: usize = 8;
/// Most bytes one stamped vectored write carries: two pieces per block.
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

/// The stamp of block `i` of a write tagged `tag`.
fn stamp_value(tag: u64, i: usize) -> u64 {
    tag.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn both_engines_move_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        let data = AlignedBuf::new(8192, 7);
        for kind in [EngineKind::Psync, EngineKind::IoUring] {
            let mut e = match new_engine(kind) {
                Ok(e) => e,
                Err(err) => {
                    eprintln!("io_uring unavailable here ({err}); only psync checked");
                    continue;
                }
            };
            assert_eq!(
                e.write_at(f.as_raw_fd(), data.as_slice(), 4096).unwrap(),
                8192
            );
            e.sync(f.as_raw_fd(), true).unwrap();
            let mut back = vec![0u8; 8192];
            assert_eq!(e.read_at(f.as_raw_fd(), &mut back, 4096).unwrap(), 8192);
            assert_eq!(back, data.as_slice());
        }
        assert_eq!(f.metadata().unwrap().len(), 12288);
    }

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
}
