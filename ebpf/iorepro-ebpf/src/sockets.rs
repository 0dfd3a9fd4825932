//! Sockets that carry HTTP requests: what a traced process sends to an
//! object store (S3 and its kin over plain HTTP) and what the store answers.
//!
//! The kernel side does not parse HTTP; it only decides which sockets are
//! worth a record and copies a bounded head of their bytes:
//! - A socket's first send decides: bytes that begin with an HTTP method
//!   make it a request socket, anything else (a collective's traffic, TLS,
//!   a launcher's wire protocol) makes it one no later call is recorded on.
//! - Every send on a request socket is recorded with its head (a request's
//!   line and headers, or the start of a body: user space tells them apart
//!   by the lengths the headers give).
//! - The first receive after a send is recorded with its head (an answer's
//!   status and headers); later receives with their byte counts alone.
//! - Receives on a socket that has sent no request (a server the job runs)
//!   are not recorded.
//!
//! A socket is known by its inode (unique among live sockets); its state is
//! dropped at its `close`, and the map is an LRU, so a socket closed unseen
//! (at a process's exit) ages out.

use aya_ebpf::helpers::generated::bpf_probe_read_user;
use aya_ebpf::macros::map;
use aya_ebpf::maps::LruHashMap;
use iorepro_common::{
    kind, IoEvent, PathEvent, NOT_HTTP, PATH_EVENT_SIZE, PATH_RECORD_MAX, REQUEST_HEAD,
    REQUEST_TLS, TLS_HELLO,
};

use crate::kernel::{global, TRACE_REQUESTS};
use crate::paths;
use crate::records;
use crate::slots::Slot;
use crate::work;

/// What a call does with a socket.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// `write`, `sendto`, `writev`.
    Send,
    /// `read`, `recvfrom`, `readv`.
    Receive,
    Close,
}

/// What is known of a socket, by its inode.
#[map]
static SOCKETS: LruHashMap<u64, u32> = LruHashMap::with_max_entries(65536, 0);

/// Not yet seen sending.
const UNKNOWN: u32 = 0;
/// Its first send was not an HTTP request: never recorded.
const OTHER: u32 = 1;
/// It sent last: the next receive begins an answer.
const SENT: u32 = 2;
/// It is receiving an answer whose head has been recorded.
const RECEIVING: u32 = 3;

#[inline(always)]
fn state(ino: u64) -> u32 {
    // SAFETY: a map value, copied out at once.
    unsafe { SOCKETS.get(&ino) }.copied().unwrap_or(UNKNOWN)
}

/// At a call's entry on socket `ino`: whether its exit is to be recorded.
/// A `close` forgets the socket.
#[inline(always)]
pub fn followed(how: Use, ino: u64) -> bool {
    if global(&TRACE_REQUESTS) == 0 {
        return false;
    }
    let state = state(ino);
    match how {
        Use::Send => state != OTHER,
        Use::Receive => state == SENT || state == RECEIVING,
        Use::Close => {
            if state != UNKNOWN {
                let _ = SOCKETS.remove(&ino);
            }
            false
        }
    }
}

/// The exit of a followed call on a socket: `buf` and `asked` are its
/// buffer and length arguments (of a gathered call, its first buffer's);
/// `io` has the call's time, result and the socket (`ino`, `dev`).
#[inline(always)]
pub fn exit(how: Use, s: &Slot, fd: u64, buf: u64, asked: u64, io: IoEvent) {
    moved(how == Use::Send, s.ino, fd, buf, asked, io);
}

/// Bytes moved on connection `conn` (a socket's inode, or a TLS session's
/// key, see `tls`): recorded with their head when the connection carries
/// HTTP requests (see the module's rules). `io.ret` is the bytes moved.
#[inline(always)]
pub fn moved(send: bool, conn: u64, fd: u64, buf: u64, asked: u64, io: IoEvent) {
    let moved = io.ret;
    if moved < 0 {
        return; // EAGAIN of a non-blocking socket, a reset: nothing moved
    }
    let ino = conn;
    let head = if send {
        if moved == 0 {
            return;
        }
        let known = state(ino);
        if known == UNKNOWN {
            let first = first_bytes(buf);
            if first != First::Request {
                let _ = SOCKETS.insert(&ino, &OTHER, 0);
                // One mark for the connection, with no bytes: a socket's
                // TLS handshake, or an OpenSSL session that is no HTTP.
                // From them user space tells whose TLS it could not see.
                let mark = if first == First::Handshake {
                    TLS_HELLO
                } else if io.flags & REQUEST_TLS != 0 {
                    NOT_HTTP
                } else {
                    return;
                };
                if let Some(call) = paths::call(work::SYSCALLS) {
                    *call = IoEvent {
                        kind: kind::SEND,
                        fd: fd as i32,
                        size: asked,
                        flags: io.flags | mark,
                        ..io
                    };
                    head_record(buf, 0);
                }
                return;
            }
        }
        // (A socket's entry already left out the others; a TLS session
        // has no entry to do it.)
        if known == OTHER {
            return;
        }
        if known != SENT {
            let _ = SOCKETS.insert(&ino, &SENT, 0);
        }
        // Of a gathered send, the bytes of its first buffer (`asked`).
        (moved as u64).min(asked)
    } else {
        match state(ino) {
            SENT => {
                let _ = SOCKETS.insert(&ino, &RECEIVING, 0);
                (moved as u64).min(asked)
            }
            RECEIVING => 0, // the rest of an answer, or its end (0: the peer closed)
            _ => return,    // no request sent on it, or no HTTP
        }
    };
    let Some(call) = paths::call(work::SYSCALLS) else {
        return;
    };
    *call = IoEvent {
        kind: if send { kind::SEND } else { kind::RECV },
        fd: fd as i32,
        size: asked,
        ..io
    };
    head_record(buf, head);
}

/// What a connection's first bytes sent begin with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum First {
    /// An HTTP method (the first four letters of those an object-storage
    /// client sends).
    Request,
    /// A TLS handshake record (content type 22, version 3.x).
    Handshake,
    Other,
}

#[inline(always)]
fn first_bytes(buf: u64) -> First {
    // SAFETY: a user read that fails safely.
    let Ok(word) = (unsafe { aya_ebpf::helpers::bpf_probe_read_user(buf as *const u32) }) else {
        return First::Other;
    };
    let bytes = word.to_le_bytes();
    match &bytes {
        b"GET " | b"PUT " | b"POST" | b"HEAD" | b"DELE" | b"PATC" | b"OPTI" => First::Request,
        [0x16, 0x03, ..] => First::Handshake,
        _ => First::Other,
    }
}

/// Sends the record of the call left in the syscall work area with the
/// first `len` bytes (at most [`REQUEST_HEAD`]) at user address `src`, as
/// a global function: checked once by the verifier.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn head_record(src: u64, len: u64) -> i64 {
    let Some(w) = work::area(work::SYSCALLS) else {
        return 0;
    };
    let Some(buf) = paths::buffer() else {
        return 0;
    };
    // SAFETY: the per-CPU buffer (8-aligned, it holds a header) and this
    // CPU's work area, each used by one program at a time.
    unsafe {
        let header = buf as *mut PathEvent;
        paths::begin(header, (*w).path.io, 0);
        let mut n = if len > REQUEST_HEAD as u64 {
            REQUEST_HEAD as u64
        } else {
            len
        };
        // A bound the verifier can see: the buffer holds far more.
        n &= 4095;
        if n > 0 {
            let dst = (buf as *mut u8).wrapping_add(PATH_EVENT_SIZE);
            if bpf_probe_read_user(dst.cast(), n as u32, src as *const core::ffi::c_void) != 0 {
                n = 0;
            }
        }
        (*header).path_len = n as u32;
        let total = PATH_EVENT_SIZE + n as usize;
        let (kind, calls) = ((*header).io.kind, (*header).io.calls);
        if let Some(record) = (*buf).get(..total.min(PATH_RECORD_MAX)) {
            records::bytes(record, kind, calls as u64);
        }
    }
    0
}
