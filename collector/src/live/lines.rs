//! One `--status-interval` line of a capture: what has been written so far,
//! how fast the job did I/O over the interval just ended, and whether the
//! kernel side keeps up (records lost, ring fill). Keys in docs/PRODUCTION.md.

use iorepro_format::units::GIB;
use iorepro_format::Op;
use iorepro_telemetry::status::round;
use serde_json::{json, Value};

use super::Snapshot;

/// The line for `now`, with rates over the interval since `prev`.
pub fn status_line(now: &Snapshot, prev: &Snapshot) -> Value {
    let interval_s = now.at.saturating_duration_since(prev.at).as_secs_f64();
    let (ops, ops_then) = (&now.written.ops, &prev.written.ops);
    let gib_s = |op: Op| {
        let moved = ops.bytes(op).saturating_sub(ops_then.bytes(op)) as f64;
        round(if interval_s > 0.0 {
            moved / GIB / interval_s
        } else {
            0.0
        })
    };
    json!({
        "elapsed_s": round(now.at.saturating_duration_since(now.started).as_secs_f64()),
        "unix_ms": now.unix_ms,
        "interval_s": round(interval_s),
        "done": now.finished,
        "events": now.written.rows,
        "records": now.records,
        "dropped_events": now.dropped_io,
        "dropped_process_events": now.dropped_proc,
        "ring_fill": round(now.ring_fill),
        "ring_fill_peak": round(now.ring_fill_peak),
        "read_bytes": ops.bytes(Op::Read),
        "write_bytes": ops.bytes(Op::Write),
        "read_gib_s": gib_s(Op::Read),
        "write_gib_s": gib_s(Op::Write),
        "ops": ops.status_map(ops_then, interval_s),
    })
}
