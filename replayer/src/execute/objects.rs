//! A rank's calls on an object-storage target: what each traced call
//! becomes (docs/OBJECT-STORAGE.md's mapping table says the same).
//!
//! | traced call | request |
//! |---|---|
//! | open of a file the trace only reads, stat, access | HEAD (a directory's stat: LIST of its prefix, first page) |
//! | open for writing, mkdir, rmdir, link, symlink, truncate, lseek | none (counted as such) |
//! | read, page-cache fill of a mapped file | ranged GET (`--s3-read`: as traced, coalesced, or the whole object once) |
//! | write | none until the written bytes fill a part: then UploadPart (from the multipart threshold on) |
//! | close or fsync after writes | PUT of the object below the threshold, else the last part and CompleteMultipartUpload |
//! | getdents | LIST of the directory's prefix (every page) |
//! | unlink | DELETE |
//! | rename | COPY, then DELETE of the old key |
//!
//! An object's size is the highest offset written; writes after a close or
//! fsync upload the whole object again at the next one, as a client of an
//! immutable object must.
//!
//! The calls a traced request stands for ([`crate::plan::requests_as_calls`]) are
//! made as that request: an open makes no HEAD (the GET, or the listing,
//! that follows is the request), a PUT's write goes up as one PUT whatever
//! its size, and an upload's parts go up as traced, one part a write.

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use iorepro_format::Op;

use super::outcome::CallOutcome;
use super::{Places, Shared};
use crate::error::{ReplayError, ReplayResult};
use crate::io::objects::Bucket;
use crate::io::objects::{ObjectClient, ObjectTarget, Part, ReadMode, RequestError, RequestStats};
use crate::plan::ops::{PlannedOp, Via};
use crate::plan::survey::NO_PATH;
use crate::report::stats::CopyCounts;

/// One rank's calls on a bucket: its client and the objects its traced
/// descriptors stand for.
pub(super) struct ObjectCalls<'s> {
    shared: &'s Shared,
    bucket: &'s Bucket,
    pub places: Places<'s>,
    client: ObjectClient,
    files: HashMap<(i32, i32), ObjectFile>,
    /// A bucket makes a copy's halves as a GET and an upload.
    pub copies: CopyCounts,
}

struct ObjectFile {
    /// The trace path it was opened for.
    id: u32,
    rel: PathBuf,
    key: String,
    pos: u64,
    /// The bytes the last GET brought (`coalesce` and `whole`).
    fetched: Range<u64>,
    /// The object's size, when a HEAD told it.
    size: Option<u64>,
    /// Set when the rank writes the file.
    upload: Option<Upload>,
}

/// How an object's writes go up.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Sending {
    /// One PUT below `--s3-multipart-threshold`, else parts of `--s3-part-size`.
    #[default]
    ByThreshold,
    /// One PUT: a traced PUT.
    OnePut,
    /// A part a write, of the size of the upload's first: a traced upload.
    TracedParts,
}

#[derive(Default)]
struct Upload {
    sending: Sending,
    /// The parts' size, with [`Sending::TracedParts`]: the first write's.
    part_size: Option<u64>,
    /// The highest offset written: the object's size.
    end: u64,
    /// Bytes already sent in parts.
    sent: u64,
    multipart: Option<(String, Vec<Part>)>,
    /// Written since the object was last completed.
    dirty: bool,
}

fn failed(
    target: &ObjectTarget,
    what: &'static str,
    rel: &std::path::Path,
    e: RequestError,
) -> ReplayError {
    ReplayError::io(what, target.display(rel), io::Error::other(e.to_string()))
}

impl<'s> ObjectCalls<'s> {
    /// The rank's client, counting into `stats` (its live figures).
    pub fn connect(
        shared: &'s Shared,
        bucket: &'s Bucket,
        places: Places<'s>,
        stats: Arc<Mutex<RequestStats>>,
    ) -> ReplayResult<Self> {
        Ok(ObjectCalls {
            shared,
            bucket,
            places,
            client: ObjectClient::connect(&bucket.target, stats).map_err(ReplayError::Usage)?,
            files: HashMap::new(),
            copies: CopyCounts::default(),
        })
    }

    /// The target (borrowed from what all ranks share, not from the rank).
    fn target(&self) -> &'s ObjectTarget {
        let bucket: &'s Bucket = self.bucket;
        &bucket.target
    }

    fn upload_data(&self) -> &'s [u8] {
        let bucket: &'s Bucket = self.bucket;
        bucket.data()
    }

    /// `op` made as requests to the bucket.
    pub fn make(&mut self, op: &PlannedOp) -> ReplayResult<CallOutcome> {
        let key = (op.pid, op.fd);
        if op.via.copies() {
            self.copies.split += 1;
        }
        let none = |this: &mut Self| {
            this.client.stats().no_request(op.op.as_str());
            Ok(CallOutcome::made(0))
        };
        match op.op {
            Op::Open if op.path == NO_PATH => Ok(CallOutcome::not_made()),
            Op::Open => self.open_object(op),
            Op::Close => match self.files.remove(&key) {
                Some(mut f) => {
                    if !self.finish_upload(&mut f)? {
                        none(self)?;
                    }
                    Ok(CallOutcome::made(0))
                }
                None => Ok(CallOutcome::not_made()),
            },
            Op::Read | Op::Fault | Op::Write => {
                if !self.ensure_object(op)? {
                    return Ok(CallOutcome::not_made());
                }
                let f = &self.files[&key];
                let offset = if op.offset >= 0 {
                    op.offset as u64
                } else {
                    f.pos
                };
                let len = op.bytes.max(0) as u64;
                let requested = if op.op == Op::Write {
                    self.write_object(key, offset, len)?
                } else {
                    self.read_object(key, offset, len)?
                };
                self.files.get_mut(&key).expect("open").pos = offset + len;
                if !requested {
                    none(self)?;
                }
                Ok(CallOutcome::made(len))
            }
            Op::Fsync | Op::Fdatasync => {
                if !self.ensure_object(op)? {
                    return Ok(CallOutcome::not_made());
                }
                let mut f = self.files.remove(&key).expect("open");
                let r = self.finish_upload(&mut f);
                self.files.insert(key, f);
                if !r? {
                    none(self)?;
                }
                Ok(CallOutcome::made(0))
            }
            Op::Truncate => {
                if let Some(u) = self.files.get_mut(&key).and_then(|f| f.upload.as_mut()) {
                    u.end = op.bytes.max(0) as u64;
                    u.sent = u.sent.min(u.end);
                    u.dirty = true;
                }
                none(self)
            }
            Op::Stat if op.fd >= 0 && self.files.contains_key(&key) => none(self),
            Op::Stat | Op::Access if op.path != NO_PATH => self.exists_object(op),
            Op::Getdents if op.path != NO_PATH => {
                let rel = self.places.rel_path(op.path)?;
                let prefix = self.target().key(&rel);
                let target = self.target();
                self.client
                    .list(&prefix)
                    .map_err(|e| failed(target, "listing", &rel, e))?;
                Ok(CallOutcome::made(0))
            }
            Op::Unlink if op.path != NO_PATH => {
                let rel = self.places.rel_path(op.path)?;
                let k = self.target().key(&rel);
                let target = self.target();
                self.client
                    .delete(&k)
                    .map_err(|e| failed(target, "deleting", &rel, e))?;
                Ok(CallOutcome::made(0))
            }
            Op::Rename if op.path != NO_PATH && op.path2 != NO_PATH => self.rename_object(op),
            Op::Mkdir | Op::Rmdir | Op::Link | Op::Symlink | Op::Lseek | Op::Mmap => none(self),
            _ => Ok(CallOutcome::not_made()),
        }
    }

    fn open_object(&mut self, op: &PlannedOp) -> ReplayResult<CallOutcome> {
        let rel = self.places.rel_path(op.path)?;
        let key = self.target().key(&rel);
        let info = &self.shared.survey.paths[op.path as usize];
        let writes = info.written
            && op
                .flags
                .is_none_or(|f| f & libc::O_ACCMODE != libc::O_RDONLY);
        if writes && !op.failed {
            // Nothing to ask: the object is made when the writes are sent.
            self.client.stats().no_request("open");
            let sending = match op.via {
                Via::Request => Sending::OnePut,
                Via::Multipart => Sending::TracedParts,
                _ => Sending::ByThreshold,
            };
            let upload = Upload {
                sending,
                ..Default::default()
            };
            self.add_object(op, rel, key, None, Some(upload));
            return Ok(CallOutcome::made(0));
        }
        if op.via.from_request() && !op.failed {
            // The request's own GET or listing follows; a failed one asks,
            // as the job's request was answered 404.
            self.client.stats().no_request("open");
            self.add_object(op, rel, key, None, None);
            return Ok(CallOutcome::made(0));
        }
        match self.client.head(&key) {
            Ok(size) => {
                if !op.failed {
                    self.add_object(op, rel, key, Some(size), None);
                }
                Ok(CallOutcome::made(0))
            }
            Err(RequestError::Missing) => Ok(CallOutcome::failed(libc::ENOENT)),
            Err(e) => Err(failed(self.target(), "open", &rel, e)),
        }
    }

    fn add_object(
        &mut self,
        op: &PlannedOp,
        rel: PathBuf,
        key: String,
        size: Option<u64>,
        upload: Option<Upload>,
    ) {
        let f = ObjectFile {
            id: op.path,
            rel,
            key,
            pos: 0,
            fetched: 0..0,
            size,
            upload,
        };
        self.files.insert((op.pid, op.fd), f);
    }

    /// The object a descriptor op refers to, taken from its path when the
    /// trace began after the open (no HEAD: the call that would have made
    /// one was not traced).
    fn ensure_object(&mut self, op: &PlannedOp) -> ReplayResult<bool> {
        let key = (op.pid, op.fd);
        if let Some(f) = self.files.get(&key) {
            if op.path == NO_PATH || f.id == op.path {
                return Ok(true);
            }
            // The descriptor was reused without a traced close.
            let mut old = self.files.remove(&key).expect("present");
            self.finish_upload(&mut old)?;
        }
        if op.path == NO_PATH {
            return Ok(false);
        }
        let rel = self.places.rel_path(op.path)?;
        let k = self.target().key(&rel);
        let written = self.shared.survey.paths[op.path as usize].written;
        let upload = (written || op.op == Op::Write).then(Upload::default);
        self.add_object(op, rel, k, None, upload);
        Ok(true)
    }

    /// Reads `len` bytes at `offset` as `--s3-read` says; whether a request was made.
    fn read_object(&mut self, key: (i32, i32), offset: u64, len: u64) -> ReplayResult<bool> {
        let mode = self.target().read;
        let span = self.target().coalesce;
        let target = self.target();
        let f = self.files.get_mut(&key).expect("open");
        if f.upload.as_ref().is_some_and(|u| u.dirty) || len == 0 {
            // Bytes this rank wrote and has not completed: its own buffer.
            return Ok(false);
        }
        let want = offset..offset + len;
        if mode != ReadMode::AsTraced && f.fetched.start <= want.start && want.end <= f.fetched.end
        {
            return Ok(false);
        }
        let fail = |e| failed(target, "read", &f.rel, e);
        f.fetched = match mode {
            // A ranged GET brings its range: the read's, or from the read
            // on as far as `--s3-coalesce` reaches within the object.
            ReadMode::AsTraced | ReadMode::Coalesce => {
                let range = if mode == ReadMode::AsTraced {
                    want.clone()
                } else {
                    let end = offset + len.max(span);
                    offset..f.size.map_or(end, |s| end.min(s).max(want.end))
                };
                let got = self.client.get(&f.key, Some(range.clone())).map_err(fail)?;
                range.start..range.start + got
            }
            // A whole GET brings the object and tells its size; parts
            // bring it from the read on.
            ReadMode::Whole => {
                let got = self.client.get(&f.key, None).map_err(fail)?;
                f.size = Some(got);
                0..got
            }
            ReadMode::Parallel => {
                let (got, size) = self
                    .client
                    .get_in_parts(&f.key, offset, target.part_size, target.concurrency)
                    .map_err(fail)?;
                f.size = Some(size);
                offset..offset + got
            }
        };
        if f.fetched.end < offset + len {
            return Err(ReplayError::io(
                "read",
                target.display(&f.rel),
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "object ends before offset {} that the trace read",
                        offset + len
                    ),
                ),
            ));
        }
        Ok(true)
    }

    /// Takes a write into the file's upload, sending the parts it fills;
    /// whether a request was made.
    fn write_object(&mut self, key: (i32, i32), offset: u64, len: u64) -> ReplayResult<bool> {
        let target = self.target();
        let data = self.upload_data();
        let f = self.files.get_mut(&key).expect("open");
        let u = f.upload.get_or_insert_with(Upload::default);
        u.end = u.end.max(offset + len);
        u.dirty = true;
        let mut requested = false;
        let fail = |e| failed(target, "write", &f.rel, e);
        // Parts go up as they fill; with `--s3-read parallel`, as a CRT
        // client's, a window of them at a time; a traced upload's, one a write.
        let (threshold, part_size, window) = match u.sending {
            Sending::OnePut => return Ok(false),
            Sending::ByThreshold => (
                target.multipart_threshold,
                target.part_size,
                target.upload_window(),
            ),
            Sending::TracedParts => (0, *u.part_size.get_or_insert(len.max(1)), 1),
        };
        while u.end >= threshold && u.end - u.sent >= part_size * window {
            if u.multipart.is_none() {
                let id = self.client.create_multipart(&f.key).map_err(fail)?;
                u.multipart = Some((id, Vec::new()));
            }
            let (id, parts) = u.multipart.as_mut().expect("started");
            let pieces = vec![&data[..part_size as usize]; window as usize];
            let sent = self
                .client
                .put_parts(&f.key, id, parts.len(), &pieces, target.concurrency)
                .map_err(fail)?;
            parts.extend(sent);
            u.sent += part_size * window;
            requested = true;
        }
        Ok(requested)
    }

    /// Completes the object `f` was writing, if written since it last was:
    /// one PUT, or the last part and the completion. Whether a request was made.
    fn finish_upload(&mut self, f: &mut ObjectFile) -> ReplayResult<bool> {
        let Some(u) = f.upload.as_mut().filter(|u| u.dirty) else {
            return Ok(false);
        };
        let target = self.target();
        let data = self.upload_data();
        let client = &mut self.client;
        let fail = |e| failed(target, "close", &f.rel, e);
        if u.sending == Sending::TracedParts && u.multipart.is_none() {
            // A traced upload of one part goes up as one, not as a PUT.
            let id = client.create_multipart(&f.key).map_err(fail)?;
            u.multipart = Some((id, Vec::new()));
        }
        let part_size = u.part_size.unwrap_or(target.part_size);
        match u.multipart.take() {
            None => client.put(&f.key, &data[..u.end as usize]).map_err(fail)?,
            Some((id, mut parts)) => {
                let mut finish = || {
                    if u.end > u.sent || parts.is_empty() {
                        // What is left, in parts (the last the shorter).
                        let rest = u.end - u.sent;
                        let pieces: Vec<_> = (0..rest.div_ceil(part_size).max(1))
                            .map(|i| {
                                let n = (rest - i * part_size).min(part_size);
                                &data[..n as usize]
                            })
                            .collect();
                        let first = parts.len();
                        let concurrency = target.concurrency;
                        parts.extend(client.put_parts(&f.key, &id, first, &pieces, concurrency)?);
                    }
                    client.complete(&f.key, &id, &parts)
                };
                if let Err(e) = finish() {
                    // No parts left behind on the store.
                    client.abort(&f.key, &id);
                    return Err(fail(e));
                }
            }
        }
        // A later write sends the whole object again.
        u.sent = 0;
        u.dirty = false;
        f.fetched = 0..0;
        Ok(true)
    }

    /// A stat or access: HEAD of the key, or for a directory one LIST of
    /// its prefix; missing is the call's ENOENT.
    fn exists_object(&mut self, op: &PlannedOp) -> ReplayResult<CallOutcome> {
        let rel = self.places.rel_path(op.path)?;
        let key = self.target().key(&rel);
        let is_dir = self.shared.survey.paths[op.path as usize].is_dir;
        let target = self.target();
        let client = &mut self.client;
        let found = if is_dir {
            client.any_beneath(&key)
        } else {
            client.head(&key).map(|_| true)
        };
        match found {
            Ok(true) => Ok(CallOutcome::made(0)),
            Ok(false) | Err(RequestError::Missing) => Ok(CallOutcome::failed(libc::ENOENT)),
            Err(e) => Err(failed(target, op.op.as_str(), &rel, e)),
        }
    }

    fn rename_object(&mut self, op: &PlannedOp) -> ReplayResult<CallOutcome> {
        let (from, to) = (
            self.places.rel_path(op.path)?,
            self.places.rel_path(op.path2)?,
        );
        let (a, b) = (self.target().key(&from), self.target().key(&to));
        let target = self.target();
        let client = &mut self.client;
        match client.copy(&a, &b) {
            Ok(()) => {}
            Err(RequestError::Missing) => return Ok(CallOutcome::failed(libc::ENOENT)),
            Err(e) => return Err(failed(target, "rename", &from, e)),
        }
        client
            .delete(&a)
            .map_err(|e| failed(target, "rename", &from, e))?;
        Ok(CallOutcome::made(0))
    }

    /// At the rank's end: every object still being written is completed,
    /// as a closing job's would be (nothing written is left unsent).
    pub fn finish(&mut self) -> ReplayResult<()> {
        let open: Vec<_> = self.files.drain().map(|(_, f)| f).collect();
        for mut f in open {
            self.finish_upload(&mut f)?;
        }
        Ok(())
    }

    /// After the rank failed: the multipart uploads it had under way are
    /// abandoned, so no parts are left on the store.
    pub fn abort_uploads(&mut self) {
        for f in self.files.values_mut() {
            if let Some((id, _)) = f.upload.as_mut().and_then(|u| u.multipart.take()) {
                self.client.abort(&f.key, &id);
            }
        }
    }

    /// The rank's request figures, for its result.
    pub fn request_stats(&self) -> RequestStats {
        self.client.stats().clone()
    }
}
