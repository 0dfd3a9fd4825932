//! An answer read off a connection: its head parsed by httparse, its body
//! taken by its length, in chunks (sizes by httparse), or to the
//! connection's end, counted and, when asked, kept.

use std::io::{self, BufRead, Read};
use std::time::Duration;

use crate::transport::{wait_for, Stream};

/// Bytes of an answer's body kept when asked (an error's, a listing's).
const KEEP_LIMIT: usize = 16 << 20;
/// Bodies read past the buffer land here, and are dropped.
const SINK: usize = 256 << 10;
/// The most headers an answer may have.
const MAX_HEADERS: usize = 64;
/// The least a chunked body holds after its headers: the last chunk's line
/// and the empty line after it (`0\r\n\r\n`); with a byte of data in it,
/// a chunk's line, the byte, its end and that (`1\r\nX\r\n0\r\n\r\n`).
pub const EMPTY_CHUNKED: usize = 5;
pub const SOME_CHUNKED: usize = 11;
/// A chunk's data ends with a line end.
pub const CHUNK_END: usize = 2;

/// An answer: its status, and its body's length and (when kept) bytes.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// The status line's reason, where the status is not a success.
    pub reason: String,
    /// The `Content-Length` header (a HEAD's object size).
    pub content_length: Option<u64>,
    /// The `ETag` header (an uploaded part's), as sent.
    pub etag: Option<String>,
    /// The object's size a ranged GET's `Content-Range` gives.
    pub object_size: Option<u64>,
    /// Body bytes read (none for a HEAD).
    pub body_bytes: u64,
    /// The body, if kept.
    pub body: Vec<u8>,
    /// From the request's write to the answer's first byte.
    pub first_byte: Duration,
}

impl Answer {
    pub fn success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// What to do with an answer's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyUse {
    /// Counted and dropped, unless the status is not a success (then kept,
    /// to say why).
    Count,
    /// A ranged GET's, of this many bytes: counted and dropped as `Count`'s,
    /// and if small, awaited whole with its head.
    Range(u64),
    /// Kept: on a success, an XML document (a listing, a copy's result).
    Keep,
    /// A HEAD's answer has none, whatever its headers say.
    None,
}

pub fn protocol(why: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.into())
}

/// An answer's head as read: what the body's reading needs.
#[derive(Debug)]
pub struct Head {
    pub status: u16,
    pub reason: String,
    pub content_length: Option<u64>,
    pub etag: Option<String>,
    pub object_size: Option<u64>,
    pub chunked: bool,
    /// The connection closes after this answer.
    pub close: bool,
    /// Its bytes, status line to the empty line.
    pub bytes: usize,
}

/// Reads an answer's head and parses it; `first_line` is called once its
/// first bytes are here. A head that came whole (a small answer's always
/// does) is parsed where it lies in the stream's buffer; one that runs past
/// it is gathered into `raw` (scratch), a line at a time.
pub fn read_head(
    stream: &mut Stream,
    raw: &mut Vec<u8>,
    first_line: impl FnOnce(),
) -> io::Result<Head> {
    let buf = stream.fill_buf()?;
    if buf.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the connection closed before an answer",
        ));
    }
    first_line();
    if let Some(head) = parse_head(buf)? {
        stream.consume(head.bytes);
        return Ok(head);
    }
    raw.clear();
    loop {
        let at = raw.len();
        if stream.read_until(b'\n', raw)? == 0 {
            return Err(protocol("the connection closed within the headers"));
        }
        if at > 0 && raw[at..].trim_ascii().is_empty() {
            break;
        }
    }
    parse_head(raw)?.ok_or_else(|| protocol("an answer's head cut short"))
}

/// The head at the start of `bytes`, if it is all there.
fn parse_head(bytes: &[u8]) -> io::Result<Option<Head>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut headers);
    let bytes = match parsed.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => {
            let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
            return Err(protocol(format!(
                "not an HTTP answer ({e}): {:?}",
                String::from_utf8_lossy(first.trim_ascii_end())
            )));
        }
    };
    let status = parsed.code.unwrap_or_default();
    let mut head = Head {
        status,
        // Said only where the request failed.
        reason: match (200..300).contains(&status) {
            true => String::new(),
            false => parsed.reason.unwrap_or_default().to_string(),
        },
        content_length: None,
        etag: None,
        object_size: None,
        chunked: false,
        close: parsed.version == Some(0),
        bytes,
    };
    for h in parsed.headers.iter() {
        let value = h.value.trim_ascii();
        if h.name.eq_ignore_ascii_case("content-length") {
            let length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            head.content_length = Some(length.ok_or_else(|| {
                protocol(format!(
                    "Content-Length {:?}",
                    String::from_utf8_lossy(value)
                ))
            })?);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked = names(value, b"chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            head.close = names(value, b"close") || (head.close && !names(value, b"keep-alive"));
        } else if h.name.eq_ignore_ascii_case("content-range") {
            // `bytes FIRST-LAST/SIZE`.
            let size = value.rsplit(|&b| b == b'/').next().unwrap_or_default();
            head.object_size = std::str::from_utf8(size).ok().and_then(|s| s.parse().ok());
        } else if h.name.eq_ignore_ascii_case("etag") {
            head.etag = Some(String::from_utf8_lossy(value).into_owned());
        }
    }
    Ok(Some(head))
}

/// Whether a header's `value` holds `word` (lower-case), in any case.
fn names(value: &[u8], word: &[u8]) -> bool {
    value
        .windows(word.len())
        .any(|w| w.eq_ignore_ascii_case(word))
}

/// What is left of a chunked body taken whole at its document's end: the
/// chunk's end, then chunks to the last (any data in them, which a store
/// that sent a whole document should not send, is dropped), and the
/// trailers.
pub fn end_of_chunks(stream: &mut Stream, line: &mut Vec<u8>) -> io::Result<()> {
    chunk_line(stream, line)?;
    loop {
        let size = chunk_size(chunk_line(stream, line)?)?;
        if size == 0 {
            return trailers(stream, line);
        }
        io::copy(&mut stream.by_ref().take(size), &mut io::sink())?;
        chunk_line(stream, line)?;
    }
}

/// One line of a chunked body's framing, with its line end, read into
/// `line` (empty at the stream's end).
fn chunk_line<'l>(stream: &mut Stream, line: &'l mut Vec<u8>) -> io::Result<&'l [u8]> {
    line.clear();
    stream.read_until(b'\n', line)?;
    Ok(line)
}

/// A chunk's size, from its line (`SIZE[;extensions]\r\n`).
fn chunk_size(line: &[u8]) -> io::Result<u64> {
    match httparse::parse_chunk_size(line) {
        Ok(httparse::Status::Complete((_, size))) => Ok(size),
        _ => Err(protocol(format!(
            "a chunk's size {:?}",
            String::from_utf8_lossy(line.trim_ascii())
        ))),
    }
}

/// A chunked body's trailers, to the empty line.
fn trailers(stream: &mut Stream, line: &mut Vec<u8>) -> io::Result<()> {
    while !chunk_line(stream, line)?.trim_ascii().is_empty() {}
    Ok(())
}

/// Whether `body` holds a whole XML document: after its declaration and
/// any comments, a root element that the body ends by closing.
pub fn whole_document(body: &[u8]) -> bool {
    let mut rest = body;
    let root = loop {
        let Some(open) = rest.iter().position(|&b| b == b'<') else {
            return false;
        };
        rest = &rest[open + 1..];
        if !matches!(rest.first(), Some(b'?' | b'!')) {
            let end = rest
                .iter()
                .position(|b| b.is_ascii_whitespace() || matches!(b, b'>' | b'/'))
                .unwrap_or(rest.len());
            break &rest[..end];
        }
    };
    let body = body.trim_ascii_end();
    !root.is_empty()
        && body.ends_with(b">")
        && body[..body.len() - 1].ends_with(root)
        && body[..body.len() - 1 - root.len()].ends_with(b"</")
}

/// Reads a body, counting it and keeping it if asked.
pub struct Body<'a> {
    pub stream: &'a mut Stream,
    pub sink: &'a mut Vec<u8>,
    pub answer: &'a mut Answer,
    /// Scratch for the framing's lines.
    pub line: &'a mut Vec<u8>,
    /// The framing's bytes read.
    pub framing: usize,
    pub keep: bool,
    /// How long to wait for the rest of the answer.
    pub timeout: Duration,
}

impl Body<'_> {
    fn wait_for(&mut self, need: usize) -> io::Result<()> {
        wait_for(self.stream, need, self.timeout)
    }

    /// Up to `n` bytes (to the end of the stream for `u64::MAX`).
    pub fn take(&mut self, mut n: u64) -> io::Result<()> {
        let to_end = n == u64::MAX;
        while n > 0 {
            let got = if !self.stream.buffer().is_empty() || self.keep {
                let buf = self.stream.fill_buf()?;
                let got = buf.len().min(n as usize);
                if self.keep && self.answer.body.len() < KEEP_LIMIT {
                    // What is still to come of this piece, at once: a
                    // listing's document grown by doubling cost more than
                    // its parse. A body that runs to the connection's end
                    // has no known length, and grows as it comes.
                    let body = &mut self.answer.body;
                    if !to_end {
                        body.reserve((n as usize).min(KEEP_LIMIT - body.len()));
                    }
                    body.extend_from_slice(&buf[..got]);
                }
                self.stream.consume(got);
                got
            } else {
                // Large bodies bypass the buffer (read straight into the
                // sink, one copy out of the kernel).
                if self.sink.is_empty() {
                    self.sink.resize(SINK, 0);
                }
                let want = self.sink.len().min(n as usize);
                self.stream.read(&mut self.sink[..want])?
            };
            if got == 0 {
                if to_end {
                    return Ok(());
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection closed within the body",
                ));
            }
            self.answer.body_bytes += got as u64;
            n -= got as u64;
        }
        Ok(())
    }

    fn line(&mut self) -> io::Result<&[u8]> {
        chunk_line(self.stream, self.line)?;
        self.framing += self.line.len();
        Ok(self.line)
    }

    /// A chunked body; `document` if it is an XML document (so holds at
    /// least a byte, and is whole when its root element closes). Whether
    /// the body was taken whole at its document's end, with its framing's
    /// end left in the stream (see `Connection::owed`).
    pub fn chunked(&mut self, document: bool) -> io::Result<bool> {
        let mut least = if document {
            SOME_CHUNKED
        } else {
            EMPTY_CHUNKED
        };
        loop {
            self.wait_for(least)?;
            let size = chunk_size(self.line()?)?;
            if size == 0 {
                trailers(self.stream, self.line)?;
                return Ok(false);
            }
            if document {
                self.wait_for(size as usize)?;
                self.take(size)?;
                if whole_document(&self.answer.body) {
                    return Ok(true);
                }
            } else {
                // The chunk, its end, and at least the last chunk's line
                // after it.
                self.wait_for((size as usize).saturating_add(CHUNK_END + EMPTY_CHUNKED))?;
                self.take(size)?;
            }
            self.line()?;
            least = EMPTY_CHUNKED;
        }
    }
}
