//! A job's object-storage requests (op `request`) as the file calls they
//! stand for, so that the survey, the roles, the phases, the scaling model
//! and the stream take them as they take files: an object is the file
//! `/BUCKET/KEY`, beneath the target as any traced path is. The rows are
//! turned as the trace is read ([`replay_events`]); the trace is not changed.
//!
//! | request | file calls on `/BUCKET/KEY`, at the request's time |
//! |---|---|
//! | GET (a range, or the whole object) | open, read of the range (whole: from 0, the bytes received; its time is the request's), close |
//! | PUT | open for writing, write of the body, close |
//! | POST `?uploads` | open for writing, held until the upload completes |
//! | PUT part N | write of the part at (N - 1) x the upload's first part's size |
//! | POST `?uploadId` | close |
//! | HEAD | stat |
//! | DELETE | unlink |
//! | a listing of `PREFIX` | open of `PREFIX`'s directory, getdents, close |
//!
//! A GET or HEAD answered 404 is an open or stat that failed with ENOENT.
//! A request left unanswered or answered with another error, an aborted
//! upload, a multi-object delete and a bucket's own settings stay requests,
//! which the replay leaves out and counts ([`crate::plan::scope`]).
//!
//! The calls carry [`VIA_REQUEST`] (or [`VIA_MULTIPART`] for an upload's),
//! so that a bucket target makes each the request it was: a GET of the same
//! range without a HEAD first, one PUT, parts of the traced size
//! (`crate::execute`). A directory target makes the file calls.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_select::interleave::interleave_record_batch;

use iorepro_format::object_requests::{Action, ObjectRequest};
use iorepro_format::{EventBatchBuilder, EventRow, Events, Exchange, Op, TraceReader, TraceResult};

/// `via` of the calls a request stands for.
pub const VIA_REQUEST: &str = "request";
/// `via` of the calls a multipart upload stands for.
pub const VIA_MULTIPART: &str = "multipart";

/// The descriptor of a request's open, read and close: they come one after
/// another, so one number serves every request of a process. Far above
/// what a process opens, so it meets none of the job's own.
const REQUEST_FD: i32 = 1 << 30;

/// What a listing asks for: a getdents buffer of the usual size.
const LISTING_BUFFER: i64 = 32 << 10;

/// Rows as the replay reads them: each request replaced by its file calls.
pub fn replay_events(
    reader: &TraceReader,
) -> TraceResult<impl Iterator<Item = TraceResult<Events>> + Send> {
    let mut calls = RequestCalls {
        trace: reader.root().to_path_buf(),
        ..Default::default()
    };
    let turn = reader.may_hold_requests();
    Ok(reader
        .events()?
        .map(move |ev| if turn { calls.turn(ev?) } else { ev }))
}

/// An upload under way: its descriptor and the size of its parts.
#[derive(Debug, Clone, Copy)]
struct Upload {
    fd: i32,
    part_size: Option<i64>,
}

/// The state that spans rows: the uploads under way.
#[derive(Default)]
struct RequestCalls {
    /// The trace, for messages.
    trace: std::path::PathBuf,
    /// By process and object path.
    uploads: HashMap<(i32, String), Upload>,
    uploads_begun: i32,
}

/// A file call a request stands for.
struct Call {
    op: Op,
    fd: Option<i32>,
    offset: Option<i64>,
    size: Option<i64>,
    ret: i64,
    flags: Option<i32>,
    dur_ns: i64,
    via: &'static str,
    /// The directory of a listing, not the object.
    path: Option<String>,
}

impl Call {
    fn new(op: Op, ret: i64) -> Call {
        Call {
            op,
            fd: None,
            offset: None,
            size: None,
            ret,
            flags: None,
            dur_ns: 0,
            via: VIA_REQUEST,
            path: None,
        }
    }

    fn on(mut self, fd: i32) -> Call {
        self.fd = Some(fd);
        self
    }
}

const WRITE_NEW: i32 = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;

impl RequestCalls {
    /// `ev` with its requests turned into file calls (as it was when it holds none).
    fn turn(&mut self, ev: Events) -> TraceResult<Events> {
        // A batch whose op dictionary names no request holds none: its
        // rows are not decoded here (its readers decode them).
        let names: &arrow_array::StringArray = ev.op_dict().values().as_string();
        if !names.iter().any(|n| n == Some(Op::Request.as_str())) {
            return Ok(ev);
        }
        let ops = ev.ops();
        if !ops.contains(&Op::Request) {
            return Ok(ev);
        }
        // Built rows have a path per row: the batch's go the same way.
        let ev = ev
            .with_plain_paths()
            .map_err(|e| iorepro_format::TraceError::Invalid {
                path: self.trace.clone(),
                problem: format!("its requests as file calls: {e}"),
            })?;
        let mut built = EventBatchBuilder::with_capacity(ops.len());
        let mut order: Vec<(usize, usize)> = Vec::with_capacity(ops.len());
        for (row, &op) in ops.iter().enumerate() {
            let calls = match (op, ev.exchange_at(row)) {
                (Op::Request, Some(x)) => self.calls_of(&ev, row, &x),
                _ => None,
            };
            let Some((object, calls)) = calls else {
                order.push((0, row));
                continue;
            };
            let host = ev.host_at(row);
            let pid = ev.pid().value(row);
            for c in &calls {
                order.push((1, built.len()));
                let path = c.path.as_deref().unwrap_or(&object);
                built.push(&EventRow {
                    dur_ns: c.dur_ns,
                    pid,
                    tid: ev.tid().value(row),
                    rank: Events::opt_i32(ev.rank(), row),
                    path: Some(path),
                    fd: c.fd,
                    offset: c.offset,
                    size: c.size,
                    ret: c.ret,
                    flags: c.flags,
                    via: Some(c.via),
                    ..EventRow::single(ev.ts().value(row), host, "", c.op)
                });
            }
        }
        let calls = built.finish();
        let batch = interleave_record_batch(&[ev.batch(), &calls], &order).map_err(|e| {
            iorepro_format::TraceError::Invalid {
                path: self.trace.clone(),
                problem: format!("its requests as file calls: {e}"),
            }
        })?;
        Ok(Events::new(batch))
    }

    /// The object's path and the calls request `row` stands for; `None`
    /// for one the replay leaves a request.
    fn calls_of(&mut self, ev: &Events, row: usize, x: &Exchange) -> Option<(String, Vec<Call>)> {
        let url = ev.path_at(row)?;
        let request = ObjectRequest::parse(x.method, url)?;
        let object = format!("/{}/{}", request.bucket, request.key);
        let missing = x.status == Some(404);
        if !(x.status.is_some_and(|s| (200..400).contains(&s)) || missing) {
            return None;
        }
        let dur_ns = ev.dur_ns().value(row).max(0);
        let pid = ev.pid().value(row);
        let calls = match request.action {
            Action::Get | Action::Head | Action::Delete if missing => {
                missing_calls(&request.action, dur_ns)
            }
            _ if missing => return None,
            Action::Get => {
                let offset = Events::opt_i64(ev.offset(), row).unwrap_or(0).max(0);
                get_calls(offset, x.received.max(0), dur_ns)
            }
            Action::Put => put_calls(x.sent.max(0), dur_ns),
            Action::CreateUpload => {
                let upload = self.begin_upload(pid, &object);
                vec![Call {
                    dur_ns,
                    ..upload_open(upload)
                }]
            }
            Action::UploadPart { number } => {
                self.part_calls((pid, &object), number, x.sent.max(0), dur_ns)
            }
            Action::CompleteUpload => {
                let upload = self.uploads.remove(&(pid, object.clone()))?;
                vec![Call {
                    dur_ns,
                    via: VIA_MULTIPART,
                    ..Call::new(Op::Close, 0).on(upload.fd)
                }]
            }
            Action::Head => vec![Call {
                dur_ns,
                ..Call::new(Op::Stat, 0)
            }],
            Action::Delete => vec![Call {
                dur_ns,
                ..Call::new(Op::Unlink, 0)
            }],
            Action::List { prefix } => {
                listing_calls(&request.bucket, &prefix, x.received.max(0), dur_ns)
            }
            Action::AbortUpload => {
                // The replay would complete what the job threw away.
                self.uploads.remove(&(pid, object));
                return None;
            }
            Action::DeleteMany | Action::Other => return None,
        };
        Some((object, calls))
    }

    /// A part of an upload: a write at its place in the object, the part
    /// size being the upload's first part's. An upload the capture saw no
    /// beginning of (it began before the capture) is opened first.
    fn part_calls(
        &mut self,
        (pid, object): (i32, &str),
        number: u32,
        bytes: i64,
        dur_ns: i64,
    ) -> Vec<Call> {
        let key = (pid, object.to_string());
        let mut calls = Vec::new();
        let upload = match self.uploads.get(&key) {
            Some(u) => *u,
            None => {
                let u = self.begin_upload(pid, object);
                calls.push(upload_open(u));
                u
            }
        };
        let part_size = *self
            .uploads
            .get_mut(&key)
            .expect("begun")
            .part_size
            .get_or_insert(bytes);
        calls.push(
            Call {
                offset: Some(i64::from(number.max(1) - 1) * part_size),
                size: Some(bytes),
                dur_ns,
                via: VIA_MULTIPART,
                ..Call::new(Op::Write, bytes)
            }
            .on(upload.fd),
        );
        calls
    }

    /// A new upload's descriptor: one of its own, as it stays open while
    /// the process makes other requests.
    fn begin_upload(&mut self, pid: i32, object: &str) -> Upload {
        self.uploads_begun = self.uploads_begun.wrapping_add(1) % (1 << 29);
        let upload = Upload {
            fd: REQUEST_FD + 1 + self.uploads_begun,
            part_size: None,
        };
        self.uploads.insert((pid, object.to_string()), upload);
        upload
    }
}

/// A GET, HEAD or DELETE answered 404: the open, stat or unlink that
/// failed with ENOENT, so that the replay meets the same absence.
fn missing_calls(action: &Action, dur_ns: i64) -> Vec<Call> {
    let op = match action {
        Action::Get => Op::Open,
        Action::Head => Op::Stat,
        _ => Op::Unlink,
    };
    vec![Call {
        flags: (op == Op::Open).then_some(libc::O_RDONLY),
        dur_ns,
        ..Call::new(op, -(libc::ENOENT as i64))
    }]
}

/// A GET of `bytes` from `offset`: open, the read (which takes the
/// request's time), close.
fn get_calls(offset: i64, bytes: i64, dur_ns: i64) -> Vec<Call> {
    let fd = REQUEST_FD;
    vec![
        Call {
            flags: Some(libc::O_RDONLY),
            ..Call::new(Op::Open, fd as i64)
        },
        Call {
            offset: Some(offset),
            size: Some(bytes),
            dur_ns,
            ..Call::new(Op::Read, bytes)
        }
        .on(fd),
        Call::new(Op::Close, 0).on(fd),
    ]
}

/// A PUT of `bytes`: open for writing, the write of the body (none for an
/// empty object, which the open alone makes), close.
fn put_calls(bytes: i64, dur_ns: i64) -> Vec<Call> {
    let fd = REQUEST_FD;
    let mut calls = vec![Call {
        flags: Some(WRITE_NEW),
        ..Call::new(Op::Open, fd as i64)
    }];
    if bytes > 0 {
        calls.push(
            Call {
                offset: Some(0),
                size: Some(bytes),
                dur_ns,
                ..Call::new(Op::Write, bytes)
            }
            .on(fd),
        );
    }
    calls.push(Call::new(Op::Close, 0).on(fd));
    calls
}

/// The open an upload begins with: held on the upload's own descriptor
/// until the upload completes.
fn upload_open(upload: Upload) -> Call {
    Call {
        flags: Some(WRITE_NEW),
        via: VIA_MULTIPART,
        ..Call::new(Op::Open, upload.fd as i64)
    }
}

/// A listing of `prefix` in `bucket`: the open, getdents and close of the
/// prefix's directory, the getdents bringing what the listing received.
fn listing_calls(bucket: &str, prefix: &str, received: i64, dur_ns: i64) -> Vec<Call> {
    let fd = REQUEST_FD;
    let dir = match prefix.rfind('/') {
        Some(at) => format!("/{bucket}/{}", &prefix[..at]),
        None => format!("/{bucket}"),
    };
    let on_dir = |c: Call| Call {
        path: Some(dir.clone()),
        ..c
    };
    vec![
        on_dir(Call {
            flags: Some(libc::O_RDONLY | libc::O_DIRECTORY),
            ..Call::new(Op::Open, fd as i64)
        }),
        on_dir(
            Call {
                size: Some(LISTING_BUFFER),
                dur_ns,
                ..Call::new(Op::Getdents, received)
            }
            .on(fd),
        ),
        on_dir(Call::new(Op::Close, 0).on(fd)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One request row, as the collector writes it.
    fn push(
        b: &mut EventBatchBuilder,
        (ts, pid): (i64, i32),
        (method, url, status): (&str, &str, Option<i32>),
        range: Option<(i64, i64)>,
        (sent, received): (i64, i64),
    ) {
        let x = Exchange {
            method,
            status,
            first_byte_ns: None,
            sent,
            received,
        };
        b.push(&EventRow {
            pid,
            rank: Some(0),
            path: Some(url),
            fd: Some(7),
            offset: range.map(|r| r.0),
            size: range.map(|r| r.1),
            ret: sent + received,
            exchange: Some(&x),
            ..EventRow::single(ts, "h", "python3", Op::Request)
        });
    }

    /// (op, path, fd, offset, size, ret, via) of every row.
    type Shown = (
        Op,
        String,
        Option<i32>,
        Option<i64>,
        Option<i64>,
        i64,
        Option<String>,
    );

    fn shown(ev: &Events) -> Vec<Shown> {
        (0..ev.len())
            .map(|r| {
                (
                    ev.op(r),
                    ev.path_at(r).unwrap_or_default().to_string(),
                    Events::opt_i32(ev.fd(), r),
                    Events::opt_i64(ev.offset(), r),
                    Events::opt_i64(ev.size(), r),
                    ev.ret().value(r),
                    ev.via_at(r).map(str::to_string),
                )
            })
            .collect()
    }

    #[test]
    fn each_request_becomes_the_file_calls_it_stands_for() {
        let u = "http://127.0.0.1:8000/jobb";
        let o = |key: &str| format!("{u}/p1/{key}");
        let part = |n| o(&format!("ckpt/m.bin?uploadId=2~x&partNumber={n}"));
        // (ts, pid), (method, URL, status), range, (sent, received)
        type Sent<'a> = (
            (i64, i32),
            (&'a str, String, Option<i32>),
            Option<(i64, i64)>,
            (i64, i64),
        );
        #[rustfmt::skip]
        let requests: Vec<Sent> = vec![
            ((1, 10), ("GET", format!("{u}?list-type=2&prefix=p1%2Ftrain%2F"), Some(200)), None, (0, 4193)),
            ((2, 10), ("HEAD", o("train/s-0.bin"), Some(200)), None, (0, 0)),
            ((3, 11), ("GET", o("train/s-1.bin"), Some(206)), Some((131072, 131072)), (0, 131072)),
            ((4, 11), ("GET", o("train/s-2.bin"), Some(200)), None, (0, 262144)),
            ((5, 11), ("GET", o("train/gone.bin"), Some(404)), None, (0, 0)),
            ((6, 10), ("POST", o("ckpt/m.bin?uploads"), Some(200)), None, (0, 252)),
            ((7, 10), ("PUT", part(1), Some(200)), None, (5 << 20, 0)),
            ((8, 10), ("GET", o("train/s-3.bin"), Some(503)), None, (0, 0)),
            ((9, 10), ("PUT", part(2), Some(200)), None, (2 << 20, 0)),
            ((10, 10), ("POST", o("ckpt/m.bin?uploadId=2~x"), Some(200)), None, (357, 277)),
            ((11, 10), ("PUT", o("run/r.json"), Some(200)), None, (13, 0)),
            ((12, 10), ("DELETE", o("run/old.json"), Some(204)), None, (0, 0)),
            ((13, 10), ("GET", format!("{u}?location"), Some(200)), None, (0, 100)),
        ];
        let mut b = EventBatchBuilder::with_capacity(16);
        for (at, (method, url, status), range, bytes) in &requests {
            push(&mut b, *at, (method, url, *status), *range, *bytes);
        }
        b.push(&EventRow {
            path: Some("/data/x"),
            ret: 3,
            ..EventRow::single(14, "h", "python3", Op::Stat)
        });
        let mut calls = RequestCalls::default();
        let ev = calls.turn(Events::new(b.finish())).unwrap();
        let (fd, up) = (Some(REQUEST_FD), Some(REQUEST_FD + 2));
        let req = Some(VIA_REQUEST.to_string());
        let mp = Some(VIA_MULTIPART.to_string());
        let s = |p: &str| format!("/jobb/p1/{p}");
        let shown = shown(&ev);
        #[rustfmt::skip]
        let want: Vec<Shown> = vec![
            (Op::Open, "/jobb/p1/train".into(), None, None, None, REQUEST_FD as i64, req.clone()),
            (Op::Getdents, "/jobb/p1/train".into(), fd, None, Some(LISTING_BUFFER), 4193, req.clone()),
            (Op::Close, "/jobb/p1/train".into(), fd, None, None, 0, req.clone()),
            (Op::Stat, s("train/s-0.bin"), None, None, None, 0, req.clone()),
            (Op::Open, s("train/s-1.bin"), None, None, None, REQUEST_FD as i64, req.clone()),
            (Op::Read, s("train/s-1.bin"), fd, Some(131072), Some(131072), 131072, req.clone()),
            (Op::Close, s("train/s-1.bin"), fd, None, None, 0, req.clone()),
            (Op::Open, s("train/s-2.bin"), None, None, None, REQUEST_FD as i64, req.clone()),
            (Op::Read, s("train/s-2.bin"), fd, Some(0), Some(262144), 262144, req.clone()),
            (Op::Close, s("train/s-2.bin"), fd, None, None, 0, req.clone()),
            (Op::Open, s("train/gone.bin"), None, None, None, -(libc::ENOENT as i64), req.clone()),
            (Op::Open, s("ckpt/m.bin"), None, None, None, up.unwrap() as i64, mp.clone()),
            (Op::Write, s("ckpt/m.bin"), up, Some(0), Some(5 << 20), 5 << 20, mp.clone()),
            // A 503 stays a request.
            (Op::Request, format!("{u}/p1/train/s-3.bin"), Some(7), None, None, 0, None),
            (Op::Write, s("ckpt/m.bin"), up, Some(5 << 20), Some(2 << 20), 2 << 20, mp.clone()),
            (Op::Close, s("ckpt/m.bin"), up, None, None, 0, mp.clone()),
            (Op::Open, s("run/r.json"), None, None, None, REQUEST_FD as i64, req.clone()),
            (Op::Write, s("run/r.json"), fd, Some(0), Some(13), 13, req.clone()),
            (Op::Close, s("run/r.json"), fd, None, None, 0, req.clone()),
            (Op::Unlink, s("run/old.json"), None, None, None, 0, req.clone()),
            (Op::Request, format!("{u}?location"), Some(7), None, None, 100, None),
            (Op::Stat, "/data/x".into(), None, None, None, 3, None),
        ];
        assert_eq!(shown.len(), want.len(), "{shown:#?}");
        for (got, want) in shown.iter().zip(&want) {
            assert_eq!(got, want);
        }
        assert!(calls.uploads.is_empty(), "the upload completed");
        let ts: Vec<i64> = (0..ev.len()).map(|r| ev.ts().value(r)).collect();
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "still in time order");
    }

    #[test]
    fn a_batch_without_requests_is_left_as_it_is() {
        let mut b = EventBatchBuilder::with_capacity(1);
        b.push(&EventRow::single(1, "h", "c", Op::Read));
        let batch = b.finish();
        let ev = RequestCalls::default()
            .turn(Events::new(batch.clone()))
            .unwrap();
        assert_eq!(ev.batch(), &batch);
    }
}
