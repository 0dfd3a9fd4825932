//! One kept-alive HTTP/1.1 connection, blocking, for the requests `s3`
//! makes: a request is written in one system call and its answer read
//! through one buffer, so a small request costs a write and a read or two
//! (an async client's runtime adds wake-ups and polls around each). A
//! connection the store closed while idle is opened again and the request
//! sent once more, as HTTP clients do for requests without a body.
//!
//! A store that writes an answer in pieces (Ceph's gateway writes a
//! listing's headers, chunk size, body, the chunk's end and the last chunk
//! apart, each a write) would wake the rank for each, and a wake costs more
//! CPU than the rest of a small request. Where the least that is still to
//! come of a chunked answer is known (its first chunk, a chunk's rest), the
//! rank sleeps in `poll` with the socket's low-water mark at that many
//! bytes, so it wakes once they are all there; and a listing's framing
//! after its document is read with the next answer (`Connection::owed`).
//! A listing's answer is surer still: its head is no shorter than the
//! shortest this connection has had, and its body (a storm lists one
//! prefix again and again) no shorter than the shortest document's it has
//! had, framing and all, so the rank sleeps until that much has come and
//! takes the whole answer in one wake (`Connection::whole_wait`). A
//! listing then wakes its rank once, not four or five times. It must be
//! `poll`: a blocking `recv` takes what has come and then sleeps until the
//! mark is met by bytes that came *after* it, which never happens once
//! part of the rest was taken (the rank then sleeps to its timeout with
//! the rest in its socket).
//!
//! A ranged GET's answer is its head and then its body, written apart (two
//! wakes for a 4 KiB read, where the second costs as much as the rest of
//! the request). A small range's answer is as sure as a listing's: a head
//! no shorter than the shortest, and the range's bytes. The rank sleeps
//! until that much has come (`Connection::whole_wait`), and takes the
//! answer in one wake. The time to its first byte is then the time to
//! the whole of it, a few µs more for such a size.
//!
//! The low-water mark a wait sets is left set (`Socket`): a storm's
//! answers are alike, so the next wait mostly wants the same mark, and
//! setting it and setting it back cost two system calls a request.
//!
//! Under TLS the waits are not made (see `transport::poll_for`): each read
//! takes what has come.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use crate::answer::{
    end_of_chunks, read_head, Answer, Body, BodyUse, Head, CHUNK_END, EMPTY_CHUNKED, SOME_CHUNKED,
};
use crate::transport::{poll_for, wait_for, Peer, Stream, WAIT_WHOLE};

/// Payloads up to this size are copied behind the request's head and sent
/// in one write.
const INLINE_PAYLOAD: usize = 64 << 10;
/// The least an answer's head holds: `HTTP/1.1 200 \r\n\r\n`.
const SHORTEST_HEAD: usize = 17;
/// How long a closing connection waits for each read of a listing's
/// framing still owed (it follows the document at once).
const OWED_END_WAIT: Duration = Duration::from_millis(200);
/// Beyond twice the last such answer's time, how long a rank waits for
/// the least of the next one before reading what has come.
const WAIT_SLACK: Duration = Duration::from_millis(1);

#[derive(Debug)]
pub struct Connection {
    peer: Peer,
    stream: Option<Stream>,
    /// The last answer's body, a chunked XML document, was taken as soon as
    /// its root element closed: the chunk's end and the last chunk (7
    /// bytes or more) are still to be read, before the next answer. The
    /// gateway writes them apart from the body, each a wake-up for a rank
    /// that waited for them; read with the next answer's head they cost
    /// none.
    owed: bool,
    /// The shortest answer head (status line, headers, empty line) this
    /// connection has read: what any later answer's head is taken to hold.
    shortest_head: Option<usize>,
    /// The shortest chunked body of a document (a listing's) this
    /// connection has read, framing and all: what the next document's body
    /// is taken to hold. A storm lists the same prefix again and again; its
    /// rank sleeps until the whole answer is here, its framing's end with
    /// it, so that each answer leaves that end in the buffer and the next
    /// wait asks the socket for as many bytes as the last (the low-water
    /// mark is then set once for the storm).
    shortest_document: Option<usize>,
    /// How long the last document's answer took to come whole, from the
    /// request's write.
    document_took: Option<Duration>,
    /// The same for the last small ranged GET's answer.
    range_took: Option<Duration>,
    /// The request being written.
    out: Vec<u8>,
    /// Scratch for an answer's head and framing.
    line: Vec<u8>,
    sink: Vec<u8>,
    /// A kept body given back (`Connection::recycle`): the next one is
    /// read into it, not into a new allocation.
    spare: Vec<u8>,
}

impl Connection {
    pub fn new(peer: Peer) -> Connection {
        Connection {
            peer,
            stream: None,
            owed: false,
            shortest_head: None,
            shortest_document: None,
            document_took: None,
            range_took: None,
            out: Vec::with_capacity(1024),
            line: Vec::with_capacity(1024),
            sink: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Sends `method target` with `Host` and `headers` (lines, each ending
    /// in CRLF) and, if given, `payload` (with its length), and reads the
    /// answer.
    pub fn request(
        &mut self,
        method: &str,
        target: &str,
        headers: &str,
        payload: Option<&[u8]>,
        body: BodyUse,
    ) -> io::Result<Answer> {
        self.out.clear();
        let out = &mut self.out;
        for piece in [method, " ", target, " HTTP/1.1\r\nhost: "] {
            out.extend_from_slice(piece.as_bytes());
        }
        out.extend_from_slice(self.peer.authority.as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(headers.as_bytes());
        if let Some(p) = payload {
            let _ = write!(out, "content-length: {}\r\n", p.len());
        }
        out.extend_from_slice(b"\r\n");
        // A small payload goes in the same write as the head; a large one
        // is written from where it lies.
        let payload = payload.unwrap_or_default();
        let apart = payload.len() > INLINE_PAYLOAD;
        if !apart {
            out.extend_from_slice(payload);
        }
        let payload = if apart { payload } else { &[] };

        let reused = self.stream.is_some();
        match self.exchange(payload, body) {
            // An idle connection the store closed fails before any answer
            // comes: send again once, on a new one.
            Err(e) if reused && stale(&e) => {
                self.stream = None;
                self.exchange(payload, body)
            }
            r => r,
        }
        .inspect_err(|_| self.stream = None)
    }

    /// Writes the request made ready in `out` and reads its answer.
    fn exchange(&mut self, payload: &[u8], body: BodyUse) -> io::Result<Answer> {
        if self.stream.is_none() {
            self.stream = Some(self.peer.connect()?);
        }
        let stream = self.stream.as_mut().expect("connected");
        let sent = Instant::now();
        stream.get_mut().write_all(&self.out)?;
        if !payload.is_empty() {
            stream.get_mut().write_all(payload)?;
        }
        stream.get_mut().flush()?;
        let owed = std::mem::take(&mut self.owed);
        // A small range is awaited whole, and its time is the patience of
        // the next one's wait; a large one's is no measure of it.
        let small_range = match body {
            BodyUse::Range(n) if n <= WAIT_WHOLE as u64 => Some(n),
            _ => None,
        };
        let waited_whole = match (body, small_range) {
            (BodyUse::Keep, _) => {
                let body = self.shortest_document.unwrap_or(SOME_CHUNKED);
                self.whole_wait(owed, body, self.document_took)?
            }
            (_, Some(n)) => self.whole_wait(owed, n as usize, self.range_took)?,
            _ => false,
        };
        let stream = self.stream.as_mut().expect("connected");
        if owed {
            if !waited_whole {
                // One wake-up for the last answer's end and this one's head.
                let need = CHUNK_END + EMPTY_CHUNKED + SHORTEST_HEAD;
                wait_for(stream, need, self.peer.timeout)?;
            }
            end_of_chunks(stream, &mut self.line)?;
        }
        let mut first_byte = Duration::ZERO;
        let mut head = read_head(stream, &mut self.line, || first_byte = sent.elapsed())?;
        self.shortest_head = Some(self.shortest_head.map_or(head.bytes, |s| s.min(head.bytes)));
        let mut answer = Answer {
            status: head.status,
            // Moved, not copied: the body's reading needs neither.
            reason: std::mem::take(&mut head.reason),
            content_length: head.content_length,
            etag: head.etag.take(),
            object_size: head.object_size,
            body_bytes: 0,
            body: Vec::new(),
            first_byte,
        };
        let close = self.read_body(&head, &mut answer, body, small_range, sent)?;
        if close {
            self.stream = None;
            self.owed = false;
        }
        Ok(answer)
    }

    /// Reads the body `head` announces into `answer`, as `body` asks;
    /// whether the connection closes after it.
    fn read_body(
        &mut self,
        head: &Head,
        answer: &mut Answer,
        body: BodyUse,
        small_range: Option<u64>,
        sent: Instant,
    ) -> io::Result<bool> {
        let success = answer.success();
        let keep = match body {
            BodyUse::Keep => true,
            BodyUse::Count | BodyUse::Range(_) => !success,
            BodyUse::None => false,
        };
        if keep {
            answer.body = std::mem::take(&mut self.spare);
        }
        let status = head.status;
        if body == BodyUse::None || status == 204 || status == 304 || status < 200 {
            return Ok(head.close);
        }
        let mut reader = Body {
            stream: self.stream.as_mut().expect("connected"),
            sink: &mut self.sink,
            answer,
            line: &mut self.line,
            framing: 0,
            keep,
            timeout: self.peer.timeout,
        };
        if head.chunked {
            // A body we keep on a success is an XML document (a listing, a
            // copy's result).
            let document = body == BodyUse::Keep && success;
            self.owed = reader.chunked(document)?;
            if self.owed {
                let whole = reader.framing + CHUNK_END + EMPTY_CHUNKED;
                let whole = whole + reader.answer.body_bytes as usize;
                self.document_took = Some(sent.elapsed());
                self.shortest_document =
                    Some(self.shortest_document.map_or(whole, |s| s.min(whole)));
            }
            Ok(head.close)
        } else if let Some(n) = head.content_length {
            reader.take(n)?;
            if small_range == Some(n) && success {
                self.range_took = Some(sent.elapsed());
            }
            Ok(head.close)
        } else {
            // Neither: the body runs to the connection's end.
            reader.take(u64::MAX)?;
            Ok(true)
        }
    }

    /// Takes back an answer's kept body once read (a listing's): the next
    /// body kept is read into its room.
    pub fn recycle(&mut self, mut body: Vec<u8>) {
        body.clear();
        self.spare = body;
    }

    /// Before an answer whose least is known is read (a document's, a
    /// small range's): sleeps until the least it is sure to hold has come
    /// (the last answer's `owed` end, a head as short as the shortest this
    /// connection has had, and `body` bytes after it), so that the whole
    /// answer, written in pieces, is taken in one wake. Whether it came:
    /// the guess is a store's habit, not a rule (an error is shorter), so
    /// the wait lasts at most twice what the last such answer `took`, and
    /// a wait that runs out goes on as any other answer's, the time it
    /// took kept in its latency.
    fn whole_wait(&mut self, owed: bool, body: usize, took: Option<Duration>) -> io::Result<bool> {
        let (Some(head), Some(took), Some(stream)) =
            (self.shortest_head, took, self.stream.as_mut())
        else {
            return Ok(false);
        };
        let owed = if owed { CHUNK_END + EMPTY_CHUNKED } else { 0 };
        let patience = (2 * took + WAIT_SLACK).min(self.peer.timeout);
        poll_for(stream, owed + head + body, patience)
    }
}

impl Drop for Connection {
    /// Reads an owed end, so that the connection closes cleanly (closing
    /// with unread bytes resets it) and a capture of the replay sees the
    /// answer whole. The store has sent the document; the framing after it
    /// is on its way in pieces of its own, and one still in flight when a
    /// rank ends at once after a listing was left unread: waits for it,
    /// but not long on a store that never sends it.
    fn drop(&mut self) {
        if let (true, Some(stream)) = (self.owed, self.stream.as_mut()) {
            if (stream.get_ref().tcp())
                .set_read_timeout(Some(OWED_END_WAIT))
                .is_ok()
            {
                let _ = end_of_chunks(stream, &mut self.line);
            }
        }
    }
}

/// Whether a failure on a reused connection means the store had closed it.
fn stale(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

#[cfg(test)]
mod tests;
