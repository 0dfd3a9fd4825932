//! A rank's calls on a directory target: its files opened beneath the
//! target when the trace opens them or at their first use (with a second
//! O_DIRECT descriptor for the aligned calls that want one), each call
//! made through the engine (io_uring for the trace's io_uring requests
//! under `--engine auto`), its bytes moved in pieces of the shared data
//! buffer. The metadata calls are in `metadata`, the kernel's copies in
//! `copies`.

use std::collections::{HashMap, HashSet};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use iorepro_format::Op;

use super::outcome::CallOutcome;
use super::{Places, Shared};
use crate::error::{ReplayError, ReplayResult, CREATING_DIRECTORY};
use crate::io::buffers::{StampedWrite, ALIGN, STAMPED_MAX};
use crate::io::confine::Confined;
use crate::io::engine::{new_engine, Engine, EngineKind};
use crate::plan::ops::{PlannedOp, Via};
use crate::plan::survey::NO_PATH;
use crate::report::stats::CopyCounts;

pub(super) struct OpenFile {
    /// The trace path it was opened for ([`crate::plan::survey::NO_PATH`] if unknown).
    pub id: u32,
    pub fd: OwnedFd,
    pub direct: Option<OwnedFd>,
    pub rel: PathBuf,
    pub flags: i32,
    /// The traced job opened it with O_DIRECT.
    pub traced_direct: bool,
    pub pos: u64,
}

/// One rank's calls beneath a directory target.
pub(super) struct FileCalls<'s> {
    pub shared: &'s Shared,
    /// The target directory, held open.
    pub conf: &'s Confined,
    pub places: Places<'s>,
    pub engine: Box<dyn Engine>,
    /// io_uring for the trace's io_uring requests under `--engine auto`
    /// (made at the first; while one is made it swaps places with `engine`).
    uring: Option<Box<dyn Engine>>,
    pub files: HashMap<(i32, i32), OpenFile>,
    /// Directories that metadata calls name entries in, held open; dropped
    /// when this rank removes or renames a directory.
    pub parents: HashMap<PathBuf, Arc<OwnedFd>>,
    /// Where a directory listing lands (never looked at).
    pub listing: Vec<MaybeUninit<u8>>,
    /// Directories this rank made for the files it creates.
    dirs: HashSet<PathBuf>,
    /// The rank's own stamps for buffered writes from [`Shared::data`].
    stamped: StampedWrite,
    write_tag: u64,
    /// A copy's read half, held until its write half comes (see `copies`).
    pub held_copy: Option<PlannedOp>,
    /// The copies made as the calls they were, and the halves made apart.
    pub copies: CopyCounts,
}

/// The flags a replayed open uses: the trace's access mode and creation
/// flags for files the rank owns; read-only for shared data, which is never
/// created or truncated by the replay. O_DIRECT goes to a second descriptor.
fn open_flags(trace: Option<i32>, written: bool) -> i32 {
    let keep = libc::O_ACCMODE | libc::O_CREAT | libc::O_TRUNC | libc::O_SYNC | libc::O_DSYNC;
    match (trace, written) {
        (Some(f), true) => f & keep,
        (None, true) => libc::O_RDWR | libc::O_CREAT,
        (_, false) => libc::O_RDONLY,
    }
}

impl<'s> FileCalls<'s> {
    pub fn new(
        shared: &'s Shared,
        conf: &'s Confined,
        rank: u32,
        places: Places<'s>,
    ) -> ReplayResult<Self> {
        let engine = new_engine(shared.engine).map_err(|e| {
            ReplayError::Usage(format!("cannot start the {:?} engine: {e}", shared.engine))
        })?;
        Ok(FileCalls {
            shared,
            conf,
            places,
            engine,
            uring: None,
            files: HashMap::new(),
            parents: HashMap::new(),
            listing: Vec::new(),
            dirs: HashSet::new(),
            stamped: StampedWrite::default(),
            write_tag: (rank as u64) << 40,
            held_copy: None,
            copies: CopyCounts::default(),
        })
    }

    /// Whether the rank's calls have gone through io_uring, which may
    /// hand them to its worker threads.
    pub fn through_io_uring(&self) -> bool {
        self.shared.engine == EngineKind::IoUring || self.uring.is_some()
    }

    /// The descriptor the replay holds for a traced one.
    pub fn fd_of(&self, key: (i32, i32)) -> Option<RawFd> {
        self.files.get(&key).map(|f| f.fd.as_raw_fd())
    }

    /// Makes `op` through io_uring when the trace made it so and the engine
    /// is `auto`, else through the rank's engine.
    pub fn make(&mut self, op: &PlannedOp) -> ReplayResult<CallOutcome> {
        if let Some(outcome) = self.copy_half(op)? {
            return Ok(outcome);
        }
        if !(op.via == Via::IoUring && self.shared.engine == EngineKind::Auto) {
            return self.call(op);
        }
        let mut uring = match self.uring.take() {
            Some(u) => u,
            None => new_engine(EngineKind::IoUring).map_err(|e| {
                ReplayError::Usage(format!(
                    "the trace holds io_uring requests, but io_uring cannot start here \
                     ({e}); --engine psync replays them as syscalls"
                ))
            })?,
        };
        std::mem::swap(&mut self.engine, &mut uring);
        let r = self.call(op);
        std::mem::swap(&mut self.engine, &mut uring);
        self.uring = Some(uring);
        r
    }

    pub(super) fn io_err(&self, what: &'static str, rel: &Path, e: io::Error) -> ReplayError {
        ReplayError::io(what, self.conf.display(rel), e)
    }

    fn open_file(&mut self, op: &PlannedOp, flags_hint: Option<i32>) -> ReplayResult<()> {
        let rel = self.places.rel_path(op.path)?;
        let written = self.shared.survey.paths[op.path as usize].written;
        let flags = open_flags(flags_hint, written);
        if flags & libc::O_CREAT != 0 {
            if let Some(parent) = rel.parent() {
                if !parent.as_os_str().is_empty() && !self.dirs.contains(parent) {
                    self.conf
                        .create_dirs(parent)
                        .map_err(|e| self.io_err(CREATING_DIRECTORY, parent, e))?;
                    self.dirs.insert(parent.to_path_buf());
                }
            }
        }
        let fd = self
            .conf
            .open_via(&mut *self.engine, &rel, flags, 0o644)
            .map_err(|e| self.io_err("open", &rel, e))?;
        let traced_direct = flags_hint.is_some_and(|f| f & libc::O_DIRECT != 0);
        self.files.insert(
            (op.pid, op.fd),
            OpenFile {
                id: op.path,
                fd,
                direct: None,
                rel,
                flags: flags & !(libc::O_CREAT | libc::O_TRUNC),
                traced_direct,
                pos: 0,
            },
        );
        Ok(())
    }

    /// The open file a descriptor op refers to, opened lazily from its path
    /// when the trace began after the open (or a phase was skipped).
    pub(super) fn ensure_open(&mut self, op: &PlannedOp) -> ReplayResult<bool> {
        if let Some(f) = self.files.get(&(op.pid, op.fd)) {
            // A descriptor the trace shows on another file was closed and
            // reused where the trace has no close (an exec closing it, a
            // dup2 over it): the call is made on the file the trace names.
            if op.path == NO_PATH || f.id == NO_PATH || f.id == op.path {
                return Ok(true);
            }
            self.files.remove(&(op.pid, op.fd));
        }
        if op.path == NO_PATH {
            return Ok(false);
        }
        self.open_file(op, None)?;
        Ok(true)
    }

    /// The descriptor a data op uses, and whether it is the O_DIRECT one.
    fn data_fd(
        &mut self,
        key: (i32, i32),
        write: bool,
        offset: u64,
        len: u64,
    ) -> ReplayResult<(RawFd, bool)> {
        let f = self.files.get_mut(&key).expect("file was opened");
        let aligned = offset.is_multiple_of(ALIGN as u64) && len.is_multiple_of(ALIGN as u64);
        let want = f.traced_direct || self.shared.direct.covers(write);
        if !(want && aligned) {
            return Ok((f.fd.as_raw_fd(), false));
        }
        if f.direct.is_none() {
            let fd = self
                .conf
                .open(&f.rel, f.flags | libc::O_DIRECT, 0)
                .map_err(|e| {
                    let why = if e.raw_os_error() == Some(libc::EINVAL) {
                        " (this filesystem refuses O_DIRECT)"
                    } else {
                        ""
                    };
                    ReplayError::io(
                        "open with O_DIRECT",
                        self.conf.display(&f.rel),
                        io::Error::new(e.kind(), format!("{e}{why}")),
                    )
                })?;
            f.direct = Some(fd);
        }
        Ok((f.direct.as_ref().expect("just opened").as_raw_fd(), true))
    }

    /// An open the traced job saw fail (a probe for a file that is not
    /// there): made the same way; if it succeeds here, the file is closed
    /// at once. The error it met, if any.
    fn open_expecting_failure(&mut self, op: &PlannedOp) -> ReplayResult<Option<i32>> {
        let rel = self.places.rel_path(op.path)?;
        let flags = op.flags.unwrap_or(libc::O_RDONLY) & !libc::O_DIRECT;
        match self.conf.open_via(&mut *self.engine, &rel, flags, 0o644) {
            Ok(fd) => {
                let _ = self.engine.close(fd);
                Ok(None)
            }
            Err(e) => Ok(Some(e.raw_os_error().unwrap_or(libc::EIO))),
        }
    }

    /// `op` made through the engine.
    pub(super) fn call(&mut self, op: &PlannedOp) -> ReplayResult<CallOutcome> {
        let key = (op.pid, op.fd);
        let mut bytes = 0u64;
        let mut made: Result<bool, ()> = Ok(true);
        let mut errno = None;
        match op.op {
            Op::Open if op.path == NO_PATH => made = Err(()),
            Op::Open if op.failed => {
                errno = self.open_expecting_failure(op)?;
                made = Ok(errno.is_none());
            }
            Op::Open => self.open_file(op, op.flags)?,
            Op::Close => match self.files.remove(&key) {
                Some(f) => {
                    drop(f.direct);
                    if let Some(evictor) = &self.shared.evictor {
                        if f.flags & libc::O_ACCMODE == libc::O_RDONLY {
                            if let Ok(copy) = f.fd.try_clone() {
                                evictor.evict(copy);
                            }
                        }
                    }
                    if let Err(e) = self.engine.close(f.fd) {
                        return Err(self.io_err("close", &f.rel, e));
                    }
                }
                None => made = Err(()),
            },
            Op::Read | Op::Fault | Op::Write => {
                if self.ensure_open(op)? {
                    let f = &self.files[&key];
                    let offset = if op.offset >= 0 {
                        op.offset as u64
                    } else {
                        f.pos
                    };
                    let write = op.op == Op::Write;
                    self.transfer(key, write, offset, op.bytes as u64)?;
                    self.files.get_mut(&key).expect("open").pos = offset + op.bytes as u64;
                    bytes = op.bytes as u64;
                } else {
                    made = Err(());
                }
            }
            Op::Fsync | Op::Fdatasync => {
                if self.ensure_open(op)? {
                    let fd = self.files[&key].fd.as_raw_fd();
                    self.engine.sync(fd, op.op == Op::Fdatasync).map_err(|e| {
                        let rel = self.files[&key].rel.clone();
                        self.io_err(op.op.as_str(), &rel, e)
                    })?;
                } else {
                    made = Err(());
                }
            }
            Op::Truncate => {
                if !self.files.contains_key(&key) && op.path != NO_PATH {
                    self.open_file(op, Some(libc::O_WRONLY | libc::O_CREAT))?;
                }
                match self.files.get(&key) {
                    Some(f) => {
                        if let Err(e) = rustix::fs::ftruncate(&f.fd, op.bytes.max(0) as u64) {
                            let (e, rel) = (io::Error::from(e), f.rel.clone());
                            return Err(self.io_err("truncate", &rel, e));
                        }
                    }
                    None => made = Err(()),
                }
            }
            _ => match self.metadata(op)? {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    errno = e.raw_os_error();
                    made = Ok(false);
                }
                None => made = Err(()),
            },
        }
        Ok(CallOutcome { bytes, made, errno })
    }

    /// One call writing `n` bytes at `at`, every 4 KiB block stamped so that
    /// storage which deduplicates finds no two alike: gathered from the
    /// shared data when it can be, else from a private copy.
    fn write_piece(&mut self, fd: RawFd, direct: bool, n: usize, at: u64) -> io::Result<usize> {
        self.write_tag += 1;
        if !direct && n <= STAMPED_MAX {
            let data = &self.shared.data;
            return self
                .stamped
                .write(&mut *self.engine, fd, data, n, at, self.write_tag);
        }
        let copies = &self.shared.copies;
        let mut buf = copies.take();
        let n = n.min(buf.len());
        buf.stamp(n, self.write_tag);
        let r = self.engine.write_at(fd, &buf.as_slice()[..n], at);
        copies.give(buf);
        r
    }

    /// Moves `len` bytes at `offset`, in pieces the size of the shared data
    /// buffer at most (so at most [`crate::io::buffers::MAX_IO`]).
    fn transfer(
        &mut self,
        key: (i32, i32),
        write: bool,
        offset: u64,
        len: u64,
    ) -> ReplayResult<()> {
        let (fd, direct) = self.data_fd(key, write, offset, len)?;
        let mut done = 0u64;
        while done < len {
            let n = ((len - done) as usize).min(self.shared.data.len());
            let at = offset + done;
            let r = if write {
                self.write_piece(fd, direct, n, at)
            } else {
                // SAFETY: the shared buffer holds at least n bytes for the
                // whole replay; what the kernel puts there is never read.
                unsafe { self.engine.read_raw(fd, self.shared.data.ptr(), n, at) }
            };
            let moved = r.map_err(|e| {
                let rel = self.files[&key].rel.clone();
                self.io_err(if write { "write" } else { "read" }, &rel, e)
            })?;
            if moved == 0 {
                let rel = self.files[&key].rel.clone();
                return Err(self.io_err(
                    "read",
                    &rel,
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("file ends before offset {at} that the trace read"),
                    ),
                ));
            }
            done += moved as u64;
        }
        Ok(())
    }
}
