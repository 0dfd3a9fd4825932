//! Runs: back-to-back reads (or writes) of one thread on one descriptor, each
//! moving exactly the same number of bytes, each starting where the last
//! ended, sent as one record.
//!
//! A ring-buffer reservation costs about 100 ns here, more than the rest of a
//! recorded call, and every record costs user space its decoding and a row.
//! A data loader or a checkpoint writer streams a file in equal chunks, so
//! most calls extend a run: they cost a comparison and three stores. Nothing
//! is lost: a run's calls are `calls` calls of `size / calls` bytes at
//! consecutive offsets from `offset`; only their individual durations are
//! summed (`dur_ns`), and `span_ns` says how long the run lasted. A run
//! ends at a call that does not continue it, at any other syscall of the
//! thread (so it is never held back while the thread waits), when the
//! thread exits, or after [`RUN_SPAN_NS`], which keeps rows fine-grained in
//! time.

use iorepro_common::{IoEvent, Run, RUN_SPAN_NS};

use crate::kernel::{global, TRACE_MERGE_RUNS};
use crate::records;

/// Adds a finished data op to the thread's run, or sends it (after the run
/// it does not continue).
#[inline(always)]
pub fn record(run: &mut Run, io: &IoEvent) {
    let whole = io.ret >= 0 && io.ret as u64 == io.size && io.size > 0 && io.offset >= 0;
    if global(&TRACE_MERGE_RUNS) == 0 {
        records::io(io);
        return;
    }
    if run.calls != 0 {
        let continues = whole
            && run.kind == io.kind
            && run.fd == io.fd
            && run.ino == io.ino
            && run.dev == io.dev
            && run.size == io.size
            && run.flags == io.flags
            && io.offset
                == run
                    .offset
                    .wrapping_add((run.size * run.calls as u64) as i64)
            && io.ts_ns.wrapping_sub(run.ts) < RUN_SPAN_NS
            && run.calls < u32::MAX;
        if continues {
            run.calls += 1;
            run.dur += io.dur_ns;
            run.end = io.ts_ns.wrapping_add(io.dur_ns);
            return;
        }
        flush(run);
    }
    if !whole {
        records::io(io);
        return;
    }
    *run = Run {
        pid_tgid: io.pid_tgid,
        ts: io.ts_ns,
        end: io.ts_ns.wrapping_add(io.dur_ns),
        dur: io.dur_ns,
        offset: io.offset,
        size: io.size,
        ino: io.ino,
        dev: io.dev,
        fd: io.fd,
        kind: io.kind,
        calls: 1,
        flags: io.flags,
        _pad: 0,
    };
}

/// Sends the open run, if any.
#[inline(always)]
pub fn flush(run: &mut Run) {
    if run.calls == 0 {
        return;
    }
    records::io(&run.event());
    run.calls = 0;
}
