//! How calls reach the kernel: plain syscalls (`psync`) or io_uring, one
//! call in flight per rank as in the trace (each traced thread issued its
//! calls one after another). Data calls, syncs, opens, stats and closes go
//! through an engine, so a trace's io_uring requests replay as io_uring
//! requests. The bytes they move are [`crate::io::buffers`]'.

use std::ffi::CStr;
use std::io;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};

/// `--engine`: `auto`, `psync` or `io_uring` (`io-uring` is taken too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    /// As traced: io_uring requests through io_uring, the rest as syscalls.
    Auto,
    Psync,
    #[value(name = "io_uring", alias = "io-uring")]
    IoUring,
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
    fn open_at(&mut self, dir: RawFd, path: &CStr, how: &OpenHow) -> io::Result<OwnedFd> {
        // SAFETY: openat2(2) with a C string and an initialised open_how of its size.
        owned(unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir,
                path.as_ptr(),
                how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        })
    }
    fn stat_at(&mut self, dir: RawFd, name: &CStr, flags: i32) -> io::Result<u32> {
        // SAFETY: fstatat into a zeroed buffer, with a C string.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        ret_size(unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, flags) } as isize)?;
        Ok(st.st_mode)
    }
    fn close(&mut self, fd: OwnedFd) -> io::Result<()> {
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
