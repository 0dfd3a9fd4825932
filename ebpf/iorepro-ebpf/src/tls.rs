//! HTTP requests inside TLS: uprobes on OpenSSL's `SSL_write`,
//! `SSL_write_ex`, `SSL_read` and `SSL_read_ex` see a request's bytes before
//! encryption and an answer's after decryption (Python's `ssl`, and so
//! boto3, s3fs and requests, call these). The collector attaches them to
//! each OpenSSL library the traced processes map.
//!
//! The entry of a call keeps its buffer (and, for the `_ex` forms, where
//! the byte count will be written) per thread; its return hands the bytes
//! moved to `sockets`, under a key for the session (`SSL *` and process),
//! with the rules of a socket: a session whose first write is an HTTP
//! request is followed, any other never.

use aya_ebpf::helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns};
use aya_ebpf::macros::{map, uprobe, uretprobe};
use aya_ebpf::maps::LruHashMap;
use aya_ebpf::programs::{ProbeContext, RetProbeContext};
use iorepro_common::{IoEvent, REQUEST_TLS, VIA_SYSCALL};

use crate::kernel;
use crate::sockets;

/// A TLS call in flight on a thread.
#[derive(Clone, Copy)]
#[repr(C)]
struct Pending {
    ts: u64,
    ssl: u64,
    buf: u64,
    asked: u64,
    /// The `_ex` forms' `size_t *` for the bytes moved; 0 for the others.
    moved_at: u64,
    /// 1: a write; 0: a read.
    send: u64,
}

/// Calls in flight, by thread.
#[map]
static PENDING: LruHashMap<u64, Pending> = LruHashMap::with_max_entries(16384, 0);

#[inline(always)]
fn enter(ctx: &ProbeContext, send: bool, ex: bool) {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !kernel::is_traced(pid_tgid) {
        return;
    }
    let arg = |n| ctx.arg::<u64>(n).unwrap_or(0);
    let call = Pending {
        // SAFETY: helper without arguments.
        ts: unsafe { bpf_ktime_get_ns() },
        ssl: arg(0),
        buf: arg(1),
        asked: arg(2),
        moved_at: if ex { arg(3) } else { 0 },
        send: send as u64,
    };
    let _ = PENDING.insert(&pid_tgid, &call, 0);
}

#[uprobe]
pub fn tls_write(ctx: ProbeContext) -> u32 {
    enter(&ctx, true, false);
    0
}

#[uprobe]
pub fn tls_write_ex(ctx: ProbeContext) -> u32 {
    enter(&ctx, true, true);
    0
}

#[uprobe]
pub fn tls_read(ctx: ProbeContext) -> u32 {
    enter(&ctx, false, false);
    0
}

#[uprobe]
pub fn tls_read_ex(ctx: ProbeContext) -> u32 {
    enter(&ctx, false, true);
    0
}

/// The return of any of the four: the bytes moved, if any.
#[uretprobe]
pub fn tls_return(ctx: RetProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: a map value, copied out at once.
    let Some(call) = (unsafe { PENDING.get(&pid_tgid) }).copied() else {
        return 0;
    };
    let _ = PENDING.remove(&pid_tgid);
    let rc: i64 = ctx.ret::<i64>() as i32 as i64;
    let moved: i64 = if call.moved_at != 0 {
        if rc != 1 {
            return 0;
        }
        // SAFETY: a user read that fails safely.
        match unsafe { aya_ebpf::helpers::bpf_probe_read_user(call.moved_at as *const u64) } {
            Ok(n) => n as i64,
            Err(_) => return 0,
        }
    } else {
        rc
    };
    if moved <= 0 {
        return 0; // SSL_ERROR_WANT_READ and kin: nothing moved yet
    }
    // SAFETY: helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    let tgid = pid_tgid >> 32;
    // The session's key: the `SSL *` (user addresses fit in 47 bits) with
    // the process's low bits above it, and the top bit, which no socket's
    // inode number has.
    let conn = 1 << 63 | (tgid & 0xffff) << 47 | call.ssl & ((1 << 47) - 1);
    let io = IoEvent {
        ts_ns: call.ts,
        dur_ns: now.wrapping_sub(call.ts),
        span_ns: now.wrapping_sub(call.ts),
        pid_tgid,
        ret: moved,
        offset: -1,
        size: call.asked,
        ino: conn,
        dev: 0,
        fd: -1,
        kind: 0,
        flags: REQUEST_TLS,
        calls: 1,
        via: VIA_SYSCALL,
    };
    sockets::moved(call.send != 0, conn, u64::MAX, call.buf, call.asked, io);
    0
}
