//! The report in fio's JSON layout (`fio --output-format=json` with
//! `--group_reporting`, fio 3.x): one job for the whole replay, with
//! `read`, `write`, `trim` and `sync` sections and the latency
//! distribution, so tools that parse `jobs[].read.bw_bytes` or
//! `jobs[].write.clat_ns.percentile` read a replay as they read fio.
//!
//! fio's completion latency counts from submission; the replay's counts
//! from when the op was due (no coordinated omission), which equals it
//! unless a rank fell behind its schedule. Statistics fio samples over time
//! (`bw_min`, `iops_mean`, ...) are left at zero with zero samples, as fio
//! itself prints them when it took none.

use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

use super::Exporter;
use crate::report::summary::Report;

pub struct Fio;

/// fio's default completion-latency percentiles.
const PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

fn stats(h: Option<&Histogram<u64>>, percentiles: bool) -> Value {
    let Some(h) = h.filter(|h| !h.is_empty()) else {
        return json!({"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0});
    };
    let mut v = json!({
        "min": h.min(),
        "max": h.max(),
        "mean": h.mean(),
        "stddev": h.stdev(),
        "N": h.len(),
    });
    if percentiles {
        let p: Map<String, Value> = PERCENTILES
            .iter()
            .map(|&q| (format!("{q:.6}"), json!(h.value_at_percentile(q))))
            .collect();
        v["percentile"] = Value::Object(p);
    }
    v
}

/// One direction (`read`, `write` or `trim`): bytes, rates, latency.
fn direction(report: &Report, op: &str) -> Value {
    let (count, bytes) = report.ops.get(op).map_or((0, 0), |o| (o.count, o.bytes));
    let secs = report.duration_s;
    let runtime_ms = if count > 0 {
        (secs * 1e3).round() as u64
    } else {
        0
    };
    let per_s = |x: f64| {
        if secs > 0.0 && count > 0 {
            x / secs
        } else {
            0.0
        }
    };
    let h = report.latency_ns.get(op);
    json!({
        "io_bytes": bytes,
        "io_kbytes": bytes / 1024,
        "bw_bytes": per_s(bytes as f64).round() as u64,
        "bw": (per_s(bytes as f64) / 1024.0).round() as u64,
        "iops": per_s(count as f64),
        "runtime": runtime_ms,
        "total_ios": count,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": stats(None, false),
        "clat_ns": stats(h, true),
        "lat_ns": stats(h, false),
        "bw_min": 0, "bw_max": 0, "bw_agg": if count > 0 { 100.0 } else { 0.0 },
        "bw_mean": 0.0, "bw_dev": 0.0, "bw_samples": 0,
        "iops_min": 0, "iops_max": 0, "iops_mean": 0.0, "iops_stddev": 0.0, "iops_samples": 0,
    })
}

/// The share of data ops (percent) whose latency falls in each of fio's
/// buckets: up to 2, 4, 10, ... 1000 ns, then µs, then ms.
fn latency_buckets(report: &Report) -> (Value, Value, Value) {
    let mut all: Option<Histogram<u64>> = None;
    for op in ["read", "write"] {
        if let Some(h) = report.latency_ns.get(op) {
            match &mut all {
                Some(a) => a.add(h).expect("histograms share bounds"),
                None => all = Some(h.clone()),
            }
        }
    }
    let total = all.as_ref().map_or(0, |h| h.len()).max(1) as f64;
    let below = |ns: u64| match &all {
        None => 0,
        Some(h) if ns >= h.high() => h.len(),
        Some(h) => h.count_between(0, ns),
    };
    let edges = [2u64, 4, 10, 20, 50, 100, 250, 500, 750, 1000];
    let ms_edges = [2u64, 4, 10, 20, 50, 100, 250, 500, 750, 1000, 2000];
    let mut prev = 0u64;
    let mut bucket = |upper_ns: u64| {
        let n = below(upper_ns);
        let share = (n.saturating_sub(prev)) as f64 * 100.0 / total;
        prev = n;
        share
    };
    let ns: Map<String, Value> = edges
        .iter()
        .map(|&e| (e.to_string(), json!(bucket(e))))
        .collect();
    let us: Map<String, Value> = edges
        .iter()
        .map(|&e| (e.to_string(), json!(bucket(e * 1_000))))
        .collect();
    let mut ms: Map<String, Value> = ms_edges
        .iter()
        .map(|&e| (e.to_string(), json!(bucket(e * 1_000_000))))
        .collect();
    ms.insert(">=2000".into(), json!(bucket(u64::MAX)));
    (Value::Object(ns), Value::Object(us), Value::Object(ms))
}

impl Exporter for Fio {
    fn render(&self, report: &Report) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut sync: Option<Histogram<u64>> = None;
        let mut sync_count = 0;
        for op in ["fsync", "fdatasync"] {
            if let (Some(h), Some(o)) = (report.latency_ns.get(op), report.ops.get(op)) {
                sync_count += o.count;
                match &mut sync {
                    Some(a) => a.add(h).expect("histograms share bounds"),
                    None => sync = Some(h.clone()),
                }
            }
        }
        let (ns, us, ms) = latency_buckets(report);
        let job = json!({
            "jobname": "iorepro-replay",
            "groupid": 0,
            "error": if report.errors.is_empty() { 0 } else { 1 },
            "eta": 0,
            "elapsed": report.duration_s.ceil() as u64,
            "job options": {
                "name": "iorepro-replay",
                "numjobs": report.ranks.to_string(),
                "ioengine": report.engine,
                "direct": if report.direct == "off" { "0" } else { "1" },
                "iodepth": "1",
            },
            "read": direction(report, "read"),
            "write": direction(report, "write"),
            "trim": direction(report, "trim"),
            "sync": {
                "total_ios": sync_count,
                "lat_ns": stats(sync.as_ref(), true),
            },
            "job_runtime": (report.duration_s * 1e3).round() as u64,
            "iodepth_level": {"1": 100.0, "2": 0.0, "4": 0.0, "8": 0.0, "16": 0.0, "32": 0.0, ">=64": 0.0},
            "latency_ns": ns,
            "latency_us": us,
            "latency_ms": ms,
            "latency_depth": 1,
            "latency_target": 0,
            "latency_percentile": 100.0,
            "latency_window": 0,
        });
        let doc = json!({
            "fio version": concat!("iorepro-replay-", env!("CARGO_PKG_VERSION")),
            "timestamp": now.as_secs(),
            "timestamp_ms": now.as_millis() as u64,
            "jobs": [job],
        });
        serde_json::to_string_pretty(&doc).expect("fio layout serialises") + "\n"
    }
}
