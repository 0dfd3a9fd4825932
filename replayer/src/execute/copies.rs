//! The copies the kernel made for the job (`sendfile`, `copy_file_range`),
//! each two rows of the trace, a read of its source and a write of its
//! destination at one time (`via`). On a directory target a rank makes the
//! two halves as the one call they were, when both come to it one after
//! the other: the read half is held until the write half arrives, then the
//! kernel copies (a reflink, or a server-side copy, where the file system
//! makes one, as it did for the job). They are made as a read and a write
//! when the halves part (a copy to a pipe or a socket, a `splice`, halves
//! the scaling model gives two ranks, a target that refuses the call), and
//! on a bucket. [`crate::report::stats::CopyCounts`] says which, in the
//! report.

use std::io;
use std::os::fd::OwnedFd;

use super::files::FileCalls;
use super::outcome::CallOutcome;
use crate::error::ReplayResult;
use crate::plan::ops::{PlannedOp, Via};
use iorepro_format::Op;

impl FileCalls<'_> {
    /// `op` if it is a copy's half this rank makes as part of a copy: the
    /// held read half (made as a read first when `op` is not its write
    /// half). `None`: the caller makes `op` as any call.
    pub(super) fn copy_half(&mut self, op: &PlannedOp) -> ReplayResult<Option<CallOutcome>> {
        if let Some(read) = self.held_copy.take() {
            if is_write_half_of(op, &read) {
                return self.copy(&read, op).map(Some);
            }
            self.split(&read)?;
        }
        if !op.via.copies() {
            return Ok(None);
        }
        if op.op == Op::Read && op.via != Via::Splice && !op.failed && op.bytes > 0 {
            self.held_copy = Some(*op);
            return Ok(Some(CallOutcome::made(op.bytes as u64)));
        }
        self.copies.split += 1;
        Ok(None)
    }

    /// At the rank's end: a read half still held, made as a read.
    pub(super) fn finish_copies(&mut self) -> ReplayResult<()> {
        match self.held_copy.take() {
            Some(read) => self.split(&read),
            None => Ok(()),
        }
    }

    /// A half made on its own, as the read or write it is.
    fn split(&mut self, half: &PlannedOp) -> ReplayResult<()> {
        self.copies.split += 1;
        self.call(half).map(|_| ())
    }

    /// The copy whose halves are `read` and `write`, made as the call it was.
    fn copy(&mut self, read: &PlannedOp, write: &PlannedOp) -> ReplayResult<CallOutcome> {
        if !self.ensure_open(read)? || !self.ensure_open(write)? {
            self.split(read)?;
            self.copies.split += 1;
            return self.call(write);
        }
        let (src, dst) = (
            &self.files[&(read.pid, read.fd)],
            &self.files[&(write.pid, write.fd)],
        );
        let at = |op: &PlannedOp, pos| {
            if op.offset >= 0 {
                op.offset as u64
            } else {
                pos
            }
        };
        let (from, to) = (at(read, src.pos), at(write, dst.pos));
        let len = write.bytes.max(0) as u64;
        match kernel_copy(read.via, &src.fd, from, &dst.fd, to, len) {
            Ok(()) => {}
            // Not between these files, on this file system: a read and a write.
            Err(e) if refused(&e) => {
                self.split(read)?;
                self.copies.split += 1;
                return self.call(write);
            }
            Err(e) => {
                let rel = dst.rel.clone();
                return Err(self.io_err(read.via_name(), &rel, e));
            }
        }
        self.files.get_mut(&(read.pid, read.fd)).expect("open").pos = from + len;
        self.files
            .get_mut(&(write.pid, write.fd))
            .expect("open")
            .pos = to + len;
        self.copies.made += 1;
        Ok(CallOutcome::made(len))
    }
}

impl PlannedOp {
    /// The call a copy's half was part of, for messages.
    fn via_name(&self) -> &'static str {
        match self.via {
            Via::Sendfile => "sendfile",
            _ => "copy_file_range",
        }
    }
}

/// The write half of the copy whose read half is `read`: the same call's
/// other row (same process and time, same bytes).
fn is_write_half_of(op: &PlannedOp, read: &PlannedOp) -> bool {
    op.op == Op::Write
        && op.via == read.via
        && op.pid == read.pid
        && op.ts == read.ts
        && op.bytes == read.bytes
        && !op.failed
}

/// An error that says this copy cannot be made between these files (not
/// that the storage failed): it is made as a read and a write instead.
fn refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EXDEV | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::EBADF)
    )
}

/// `len` bytes of `src` at `from` copied to `dst` at `to` by the kernel,
/// through the call the job made: `sendfile` writes at the destination's
/// position, so it is placed there first.
fn kernel_copy(
    via: Via,
    src: &OwnedFd,
    mut from: u64,
    dst: &OwnedFd,
    mut to: u64,
    len: u64,
) -> io::Result<()> {
    let mut left = len;
    while left > 0 {
        let ask = left.min(1 << 30) as usize;
        let moved = if via == Via::Sendfile {
            rustix::fs::seek(dst, rustix::fs::SeekFrom::Start(to))?;
            let n = rustix::fs::sendfile(dst, src, Some(&mut from), ask)?;
            to += n as u64;
            n
        } else {
            // The kernel moves both offsets on.
            rustix::fs::copy_file_range(src, Some(&mut from), dst, Some(&mut to), ask)?
        };
        if moved == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("file ends before offset {from} that the trace copied from"),
            ));
        }
        left -= moved as u64;
    }
    Ok(())
}
