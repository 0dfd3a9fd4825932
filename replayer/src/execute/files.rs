//! A rank's files: where each traced path lands for this rank (through
//! [`crate::io::paths`]), opened beneath the target when the trace opens it
//! or at its first use, with a second O_DIRECT descriptor for the aligned
//! calls that want one.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use super::{OpenFile, Worker};
use crate::error::{ReplayError, ReplayResult, CREATING_DIRECTORY};
use crate::io::buffers::ALIGN;
use crate::io::paths::{resolve, Place};
use crate::plan::ops::PlannedOp;
use crate::plan::survey::NO_PATH;

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

impl Worker<'_> {
    /// Where trace path `id` lands for this rank, relative to the target
    /// (resolved at its first call, then remembered).
    pub(super) fn rel_path(&mut self, id: u32) -> ReplayResult<PathBuf> {
        if let Some(p) = self.paths.get(&id) {
            return Ok(p.clone());
        }
        let info = &self.shared.survey.paths[id as usize];
        let place = Place::of_call(info, self.rank, &self.shared.map);
        let rel = resolve(&info.path, place).ok_or_else(|| {
            ReplayError::Usage(format!(
                "refused trace path {:?}: it names no file under the target",
                &*info.path
            ))
        })?;
        self.paths.insert(id, rel.clone());
        Ok(rel)
    }

    pub(super) fn io_err(&self, what: &'static str, rel: &Path, e: io::Error) -> ReplayError {
        ReplayError::io(what, self.display(rel), e)
    }

    /// How messages and the record name the rank's copy of a path.
    pub(super) fn display(&self, rel: &Path) -> PathBuf {
        match &self.shared.objects {
            Some(o) => PathBuf::from(o.target.display(rel)),
            None => self.shared.conf.display(rel),
        }
    }

    pub(super) fn open_file(
        &mut self,
        op: &PlannedOp,
        flags_hint: Option<i32>,
    ) -> ReplayResult<()> {
        let rel = self.rel_path(op.path)?;
        let written = self.shared.survey.paths[op.path as usize].written;
        let flags = open_flags(flags_hint, written);
        if flags & libc::O_CREAT != 0 {
            if let Some(parent) = rel.parent() {
                if !parent.as_os_str().is_empty() && !self.dirs.contains(parent) {
                    self.shared
                        .conf
                        .create_dirs(parent)
                        .map_err(|e| self.io_err(CREATING_DIRECTORY, parent, e))?;
                    self.dirs.insert(parent.to_path_buf());
                }
            }
        }
        let fd = self
            .shared
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
    pub(super) fn data_fd(
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
                .shared
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
                        self.shared.conf.display(&f.rel),
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
    pub(super) fn open_expecting_failure(&mut self, op: &PlannedOp) -> ReplayResult<Option<i32>> {
        let rel = self.rel_path(op.path)?;
        let flags = op.flags.unwrap_or(libc::O_RDONLY) & !libc::O_DIRECT;
        match self
            .shared
            .conf
            .open_via(&mut *self.engine, &rel, flags, 0o644)
        {
            Ok(fd) => {
                let _ = self.engine.close(fd);
                Ok(None)
            }
            Err(e) => Ok(Some(e.raw_os_error().unwrap_or(libc::EIO))),
        }
    }
}
