//! One `--status-interval` line of a capture: what has been written so far,
//! how fast the job did I/O over the interval just ended, and whether the
//! kernel side keeps up (records lost, ring fill). Keys in the README.

use iorepro_telemetry::status::{op_entry, round};
use serde_json::{json, Map, Value};

use super::Snapshot;

use iorepro_format::units::GIB;

/// The line for `now`, with rates over the interval since `prev`.
pub fn status_line(now: &Snapshot, prev: &Snapshot) -> Value {
    let interval_s = now.at.saturating_duration_since(prev.at).as_secs_f64();
    let mut ops = Map::new();
    for (name, o) in now.tally.ops() {
        let then = prev.tally.op(name).map(|b| (b.count, &b.latency_ns));
        ops.insert(
            name.to_string(),
            op_entry(o.count, o.bytes, &o.latency_ns, then, interval_s),
        );
    }
    let gib_s = |op: &str| {
        let moved = now.tally.bytes(op).saturating_sub(prev.tally.bytes(op)) as f64;
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
        "events": now.tally.rows,
        "records": now.records,
        "dropped_events": now.dropped_io,
        "dropped_process_events": now.dropped_proc,
        "ring_fill": round(now.ring_fill),
        "ring_fill_peak": round(now.ring_fill_peak),
        "read_bytes": now.tally.bytes("read"),
        "write_bytes": now.tally.bytes("write"),
        "read_gib_s": gib_s("read"),
        "write_gib_s": gib_s("write"),
        "ops": ops,
    })
}
