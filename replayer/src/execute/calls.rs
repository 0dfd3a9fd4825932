//! One traced call, made and measured: waits for its start on the rank's
//! schedule, makes it through the engine (io_uring for the trace's io_uring
//! requests under `--engine auto`), moves its bytes in pieces of the shared
//! data buffer, and counts it in the rank's figures and its record.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::time::Instant;

use iorepro_analysis::roles::Role;
use iorepro_format::Op;

use super::Worker;
use crate::error::{ReplayError, ReplayResult};
use crate::io::buffers::STAMPED_MAX;
use crate::io::engine::{new_engine, EngineKind};
use crate::plan::ops::PlannedOp;
use crate::plan::survey::NO_PATH;
use crate::report::record::Made;
use crate::report::stats::unix_ns;

/// What a call came to.
pub(super) struct CallOutcome {
    /// Bytes it moved.
    pub bytes: u64,
    /// Ok(true) made and succeeded, Ok(false) made and failed, Err(()) not
    /// made (nothing to make it on).
    pub made: Result<bool, ()>,
    /// The error a made call met.
    pub errno: Option<i32>,
}

impl CallOutcome {
    pub fn made(bytes: u64) -> Self {
        CallOutcome {
            bytes,
            made: Ok(true),
            errno: None,
        }
    }

    pub fn failed(errno: i32) -> Self {
        CallOutcome {
            bytes: 0,
            made: Ok(false),
            errno: Some(errno),
        }
    }

    pub fn not_made() -> Self {
        CallOutcome {
            bytes: 0,
            made: Err(()),
            errno: None,
        }
    }
}

impl Worker<'_> {
    /// Makes `op` through io_uring when the trace made it so and the engine
    /// is `auto`, else through the rank's engine.
    pub(super) fn execute(&mut self, op: &PlannedOp) -> ReplayResult<()> {
        if !(op.uring && self.shared.engine == EngineKind::Auto) {
            return self.execute_with_engine(op);
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
        let r = self.execute_with_engine(op);
        std::mem::swap(&mut self.engine, &mut uring);
        self.uring = Some(uring);
        r
    }

    fn execute_with_engine(&mut self, op: &PlannedOp) -> ReplayResult<()> {
        let intended = if self.processes.insert(op.pid) {
            self.sched.start_of_process(op.ts, op.dur)
        } else {
            self.sched.start(op.ts, op.dur)
        };
        // Latency counts from the intended start (no coordinated omission);
        // the recorded trace says what the replay did: when it issued the call
        // and how long the call took.
        let issued = Instant::now();
        if op.op == Op::Write {
            if let Some(compute_at_barrier) = self.awaiting_first_write.take() {
                let planned_gap = self.sched.compute_ns - compute_at_barrier;
                self.result.phases[self.phase].first_write_unix_ns =
                    Some(unix_ns() - planned_gap as i64);
            }
        }
        let key = (op.pid, op.fd);
        let outcome = if self.objects.is_some() {
            self.object_call(op)
        } else {
            self.posix_call(op)
        };
        // A call that met another outcome than the traced one is counted,
        // and the first few are described; only the target failing stops.
        let mut difference = None;
        let CallOutcome { bytes, made, errno } = match outcome {
            Ok(o) => o,
            Err(e) => match e.differs_only() {
                Some(errno) => {
                    difference = Some(e.to_string());
                    CallOutcome::failed(errno)
                }
                None => return Err(e),
            },
        };
        let end = Instant::now();
        self.sched.finished(intended, issued, end);
        self.live.advanced(self.sched.ideal_ns, end);
        let Ok(succeeded) = made else {
            self.result.tolerated_errors += 1;
            return Ok(());
        };
        let latency = end.saturating_duration_since(intended);
        let differed = succeeded == op.failed;
        if differed && self.keeps_differences() {
            let what = difference.unwrap_or_else(|| self.describe_difference(op, errno));
            let line = format!(
                "rank {}: {what} (traced: {})",
                self.rank,
                if op.failed { "failed" } else { "succeeded" }
            );
            self.result.differences.push(line);
        }
        self.live
            .record(op.op, bytes, latency.as_nanos() as u64, succeeded, differed);
        let role = self
            .shared
            .survey
            .paths
            .get(op.path as usize)
            .and_then(|p| p.role);
        let sample = op.op == Op::Open && succeeded && role == Some(Role::Dataset);
        let ph = &mut self.result.phases[op.phase as usize];
        ph.ops += 1;
        ph.samples += u64::from(sample);
        match op.op {
            Op::Read => {
                ph.read_bytes += bytes;
                if role == Some(Role::Checkpoint) {
                    ph.checkpoint_read_bytes += bytes;
                }
            }
            Op::Write => ph.write_bytes += bytes,
            _ => {}
        }
        self.shared.progress.fetch_add(1, Ordering::Relaxed);
        if let Some(mut rec) = self.record.take() {
            let show = |id: u32| self.paths.get(&id).map(|p| self.display(p));
            let (path, path2) = (show(op.path), show(op.path2));
            let fd = self.files.get(&key).map(|f| f.fd.as_raw_fd());
            let ret = match (errno, op.op) {
                (Some(e), _) => -(e as i64),
                (None, Op::Open) => fd.unwrap_or(0) as i64,
                (None, _) => bytes as i64,
            };
            let took = end.saturating_duration_since(issued);
            let uring = self.shared.engine == EngineKind::IoUring || op.uring;
            rec.push(
                op,
                Made {
                    start: issued,
                    took,
                    ret,
                    paths: [path.as_deref(), path2.as_deref()],
                    fd,
                    uring,
                },
            );
            self.record = Some(rec);
        }
        Ok(())
    }

    /// `op` made on a directory target, through the engine.
    fn posix_call(&mut self, op: &PlannedOp) -> ReplayResult<CallOutcome> {
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

    /// Keeps the first few differences of the rank in words, so the report
    /// says why calls differed, not only how many.
    /// A call made with another outcome than the traced one, in words.
    fn describe_difference(&self, op: &PlannedOp, errno: Option<i32>) -> String {
        let path = self.paths.get(&op.path).map(|p| self.display(p));
        let path = path.map_or_else(String::new, |p| format!(" {}", p.display()));
        let here = errno.map_or_else(
            || "succeeded".to_string(),
            |e| io::Error::from_raw_os_error(e).to_string(),
        );
        format!("{}{path}: {here}", op.op.as_str())
    }

    fn keeps_differences(&self) -> bool {
        const KEPT: usize = 3;
        self.result.differences.len() < KEPT
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
