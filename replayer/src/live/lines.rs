//! One `--status-interval` line of a replay: what has been done so far, and
//! how fast over the interval just ended (the keys are listed in docs/PRODUCTION.md).

use std::time::Instant;

use iorepro_format::units::GIB;
use iorepro_format::Op;
use iorepro_telemetry::status::round;
use iorepro_telemetry::tally::status_map;
use serde_json::{json, Value};

use super::Totals;
use crate::report::stats::unix_ns;

/// The line for `now`, with rates over the interval since `prev`.
pub fn status_line(
    now: &Totals,
    prev: &Totals,
    started: Instant,
    launched_rank: Option<u32>,
) -> Value {
    let interval_s = now.at.saturating_duration_since(prev.at).as_secs_f64();
    let per_s = |n: f64| {
        if interval_s > 0.0 {
            n / interval_s
        } else {
            0.0
        }
    };
    let gib_s = |op: Op| {
        round(per_s(
            now.bytes(op).saturating_sub(prev.bytes(op)) as f64 / GIB,
        ))
    };
    let mut line = json!({
        "elapsed_s": round(now.at.saturating_duration_since(started).as_secs_f64()),
        "unix_ms": unix_ns() / 1_000_000,
        "interval_s": round(interval_s),
        "ranks": now.ranks,
        "done": now.finished,
        "progress": round(now.progress),
        "read_bytes": now.bytes(Op::Read),
        "write_bytes": now.bytes(Op::Write),
        "read_gib_s": gib_s(Op::Read),
        "write_gib_s": gib_s(Op::Write),
        "stall_s": round(now.stall_ns as f64 / 1e9),
        "ops": now.ops.status_map(&prev.ops, interval_s),
    });
    if let Some(r) = launched_rank {
        line["rank"] = json!(r);
    }
    if !now.requests.is_empty() {
        line["requests"] = requests(now, prev, interval_s);
    }
    line
}

/// The requests to an object-storage target: per kind as the ops are, and
/// the retries and throttles so far.
fn requests(now: &Totals, prev: &Totals, interval_s: f64) -> Value {
    let kinds = status_map(
        now.requests.kinds.iter().map(|(k, s)| (k.as_str(), s)),
        |k| prev.requests.kinds.get(k),
        interval_s,
    );
    json!({
        "kinds": kinds,
        "retries": now.requests.retries,
        "throttles": now.requests.throttles,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::call_tally::OpStats;
    use iorepro_telemetry::tally::OpTally;
    use std::time::Duration;

    fn totals(at: Instant, reads: &[u64]) -> Totals {
        let mut ops = OpTally::<OpStats>::default();
        for &lat in reads {
            ops.entry(Op::Read).record(1 << 20, lat);
        }
        Totals {
            at,
            ops,
            stall_ns: 250_000_000,
            ranks: 2,
            finished: false,
            progress: 0.5,
            requests: Default::default(),
        }
    }

    #[test]
    fn rates_and_p99_are_over_the_interval() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(2);
        // 10 slow reads before the interval, 1,024 fast ones (1 GiB) in it.
        let mut before = vec![50_000_000u64; 10];
        let prev = totals(t0, &before);
        before.extend(std::iter::repeat_n(100_000, 1024));
        let now = totals(t1, &before);
        let line = status_line(&now, &prev, t0, Some(3));
        assert_eq!(line["read_bytes"], json!(1034u64 << 20));
        assert_eq!(line["read_gib_s"], json!(0.5));
        assert_eq!(line["ops"]["read"]["ops_s"], json!(512.0));
        assert_eq!(line["ops"]["read"]["count"], json!(1034));
        let p99 = line["ops"]["read"]["p99_us"].as_f64().unwrap();
        assert!((99.0..=101.0).contains(&p99), "{p99}");
        assert_eq!(line["stall_s"], json!(0.25));
        assert_eq!(line["rank"], json!(3));
        assert_eq!(line["elapsed_s"], json!(2.0));
        let quiet = status_line(&now, &now, t0, None);
        assert_eq!(quiet["ops"]["read"]["p99_us"], Value::Null);
        assert!(quiet.get("rank").is_none());
    }
}
