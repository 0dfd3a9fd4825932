//! How calls reach the kernel: plain syscalls (`psync`) or io_uring, one
//! call in flight per rank as in the trace (each traced thread issued its
//! calls one after another). Data calls, syncs, opens, stats and closes go
//! through an engine, so a trace's io_uring requests replay as io_uring
//! requests. The bytes they move are [`crate::io::buffers`]'.

use std::ffi::CStr;
use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};

/// `--engine`: `auto`, `psync` or `io_uring` (`io-uring` is taken too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    /// As traced: io_uring requests through io_uring, the rest as syscalls.
    Auto,
    Psync,
    #[value(name = "io_uring", alias = "io-uring")]
    IoUring,
}

/// `--direct`: which aligned data calls bypass the page cache. `reads`
/// keeps a dataset larger than memory out of the cache, as the job's
/// reads were, while writes go through it and reach the storage at the
/// job's own syncs, as the job's did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DirectIo {
    /// Only where the traced job opened with O_DIRECT.
    #[default]
    Off,
    Reads,
    All,
}

impl DirectIo {
    pub fn name(self) -> &'static str {
        match self {
            DirectIo::Off => "off",
            DirectIo::Reads => "reads",
            DirectIo::All => "all",
        }
    }

    /// Whether a data call that reads (`write` false) or writes goes direct.
    pub fn covers(self, write: bool) -> bool {
        match self {
            DirectIo::Off => false,
            DirectIo::Reads => !write,
            DirectIo::All => true,
        }
    }
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Auto => "auto",
            EngineKind::Psync => "psync",
            EngineKind::IoUring => "io_uring",
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
    /// openat2(2) of `path` at `dir`.
    fn open_at(&mut self, dir: RawFd, path: &CStr, how: &OpenHow) -> io::Result<OwnedFd>;
    /// A stat of `name` at `dir` with `AT_*` flags; the file's mode.
    fn stat_at(&mut self, dir: RawFd, name: &CStr, flags: i32) -> io::Result<u32>;
    fn close(&mut self, fd: OwnedFd) -> io::Result<()>;

    fn read_at(&mut self, fd: RawFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        // SAFETY: an exclusive slice is valid for writes of its length.
        unsafe { self.read_raw(fd, buf.as_mut_ptr(), buf.len(), offset) }
    }
}

/// `struct open_how` of openat2(2).
#[derive(Debug, Clone, Copy)]
pub struct OpenHow {
    pub flags: u64,
    pub mode: u64,
    pub resolve: u64,
}

fn owned(fd: i64) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a non-negative descriptor just returned by the kernel is ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

pub fn new_engine(kind: EngineKind) -> io::Result<Box<dyn Engine>> {
    Ok(match kind {
        EngineKind::Auto | EngineKind::Psync => Box::new(Psync),
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

/// A descriptor an [`Engine`] method was given, borrowed for that call.
/// The engines take raw descriptors because the replay's workers hold them
/// in maps they go on changing between calls (an engine call never outlives
/// its caller's hold on the descriptor).
fn held<'a>(fd: RawFd) -> BorrowedFd<'a> {
    // SAFETY: every Engine method's caller holds `fd` open for the call.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

/// The plain syscalls, through rustix where it has the call; the reads and
/// vectored writes stay raw: they move bytes of the buffer every rank of a
/// process shares, to which no Rust reference is ever formed (rustix takes
/// slices).
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
        Ok(rustix::io::pwrite(held(fd), buf, offset)?)
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
        if data_only {
            rustix::fs::fdatasync(held(fd))?;
        } else {
            rustix::fs::fsync(held(fd))?;
        }
        Ok(())
    }
    fn open_at(&mut self, dir: RawFd, path: &CStr, how: &OpenHow) -> io::Result<OwnedFd> {
        // The bits as given: the trace's flags (O_DIRECT, O_SYNC...) and the
        // confinement's resolve flags, unknown ones answered by the kernel.
        // No fallback where openat2 is missing: ENOSYS is the open's answer.
        // (rustix adds O_LARGEFILE without O_PATH, as the kernel's openat2
        // does itself on 64-bit machines.)
        Ok(rustix::fs::openat2(
            held(dir),
            path,
            OFlags::from_bits_retain(how.flags as u32),
            Mode::from_bits_retain(how.mode as u32),
            ResolveFlags::from_bits_retain(how.resolve),
        )?)
    }
    fn stat_at(&mut self, dir: RawFd, name: &CStr, flags: i32) -> io::Result<u32> {
        let st = rustix::fs::statat(held(dir), name, AtFlags::from_bits_retain(flags as u32))?;
        Ok(st.st_mode)
    }
    fn close(&mut self, fd: OwnedFd) -> io::Result<()> {
        // close(2)'s own answer is wanted (dropping an OwnedFd ignores it),
        // and rustix's close returns none.
        // SAFETY: the descriptor is ours and closed once.
        ret_size(unsafe { libc::close(fd.into_raw_fd()) } as isize).map(drop)
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
    fn open_at(&mut self, dir: RawFd, path: &CStr, how: &OpenHow) -> io::Result<OwnedFd> {
        use io_uring::{opcode, types};
        let how = types::OpenHow::new()
            .flags(how.flags)
            .mode(how.mode)
            .resolve(how.resolve);
        let e = opcode::OpenAt2::new(types::Fd(dir), path.as_ptr(), &how).build();
        owned(self.submit_one(e)? as i64)
    }
    fn stat_at(&mut self, dir: RawFd, name: &CStr, flags: i32) -> io::Result<u32> {
        use io_uring::{opcode, types};
        // SAFETY: a zeroed statx is a valid buffer for the kernel to fill.
        let mut stx: libc::statx = unsafe { std::mem::zeroed() };
        let e = opcode::Statx::new(
            types::Fd(dir),
            name.as_ptr(),
            (&mut stx as *mut libc::statx).cast(),
        )
        .flags(flags)
        .mask(libc::STATX_BASIC_STATS)
        .build();
        self.submit_one(e)?;
        Ok(stx.stx_mode as u32)
    }
    fn close(&mut self, fd: OwnedFd) -> io::Result<()> {
        use io_uring::{opcode, types};
        let e = opcode::Close::new(types::Fd(fd.into_raw_fd())).build();
        self.submit_one(e).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::buffers::AlignedBuf;
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
}
