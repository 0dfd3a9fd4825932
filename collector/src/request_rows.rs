//! Object-storage requests, put together from the socket records of the
//! kernel side (`sockets` there): each send on a socket that carries HTTP,
//! with the head of its bytes, and each receive, with the head of an
//! answer's first bytes. One request becomes one row of op `request`
//! (see `iorepro_format::schema::COL_METHOD`).
//!
//! A connection (a process's socket) holds at most one request at a time,
//! as HTTP/1.1 without pipelining does:
//! - a send that begins with a request line ends the connection's request
//!   before it (if any) and begins a new one; the bytes past its headers,
//!   and every later send until the answer begins, are its body;
//! - the first receive after a send parses the answer's status line and
//!   headers (`100 Continue` is passed over); the bytes past them are its
//!   body;
//! - the request ends when its answer's body is whole (`Content-Length`,
//!   or none for `HEAD`, 204 and 304), when the peer closes, when the next
//!   request begins, or when the capture ends.
//!
//! Only the heads are read; a body is counted, never kept. Neither is the
//! Authorization header, nor any part of the query string but the S3
//! parameters that say what a request does ([`KEPT_PARAMETERS`]: a
//! listing's prefix, a multipart upload's id and part): a presigned URL's
//! signature never reaches the trace.

use std::rc::Rc;

use iorepro_format::event::Exchange;
use iorepro_format::Op;
use rustc_hash::FxHashMap;

use crate::rows::Row;

/// A send or a receive on a request socket, as the kernel side recorded it.
pub struct SocketCall<'a> {
    pub pid_tgid: u64,
    /// The socket's inode: with the process, the connection.
    pub socket: u64,
    pub fd: i32,
    /// Entry of the call, on the kernel's monotonic clock.
    pub ts_ns: u64,
    pub dur_ns: u64,
    /// Bytes moved; 0 for a receive: the peer closed.
    pub moved: u64,
    /// The head of the bytes moved (empty for a receive past an answer's first).
    pub head: &'a [u8],
    /// The bytes went through TLS (seen at OpenSSL's calls, not the socket's).
    pub tls: bool,
}

/// A record that only marks a connection (it moved no bytes of a request).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mark {
    /// A socket whose first send was a TLS handshake.
    Handshake,
    /// An OpenSSL session whose first write was no HTTP request.
    OpenSslSession,
}

/// The requests under way, by connection.
#[derive(Default)]
pub struct Requests {
    open: FxHashMap<(u32, u64), Request>,
    /// By process: TLS handshakes on its sockets, and whether OpenSSL's
    /// calls were seen in it.
    tls: FxHashMap<u32, (u64, bool)>,
}

struct Request {
    pid_tgid: u64,
    fd: i32,
    start_ns: u64,
    end_ns: u64,
    method: &'static str,
    url: String,
    range: Option<(i64, i64)>,
    /// The request's `Content-Length`.
    body_len: Option<u64>,
    /// Its body is sent in chunks (no length ahead).
    chunked: bool,
    sent: u64,
    answer: Option<Answer>,
}

struct Answer {
    status: u16,
    first_byte_ns: u64,
    /// Body bytes the answer will hold, where its headers say.
    body_len: Option<u64>,
    received: u64,
}

impl Request {
    /// Its (final) answer has begun.
    fn answered(&self) -> bool {
        self.answer.as_ref().is_some_and(|a| a.status != 100)
    }

    fn whole(&self) -> bool {
        self.answer
            .as_ref()
            .is_some_and(|a| a.body_len.is_some_and(|n| a.received >= n))
    }
}

/// The ends of a finished request, with the process's rank.
pub struct Finished {
    pub pid_tgid: u64,
    row: Row,
}

impl Finished {
    pub fn into_row(self, rank: Option<i32>) -> Row {
        Row { rank, ..self.row }
    }
}

impl Requests {
    /// A connection's mark, from process `tgid`.
    pub fn on_mark(&mut self, tgid: u32, mark: Mark) {
        let seen = self.tls.entry(tgid).or_default();
        match mark {
            Mark::Handshake => seen.0 += 1,
            Mark::OpenSslSession => seen.1 = true,
        }
    }

    /// The processes that opened TLS connections on their sockets with no
    /// OpenSSL call seen, each with how many: their TLS is a library the
    /// uprobes do not see, and their requests are not in the trace.
    pub fn unseen_tls(&self) -> Vec<(u32, u64)> {
        let mut unseen: Vec<(u32, u64)> = self
            .tls
            .iter()
            .filter(|(_, (hellos, openssl))| *hellos > 0 && !openssl)
            .map(|(&pid, &(hellos, _))| (pid, hellos))
            .collect();
        unseen.sort_unstable();
        unseen
    }

    /// A send: a new request, or more of the body of the one under way.
    /// Returns the request it ended, if any.
    pub fn on_send(&mut self, call: &SocketCall, wall_offset_ns: i64) -> Option<Finished> {
        if call.tls {
            self.on_mark((call.pid_tgid >> 32) as u32, Mark::OpenSslSession);
        }
        let key = ((call.pid_tgid >> 32) as u32, call.socket);
        let end = call.ts_ns + call.dur_ns;
        if let Some(open) = self.open.get_mut(&key) {
            let expects_more = open.body_len.map_or(open.chunked, |n| open.sent < n);
            let still_body = open.answer.as_ref().is_none_or(|a| a.status == 100) && expects_more;
            if still_body {
                open.sent += call.moved;
                open.end_ns = end;
                return None;
            }
        }
        let head = parse_request(call.head)?;
        let body = match head.header_len {
            Some(h) => call.moved.saturating_sub(h as u64),
            // Headers longer than the head: the whole send is headers.
            None => 0,
        };
        let fresh = Request {
            pid_tgid: call.pid_tgid,
            fd: call.fd,
            start_ns: call.ts_ns,
            end_ns: end,
            method: head.method,
            url: format!(
                "{}://{}{}",
                if call.tls { "https" } else { "http" },
                head.host.unwrap_or("-"),
                head.path
            ),
            range: head.range,
            body_len: head.content_length,
            chunked: head.chunked,
            sent: body,
            answer: None,
        };
        self.open
            .insert(key, fresh)
            .map(|done| finish(done, wall_offset_ns))
    }

    /// A receive: an answer's start, more of its body, or its end.
    pub fn on_recv(&mut self, call: &SocketCall, wall_offset_ns: i64) -> Option<Finished> {
        let key = ((call.pid_tgid >> 32) as u32, call.socket);
        let open = self.open.get_mut(&key)?;
        if call.moved == 0 {
            let done = self.open.remove(&key)?;
            return Some(finish(done, wall_offset_ns));
        }
        let end = call.ts_ns + call.dur_ns;
        open.end_ns = end;
        let first = !call.head.is_empty() && open.answer.as_ref().is_none_or(|a| a.status == 100);
        match (first, &mut open.answer) {
            (true, _) => {
                let head = parse_answer(call.head)?;
                let bodiless = open.method == "HEAD"
                    || head.status == 204
                    || head.status == 304
                    || head.status < 200;
                let received = head
                    .header_len
                    .map_or(0, |h| call.moved.saturating_sub(h as u64));
                open.answer = Some(Answer {
                    status: head.status,
                    first_byte_ns: end - open.start_ns,
                    body_len: if bodiless {
                        Some(0)
                    } else {
                        head.content_length
                    },
                    received,
                });
            }
            (false, Some(answer)) => answer.received += call.moved,
            (false, None) => return None,
        }
        if open.whole() && open.answered() {
            let done = self.open.remove(&key)?;
            return Some(finish(done, wall_offset_ns));
        }
        None
    }

    /// Ends the requests whose answer has begun and moved nothing since
    /// `idle_since_ns` (monotonic clock): a chunked answer, whose end the
    /// heads do not show, on a connection not used again. Returns them and
    /// when the oldest request still under way began: rows are held back
    /// for it, so that its row, stamped with its start, is written in
    /// order. (Bytes of an answer that come after such a pause are not
    /// counted.)
    pub fn settle(
        &mut self,
        idle_since_ns: u64,
        wall_offset_ns: i64,
    ) -> (Vec<Finished>, Option<u64>) {
        let done = self
            .open
            .extract_if(|_, r| r.answered() && r.end_ns < idle_since_ns)
            .map(|(_, r)| finish(r, wall_offset_ns))
            .collect();
        let oldest = self.open.values().map(|r| r.start_ns).min();
        (done, oldest)
    }

    /// Every request still under way (the capture is ending).
    pub fn drain(&mut self, wall_offset_ns: i64) -> Vec<Finished> {
        let mut done: Vec<Request> = self.open.drain().map(|(_, r)| r).collect();
        done.sort_by_key(|r| r.start_ns);
        done.into_iter()
            .map(|r| finish(r, wall_offset_ns))
            .collect()
    }
}

/// The row of a request.
fn finish(r: Request, wall_offset_ns: i64) -> Finished {
    let answer = r.answer.as_ref().filter(|a| a.status != 100);
    let received = answer.map_or(0, |a| a.received);
    let (offset, size) = match r.range {
        Some((from, to)) => (Some(from), Some(to - from + 1)),
        None => (None, r.body_len.map(|n| n as i64)),
    };
    let row = Row {
        ts_ns: r.start_ns as i64 + wall_offset_ns,
        dur_ns: (r.end_ns - r.start_ns) as i64,
        pid: (r.pid_tgid >> 32) as i32,
        tid: r.pid_tgid as u32 as i32,
        rank: None,
        op: Op::Request,
        path: Some(Rc::from(r.url.as_str())),
        fd: Some(r.fd),
        offset,
        size,
        ret: (r.sent + received) as i64,
        flags: None,
        calls: 1,
        span_ns: None,
        path2: None,
        via: None,
        exchange: Some(Box::new(Exchange {
            method: r.method,
            status: answer.map(|a| a.status as i32),
            first_byte_ns: answer.map(|a| a.first_byte_ns as i64),
            sent: r.sent as i64,
            received: received as i64,
        })),
        from_storage: None,
    };
    Finished {
        pid_tgid: r.pid_tgid,
        row,
    }
}

/// The methods a request row may name (the column is a closed vocabulary).
const METHODS: [&str; 7] = ["GET", "PUT", "POST", "HEAD", "DELETE", "PATCH", "OPTIONS"];

/// What a request's head says.
#[derive(Debug, PartialEq, Eq)]
struct RequestHead<'a> {
    method: &'static str,
    /// The target's path, with the query parameters kept.
    path: String,
    host: Option<&'a str>,
    /// `Range: bytes=A-B`, both ends given.
    range: Option<(i64, i64)>,
    content_length: Option<u64>,
    /// `Transfer-Encoding: chunked`.
    chunked: bool,
    /// Bytes up to the blank line after the headers, where the head holds it.
    header_len: Option<usize>,
}

/// What an answer's head says.
#[derive(Debug, PartialEq, Eq)]
struct AnswerHead {
    status: u16,
    content_length: Option<u64>,
    header_len: Option<usize>,
}

/// The request line and the headers that matter, from a send's head.
fn parse_request(head: &[u8]) -> Option<RequestHead<'_>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let header_len = head_len(parser().parse_request(&mut request, head))?;
    let method = METHODS.into_iter().find(|m| request.method == Some(*m))?;
    let target = request.path?;
    // A request line cut before its version is no request read.
    request.version?;
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    // A request to a proxy names the whole URL: keep its path.
    let (host_in_target, path) = match path.strip_prefix("http://") {
        Some(rest) => match rest.find('/') {
            Some(i) => (Some(&rest[..i]), &rest[i..]),
            None => (Some(rest), "/"),
        },
        None => (None, path),
    };
    let kept = kept_query(query);
    let path = if kept.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{kept}")
    };
    let mut out = RequestHead {
        method,
        path,
        host: host_in_target,
        range: None,
        content_length: None,
        chunked: false,
        header_len,
    };
    for (name, value) in read_headers(request.headers) {
        if name.eq_ignore_ascii_case("host") && out.host.is_none() {
            out.host = Some(value);
        } else if name.eq_ignore_ascii_case("range") {
            out.range = parse_range(value);
        } else if name.eq_ignore_ascii_case("content-length") {
            out.content_length = value.parse().ok();
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            out.chunked = value.eq_ignore_ascii_case("chunked");
        }
    }
    Some(out)
}

/// An answer's status line and length, from a receive's head.
fn parse_answer(head: &[u8]) -> Option<AnswerHead> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut answer = httparse::Response::new(&mut headers);
    let header_len = head_len(parser().parse_response(&mut answer, head))?;
    let status = answer.code?;
    let content_length = read_headers(answer.headers)
        .filter(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .last()
        .and_then(|(_, value)| value.parse().ok());
    Some(AnswerHead {
        status,
        content_length,
        header_len,
    })
}

/// The most header lines a head is read for (a head of more, each under
/// 16 bytes on average, is not read): far more than a client or a store
/// sends in the bytes a head holds.
const MAX_HEADERS: usize = 128;

/// httparse, passing over a header line it cannot read rather than the
/// whole head.
fn parser() -> httparse::ParserConfig {
    let mut config = httparse::ParserConfig::default();
    config
        .ignore_invalid_headers_in_requests(true)
        .ignore_invalid_headers_in_responses(true);
    config
}

/// A head's length up to and with the blank line after its headers
/// (`Some(None)` when the head was cut before it, as a head is at
/// [`REQUEST_HEAD`](iorepro_common::REQUEST_HEAD) bytes); `None` for
/// bytes that are no HTTP head.
fn head_len(parsed: httparse::Result<usize>) -> Option<Option<usize>> {
    match parsed {
        Ok(httparse::Status::Complete(len)) => Some(Some(len)),
        Ok(httparse::Status::Partial) => Some(None),
        Err(_) => None,
    }
}

/// The headers httparse read, as (name, value) text. Of a head cut short,
/// these are the lines whole before the cut (httparse leaves them first in
/// the array, the places it did not fill with an empty name), so a header
/// line cut at the head's end is left out.
fn read_headers<'h, 'b>(
    headers: &'h [httparse::Header<'b>],
) -> impl Iterator<Item = (&'b str, &'b str)> + 'h {
    headers
        .iter()
        .take_while(|h| !h.name.is_empty())
        .filter_map(|h| Some((h.name, std::str::from_utf8(h.value).ok()?.trim())))
}

/// The query parameters a request row keeps: what an S3 request does, never
/// who signed it.
const KEPT_PARAMETERS: [&str; 12] = [
    "list-type",
    "prefix",
    "delimiter",
    "max-keys",
    "start-after",
    "uploads",
    "uploadId",
    "partNumber",
    "delete",
    "versionId",
    "versioning",
    "location",
];

/// `query` with only the [`KEPT_PARAMETERS`], in their order.
fn kept_query(query: &str) -> String {
    query
        .split('&')
        .filter(|p| {
            let name = p.split('=').next().unwrap_or(p);
            KEPT_PARAMETERS.contains(&name)
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// `bytes=A-B` (one range, both ends given); a suffix or an open end is
/// none the row can state as an offset and a size.
fn parse_range(value: &str) -> Option<(i64, i64)> {
    let spec = value.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (from, to) = spec.split_once('-')?;
    let (from, to): (i64, i64) = (from.trim().parse().ok()?, to.trim().parse().ok()?);
    (to >= from).then_some((from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GET: &[u8] =
        b"GET /bucket/train/shard-0003.tar?partNumber=1&X-Amz-Signature=abc HTTP/1.1\r\n\
        Host: 127.0.0.1:8000\r\nRange: bytes=1048576-2097151\r\n\
        Authorization: AWS4-HMAC-SHA256 Credential=K/20261129/us-east-1/s3/aws4_request\r\n\r\n";

    fn call(moved: u64, head: &[u8], ts: u64) -> SocketCall<'_> {
        SocketCall {
            pid_tgid: 7 << 32 | 8,
            socket: 99,
            fd: 5,
            ts_ns: ts,
            dur_ns: 10,
            moved,
            head,
            tls: false,
        }
    }

    #[test]
    fn a_request_head_gives_its_method_path_range_and_length() {
        let h = parse_request(GET).unwrap();
        assert_eq!(h.method, "GET");
        assert_eq!(h.path, "/bucket/train/shard-0003.tar?partNumber=1");
        assert_eq!(h.host, Some("127.0.0.1:8000"));
        assert_eq!(h.range, Some((1048576, 2097151)));
        assert_eq!(h.header_len, Some(GET.len()));
        assert!(parse_request(b"\x16\x03\x01\x02\x00").is_none());
        assert!(parse_request(b"GETTING started").is_none());
        // A head cut inside its headers keeps what it has whole.
        let cut = &GET[..GET.len() - 60];
        let h = parse_request(cut).unwrap();
        assert_eq!((h.range, h.header_len), (Some((1048576, 2097151)), None));
    }

    #[test]
    fn heads_cut_short_give_what_they_hold_whole() {
        let cut = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 1048576\r\nETag: \"ab";
        let whole = AnswerHead {
            status: 206,
            content_length: Some(1048576),
            header_len: None,
        };
        assert_eq!(parse_answer(cut), Some(whole));
        let length_cut = parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 10").unwrap();
        assert_eq!((length_cut.status, length_cut.content_length), (200, None));
        assert_eq!(parse_answer(b"HTTP/1.1 404").unwrap().status, 404);
        assert!(parse_answer(b"\x17\x03\x03\x00\x20").is_none());
        // A line it cannot read is passed over, not the head.
        let odd = b"HTTP/1.1 200 OK\r\nX Odd: 1\r\nContent-Length: 5\r\n\r\nhello";
        let h = parse_answer(odd).unwrap();
        assert_eq!(
            (h.content_length, h.header_len),
            (Some(5), Some(odd.len() - 5))
        );
        // A request line cut before its version is no request; a whole one is.
        assert!(parse_request(b"GET /bucket/key?X-Amz-Signature=ab").is_none());
        let h = parse_request(b"GET /b/k HTTP/1.1").unwrap();
        assert_eq!(
            (h.path.as_str(), h.host, h.header_len),
            ("/b/k", None, None)
        );
    }

    #[test]
    fn a_process_with_tls_handshakes_and_no_openssl_call_is_unseen() {
        let mut r = Requests::default();
        r.on_mark(10, Mark::Handshake);
        r.on_mark(10, Mark::Handshake);
        r.on_mark(11, Mark::Handshake);
        r.on_mark(11, Mark::OpenSslSession);
        r.on_mark(12, Mark::OpenSslSession);
        assert_eq!(r.unseen_tls(), vec![(10, 2)]);
        // A request seen through OpenSSL counts as its calls seen.
        let mut c = call(GET.len() as u64, GET, 0);
        c.pid_tgid = 10 << 32 | 10;
        c.tls = true;
        r.on_send(&c, 0);
        assert!(r.unseen_tls().is_empty());
    }

    #[test]
    fn ranges_other_than_one_closed_span_are_none() {
        assert_eq!(parse_range("bytes=0-99"), Some((0, 99)));
        assert_eq!(parse_range("bytes=-500"), None);
        assert_eq!(parse_range("bytes=100-"), None);
        assert_eq!(parse_range("bytes=0-1,5-9"), None);
    }

    #[test]
    fn a_ranged_get_ends_when_its_body_is_whole() {
        let mut r = Requests::default();
        assert!(r.on_send(&call(GET.len() as u64, GET, 1_000), 0).is_none());
        let answer = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 1048576\r\n\r\n";
        let body_in_first = 8192 - answer.len() as u64;
        assert!(r.on_recv(&call(8192, answer, 5_000), 0).is_none());
        let rest = 1048576 - body_in_first;
        let done = r.on_recv(&call(rest, b"", 9_000), 0).unwrap();
        let row = done.into_row(Some(3));
        assert_eq!(row.op, Op::Request);
        assert_eq!(row.rank, Some(3));
        assert_eq!(
            row.path.as_deref(),
            Some("http://127.0.0.1:8000/bucket/train/shard-0003.tar?partNumber=1")
        );
        assert_eq!((row.offset, row.size), (Some(1048576), Some(1048576)));
        assert_eq!((row.ts_ns, row.dur_ns), (1_000, 8_010));
        let x = row.exchange.unwrap();
        assert_eq!((x.status, x.sent, x.received), (Some(206), 0, 1048576));
        assert_eq!(x.first_byte_ns, Some(4_010));
        assert!(r.drain(0).is_empty());
    }

    #[test]
    fn a_put_sent_in_pieces_after_a_continue_counts_its_body_once() {
        let mut r = Requests::default();
        let head = b"PUT /b/ckpt/model.pt HTTP/1.1\r\nHost: s3:80\r\nContent-Length: 20000\r\nExpect: 100-continue\r\n\r\n";
        r.on_send(&call(head.len() as u64, head, 0), 0);
        r.on_recv(&call(25, b"HTTP/1.1 100 Continue\r\n\r\n", 100), 0);
        r.on_send(&call(16384, b"\0\0\0\0GET / HTTP/1.1\r\n", 200), 0);
        r.on_send(&call(3616, b"\0\0", 300), 0);
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nETag: \"x\"\r\n\r\n";
        let row = r
            .on_recv(&call(ok.len() as u64, ok, 400), 0)
            .unwrap()
            .into_row(None);
        let x = row.exchange.unwrap();
        assert_eq!(
            (x.method, x.status, x.sent, x.received),
            ("PUT", Some(200), 20000, 0)
        );
        assert_eq!((row.offset, row.size, row.ret), (None, Some(20000), 20000));
    }

    #[test]
    fn a_head_answer_has_no_body_and_an_unanswered_request_ends_with_the_capture() {
        let mut r = Requests::default();
        let head = b"HEAD /b/k HTTP/1.1\r\nHost: h\r\n\r\n";
        r.on_send(&call(head.len() as u64, head, 0), 0);
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\n";
        let row = r.on_recv(&call(ok.len() as u64, ok, 50), 0).unwrap();
        assert_eq!(row.into_row(None).exchange.unwrap().received, 0);
        let list = b"GET /b?list-type=2&prefix=train HTTP/1.1\r\nHost: h\r\n\r\n";
        r.on_send(&call(list.len() as u64, list, 100), 0);
        let left = r.drain(0);
        assert_eq!(left.len(), 1);
        let row = left.into_iter().next().unwrap().into_row(None);
        assert_eq!(
            row.path.as_deref(),
            Some("http://h/b?list-type=2&prefix=train")
        );
        assert_eq!(row.exchange.unwrap().status, None);
    }

    #[test]
    fn an_answered_request_idle_past_the_window_ends_and_an_unanswered_one_holds_the_rows() {
        let mut r = Requests::default();
        let list = b"GET /b?list-type=2 HTTP/1.1\r\nHost: h\r\n\r\n";
        let ok = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        r.on_send(&call(list.len() as u64, list, 0), 0);
        r.on_recv(&call(ok.len() as u64 + 600, ok, 10), 0);
        let mut waiting = call(list.len() as u64, list, 5);
        waiting.socket = 100;
        r.on_send(&waiting, 0);
        // Nothing idle yet: the chunked answer's last bytes ended at 20.
        let (done, oldest) = r.settle(20, 0);
        assert!(done.is_empty());
        assert_eq!(oldest, Some(0));
        let (done, oldest) = r.settle(21, 0);
        assert_eq!(done.len(), 1);
        assert_eq!(done.into_iter().next().unwrap().into_row(None).ts_ns, 0);
        // The request still waiting for its answer holds the rows back.
        assert_eq!(oldest, Some(5));
        assert_eq!(r.settle(1_000_000, 0).0.len(), 0);
    }

    #[test]
    fn a_chunked_answer_ends_at_the_next_request_or_the_peers_close() {
        let mut r = Requests::default();
        let list = b"GET /b?list-type=2 HTTP/1.1\r\nHost: h\r\n\r\n";
        r.on_send(&call(list.len() as u64, list, 0), 0);
        let ok = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        r.on_recv(&call(ok.len() as u64 + 600, ok, 10), 0);
        let done = r.on_send(&call(list.len() as u64, list, 20), 0).unwrap();
        let x = done.into_row(None).exchange.unwrap();
        assert_eq!((x.status, x.received), (Some(200), 600));
        r.on_recv(&call(ok.len() as u64, ok, 30), 0);
        assert!(r.on_recv(&call(0, b"", 40), 0).is_some());
    }
}
