//! Kernel records become trace rows: each record's file or path names are
//! resolved to absolute paths, its process to a rank, its thread to a name,
//! and the row joins the reorder window (see `rows`).
//!
//! Records on the I/O ring are told apart by size: an [`IoEvent`] (a call on
//! a descriptor, or a run of them), a [`NameEvent`] (a thread's name), or a
//! [`PathEvent`] header followed by its path strings.

use std::rc::Rc;

use iorepro_common::{
    kind, proc_kind, IoEvent, NameEvent, PathEvent, ProcEvent, COMM_LEN, IO_EVENT_SIZE,
    NAME_EVENT_SIZE, NOT_HTTP, PATH_EVENT_SIZE, REQUEST_TLS, RET_PENDING, TLS_HELLO, VIA_IO_URING,
};
use iorepro_format::processes::ProcessStart;
use iorepro_format::{Op, TraceError, TraceWriter};
use rustc_hash::FxHashMap;

use crate::error::CollectResult;
use crate::files::{user_dev, FileTable};
use crate::live::written::Written;
use crate::probes::Probes;
use crate::procs::{self, ProcTable};
use crate::request_rows::{Finished, Mark, Requests, SocketCall};
use crate::ring::Ring;
use crate::rows::{op_of, row_from_event, Reorder};
use crate::storage_served::{StorageServed, Watched};
use crate::write_back::WriteBack;

/// Everything needed to turn records into rows.
pub struct Decoder {
    pub files: FileTable,
    pub procs: ProcTable,
    /// Thread names by tid, as the kernel side reports them.
    pub names: FxHashMap<u32, [u8; COMM_LEN]>,
    /// Whether rows of a path are kept, by the address of the path's
    /// interned string (held here, so the address cannot be reused).
    kept_paths: FxHashMap<*const u8, (Rc<str>, bool)>,
    rows: Reorder,
    prefixes: Vec<String>,
    all_files: bool,
    /// Wall clock minus the kernel's monotonic clock.
    pub wall_offset_ns: i64,
    /// io_uring opens and statx sent at submission, waiting for their
    /// result, by request (see the kernel side's `uring`).
    pending: FxHashMap<i64, (PathEvent, Rc<str>)>,
    /// What has been written so far, for status lines and metrics.
    pub written: Written,
    /// Object-storage requests under way.
    requests: Requests,
    /// Page-cache fills and device writes made inside calls, waiting for
    /// their rows.
    served: StorageServed,
    /// The written files whose later write-back the kernel side follows.
    write_back: WriteBack,
}

/// The longest rows are held back for a request under way.
const REQUEST_HOLD_NS: i64 = 60_000_000_000;

/// A path record: its header and its two path strings.
struct Named {
    header: PathEvent,
    path: String,
    path2: String,
}

impl Named {
    /// The record `item`, whose header is `header`.
    fn parse(header: PathEvent, item: &[u8]) -> Option<Named> {
        let rest = item.get(PATH_EVENT_SIZE..)?;
        let (l1, l2) = (header.path_len as usize, header.path2_len as usize);
        let path = rest.get(..l1)?;
        let path2 = rest.get(l1..l1 + l2)?;
        // Linux names are bytes; the trace's paths are UTF-8 strings.
        Some(Named {
            header,
            path: String::from_utf8_lossy(path).into_owned(),
            path2: String::from_utf8_lossy(path2).into_owned(),
        })
    }
}

impl Decoder {
    /// `watched`: which of the hooks that say what the storage served of a
    /// call are attached.
    pub fn new(
        host: String,
        prefixes: Vec<String>,
        all_files: bool,
        wall_offset_ns: i64,
        watched: Watched,
    ) -> Self {
        Decoder {
            files: FileTable::default(),
            procs: ProcTable::default(),
            names: FxHashMap::default(),
            kept_paths: FxHashMap::default(),
            rows: Reorder::new(host),
            prefixes,
            all_files,
            wall_offset_ns,
            pending: FxHashMap::default(),
            written: Written::default(),
            requests: Requests::default(),
            served: StorageServed::new(watched),
            write_back: WriteBack::new(watched.write_back),
        }
    }

    /// Writes every name hashed from now on (`--anonymize-key-file`).
    pub fn anonymize(&mut self, masker: crate::hashed_rows::Masker) {
        self.rows.mask_with(masker);
    }

    /// Hands the rows the watermark has passed to the writer.
    pub fn release(
        &mut self,
        watermark: Option<i64>,
        writer: &mut TraceWriter,
    ) -> Result<usize, TraceError> {
        let names = &self.names;
        let comm = |tid: i32| names.get(&(tid as u32)).copied().unwrap_or([0; COMM_LEN]);
        self.rows
            .release(watermark, comm, &mut self.written, writer)
    }

    /// When the traced processes that made rows were forked, for the
    /// manifest (see [`iorepro_format::processes`]).
    pub fn process_starts(&self) -> Vec<ProcessStart> {
        self.procs
            .starts()
            .iter()
            .map(|s| ProcessStart {
                host: None,
                pid: s.tgid as i32,
                parent: s.parent as i32,
                forked_unix_ns: s.at_ns as i64 + self.wall_offset_ns,
            })
            .collect()
    }

    /// A process found already running (in an attached tree or cgroup).
    pub fn adopt(&mut self, tgid: u32) {
        let parent = procs::parent_of(tgid).and_then(|p| self.procs.rank(p));
        self.procs.adopt(tgid, parent);
        self.files.scan_process(tgid);
    }

    /// Reads everything the kernel has handed over; process records first, so
    /// a child's rank is known before its I/O.
    pub fn drain(&mut self, probes: &mut Probes) -> CollectResult<usize> {
        let mut forked = Vec::new();
        let Probes {
            events,
            proc_events,
            ..
        } = probes;
        let mut n = self.drain_procs(proc_events, &mut forked);
        let mut late = 0;
        n += events.drain(|item| {
            // The two rings are read one after the other, so a process that
            // forked, ran and exited between the two reads has its I/O here
            // and its fork not yet read: read the process ring again first,
            // or its rows would take no rank (its environment is gone).
            if tgid_of(item).is_some_and(|tgid| !self.procs.knows(tgid)) {
                late += self.drain_procs(proc_events, &mut forked);
            }
            match item.len() {
                IO_EVENT_SIZE => {
                    // SAFETY: the kernel wrote an IoEvent of this size.
                    let ev: IoEvent = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
                    self.on_io(&ev);
                }
                NAME_EVENT_SIZE => {
                    // SAFETY: the kernel wrote a NameEvent of this size.
                    let ev: NameEvent = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
                    self.names.insert(ev.pid_tgid as u32, ev.comm);
                }
                n if n >= PATH_EVENT_SIZE => {
                    // SAFETY: the kernel wrote a PathEvent header at the start.
                    let header: PathEvent =
                        unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
                    if matches!(header.io.kind, kind::SEND | kind::RECV) {
                        if let Some((call, mark)) = socket_call(&header, item) {
                            self.on_socket(header.io.kind, &call, mark);
                        }
                    } else if let Some(named) = Named::parse(header, item) {
                        self.on_named(named);
                    }
                }
                _ => {}
            }
        });
        for tgid in forked {
            probes.forked(tgid);
        }
        for (ino, written) in self.write_back.take() {
            probes.follow_write_back(ino, written);
        }
        Ok(n + late)
    }

    /// Reads the process ring, noting the children forked.
    fn drain_procs(&mut self, ring: &mut Ring, forked: &mut Vec<u32>) -> usize {
        ring.drain(|item| {
            if item.len() >= std::mem::size_of::<ProcEvent>() {
                // SAFETY: the kernel wrote a ProcEvent of this size.
                let ev: ProcEvent = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
                if ev.kind == proc_kind::FORK {
                    forked.push(ev.tgid);
                }
                self.on_proc(&ev);
            }
        })
    }

    fn on_proc(&mut self, ev: &ProcEvent) {
        match ev.kind {
            proc_kind::FORK => self.procs.on_fork(ev.tgid, ev.parent_tgid, ev.ts_ns),
            proc_kind::EXEC => {
                self.procs.on_exec(ev.tgid);
                self.files.learn_exe(ev.tgid);
            }
            proc_kind::JOIN => self.adopt(ev.tgid),
            // Ranks are kept: the process's last records may still be queued.
            _ => {}
        }
    }

    /// The processes whose TLS the uprobes did not see, with their TLS
    /// connections (see [`Requests::unseen_tls`]).
    pub fn unseen_tls(&self) -> Vec<(u32, u64)> {
        self.requests.unseen_tls()
    }

    /// A send or a receive on a socket that carries HTTP requests, or a
    /// connection's mark.
    fn on_socket(&mut self, kind: u32, call: &SocketCall, mark: Option<Mark>) {
        if let Some(mark) = mark {
            return self.requests.on_mark((call.pid_tgid >> 32) as u32, mark);
        }
        let finished = if kind == kind::SEND {
            self.requests.on_send(call, self.wall_offset_ns)
        } else {
            self.requests.on_recv(call, self.wall_offset_ns)
        };
        if let Some(done) = finished {
            self.push_request(done);
        }
    }

    fn push_request(&mut self, done: Finished) {
        let rank = self.procs.rank_of_row((done.pid_tgid >> 32) as u32);
        self.rows.push(done.into_row(rank));
    }

    /// Ends the requests still under way (the capture is ending).
    pub fn end_requests(&mut self) {
        for done in self.requests.drain(self.wall_offset_ns) {
            self.push_request(done);
        }
    }

    /// How far rows may be released (wall clock) when the reorder window
    /// is `window_ns` and the monotonic clock reads `now_ns`. Requests
    /// answered and idle for a window end first (see
    /// [`Requests::settle`]); the watermark is then held back to the start
    /// of the oldest request still under way, by at most
    /// [`REQUEST_HOLD_NS`] (a request longer than that is written out of
    /// order, in a segment of its own).
    pub fn watermark(&mut self, now_ns: i64, window_ns: i64) -> i64 {
        let watermark_ns = now_ns + self.wall_offset_ns - window_ns;
        let idle_since = (now_ns - window_ns).max(0) as u64;
        let (ended, oldest) = self.requests.settle(idle_since, self.wall_offset_ns);
        for done in ended {
            self.push_request(done);
        }
        match oldest {
            Some(oldest) => {
                let oldest = oldest as i64 + self.wall_offset_ns;
                watermark_ns.min(oldest.max(watermark_ns - REQUEST_HOLD_NS))
            }
            None => watermark_ns,
        }
    }

    /// A call on a descriptor (or a run of them, or a page-cache fill).
    pub fn on_io(&mut self, ev: &IoEvent) {
        if matches!(ev.kind, kind::FILL | kind::DEVICE_WRITE) {
            return self.served.add(ev);
        }
        let Some(op) = op_of(ev.kind) else { return };
        if op == Op::Writeback {
            return self.on_write_back(ev);
        }
        if ev.via == VIA_IO_URING && matches!(op, Op::Open | Op::Stat) {
            return self.on_uring_result(ev, op);
        }
        let tgid = (ev.pid_tgid >> 32) as u32;
        let key = (user_dev(ev.dev), ev.ino);
        let path = self
            .files
            .path_of(key, tgid, if op == Op::Fault { -1 } else { ev.fd });
        // Taken whether or not the row is kept: they are the call's alone.
        let from_storage = self.served.take(ev, op);
        if !self.wanted(path.as_ref()) {
            return;
        }
        let rank = self.procs.rank_of_row(tgid);
        let mut row = row_from_event(ev, op, rank, path, self.wall_offset_ns);
        row.from_storage = from_storage;
        self.rows.push(row);
        if op == Op::Write {
            self.write_back.note_write(ev);
        }
    }

    /// Pages of a written file the kernel wrote back: a row of the file's
    /// last writer, all of it storage. (Its process may have exited: the
    /// file's path was learnt from its writes.)
    fn on_write_back(&mut self, ev: &IoEvent) {
        let tgid = (ev.pid_tgid >> 32) as u32;
        let path = self.files.path_of((user_dev(ev.dev), ev.ino), tgid, -1);
        if path.is_none() || !self.wanted(path.as_ref()) {
            return;
        }
        let rank = self.procs.rank_of_row(tgid);
        let mut row = row_from_event(ev, Op::Writeback, rank, path, self.wall_offset_ns);
        row.ret = ev.size as i64;
        row.from_storage = Some(iorepro_format::FromStorage {
            bytes: ev.size as i64,
            read_ahead: 0,
        });
        self.rows.push(row);
    }

    /// The result of an io_uring open or statx whose path came at submission.
    fn on_uring_result(&mut self, ev: &IoEvent, op: Op) {
        let Some((header, path)) = self.pending.remove(&ev.offset) else {
            return;
        };
        let path = if op == Op::Open && ev.ret >= 0 && ev.ino != 0 {
            self.files.learn((user_dev(ev.dev), ev.ino), &path)
        } else {
            path
        };
        if !self.decide(&path) {
            return;
        }
        let io = IoEvent {
            ret: ev.ret,
            dur_ns: ev.dur_ns,
            span_ns: ev.dur_ns,
            fd: ev.fd,
            ino: ev.ino,
            dev: ev.dev,
            ..header.io
        };
        let rank = self.procs.rank_of_row((io.pid_tgid >> 32) as u32);
        self.rows.push(row_from_event(
            &io,
            op,
            rank,
            Some(path),
            self.wall_offset_ns,
        ));
    }

    fn on_named(&mut self, named: Named) {
        let ev = &named.header;
        let Some(op) = op_of(ev.io.kind) else { return };
        let tgid = (ev.io.pid_tgid >> 32) as u32;
        let resolve = |files: &mut FileTable, raw: &str, relative: bool, dir: (u32, u64)| {
            if relative {
                files.resolve(raw, (user_dev(dir.0), dir.1), tgid)
            } else {
                raw.to_string()
            }
        };
        let path = resolve(
            &mut self.files,
            &named.path,
            ev.relative & 1 != 0,
            (ev.dir_dev, ev.dir_ino),
        );
        let path2 = (op_has_second_path(ev.io.kind)).then(|| {
            resolve(
                &mut self.files,
                &named.path2,
                ev.relative & 2 != 0,
                (ev.dir2_dev, ev.dir2_ino),
            )
        });
        if ev.io.ret == RET_PENDING {
            // An io_uring request: its result comes at completion.
            self.pending
                .insert(ev.io.offset, (*ev, Rc::from(path.as_str())));
            return;
        }
        let path: Rc<str> = match op {
            Op::Open if ev.io.ret >= 0 => {
                let key = (user_dev(ev.io.dev), ev.io.ino);
                let p = self.files.learn(key, &path);
                // Directories are only remembered, as starts of relative paths.
                const S_IFMT: u32 = 0o170000;
                const S_IFDIR: u32 = 0o040000;
                if ev.mode & S_IFMT == S_IFDIR {
                    return;
                }
                p
            }
            Op::Rename if ev.io.ret == 0 => {
                if let Some(to) = &path2 {
                    self.files.rename(&path, to);
                }
                path.into()
            }
            _ => path.into(),
        };
        // A symlink's target is only a string: the link itself decides.
        // (Paths named by calls are not interned, so not cached either.)
        let decides = match (op, &path2) {
            (Op::Symlink, Some(link)) => link.as_str(),
            _ => &*path,
        };
        if !self.decide(decides) {
            return;
        }
        let rank = self.procs.rank_of_row(tgid);
        let mut row = row_from_event(&ev.io, op, rank, Some(path), self.wall_offset_ns);
        row.path2 = path2.map(Rc::from);
        self.rows.push(row);
    }

    /// Whether rows of an open file's path are kept; decided once per path
    /// (the file table interns the paths of open files, so the rows of one
    /// file share one string).
    fn wanted(&mut self, path: Option<&Rc<str>>) -> bool {
        let Some(p) = path else {
            return self.prefixes.is_empty();
        };
        if let Some((_, kept)) = self.kept_paths.get(&p.as_ptr()) {
            return *kept;
        }
        let kept = self.decide(p);
        self.kept_paths.insert(p.as_ptr(), (p.clone(), kept));
        kept
    }

    /// Regular files outside the kernel's pseudo file systems, under a prefix if given.
    fn decide(&self, p: &str) -> bool {
        if !self.all_files && ["/proc", "/sys", "/dev"].iter().any(|d| under(p, d)) {
            return false;
        }
        self.prefixes.is_empty() || self.prefixes.iter().any(|d| under(p, d))
    }
}

fn op_has_second_path(k: u32) -> bool {
    matches!(k, kind::RENAME | kind::LINK | kind::SYMLINK)
}

/// `path` is `dir` or inside it.
fn under(path: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/')) || dir.is_empty()
}

/// A socket record (a path record of kind SEND or RECV, whose "path" is
/// the head of the bytes moved), whose header is `header`.
fn socket_call<'a>(header: &PathEvent, item: &'a [u8]) -> Option<(SocketCall<'a>, Option<Mark>)> {
    let io = header.io;
    let head = item.get(PATH_EVENT_SIZE..PATH_EVENT_SIZE + header.path_len as usize)?;
    Some((
        SocketCall {
            pid_tgid: io.pid_tgid,
            socket: io.ino,
            fd: io.fd,
            ts_ns: io.ts_ns,
            dur_ns: io.dur_ns,
            moved: io.ret.max(0) as u64,
            head,
            tls: io.flags & REQUEST_TLS != 0,
        },
        if io.flags & TLS_HELLO != 0 {
            Some(Mark::Handshake)
        } else if io.flags & NOT_HTTP != 0 {
            Some(Mark::OpenSslSession)
        } else {
            None
        },
    ))
}

/// The process of an I/O or path record (a path record begins with an I/O
/// record); `None` for a thread's name.
fn tgid_of(item: &[u8]) -> Option<u32> {
    if item.len() != IO_EVENT_SIZE && item.len() < PATH_EVENT_SIZE {
        return None;
    }
    let at = std::mem::offset_of!(IoEvent, pid_tgid);
    let bytes = item.get(at..at + 8)?;
    Some((u64::from_ne_bytes(bytes.try_into().ok()?) >> 32) as u32)
}
