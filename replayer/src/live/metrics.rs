//! A replay's figures in the Prometheus text format, read from the ranks at
//! each scrape (names and meanings in the README). Counters only grow, so
//! `rate()` gives throughput and ops/s; latency is a histogram, so
//! `histogram_quantile()` gives p99 over any window and across processes.

use std::sync::Arc;

use hdrhistogram::Histogram;
use iorepro_telemetry::encode::{self, Buckets};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::LiveRanks;

/// Upper bounds of the latency buckets, in seconds: 10 µs (a page-cache hit)
/// to 10 s (a checkpoint's fsync on a struggling file system).
const LATENCY_BOUNDS_S: [f64; 19] = [
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

pub struct ReplayFigures {
    pub live: Arc<LiveRanks>,
}

impl std::fmt::Debug for ReplayFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReplayFigures")
    }
}

/// A latency histogram (ns) in Prometheus's buckets (s).
pub fn buckets(h: &Histogram<u64>) -> Buckets {
    let mut counts = vec![0u64; LATENCY_BOUNDS_S.len() + 1];
    let mut sum = 0.0;
    for v in h.iter_recorded() {
        let secs = h.highest_equivalent(v.value_iterated_to()) as f64 / 1e9;
        let n = v.count_at_value();
        sum += secs * n as f64;
        let i = LATENCY_BOUNDS_S
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(LATENCY_BOUNDS_S.len());
        counts[i] += n;
    }
    Buckets {
        sum,
        count: h.len(),
        buckets: LATENCY_BOUNDS_S
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(counts)
            .collect(),
    }
}

impl Collector for ReplayFigures {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let t = self.live.totals();
        let ops: Vec<(&str, u64)> = t.ops.iter().map(|(k, o)| (k.as_str(), o.count)).collect();
        encode::counters_by(
            &mut enc,
            "iorepro_replay_ops",
            "Calls replayed, by op kind.",
            "op",
            ops,
        )?;
        let bytes: Vec<(&str, u64)> = t.ops.iter().map(|(k, o)| (k.as_str(), o.bytes)).collect();
        encode::counters_by(
            &mut enc,
            "iorepro_replay_bytes",
            "Bytes moved by replayed calls, by op kind.",
            "op",
            bytes,
        )?;
        let hists: Vec<(String, Buckets)> = t
            .ops
            .iter()
            .map(|(k, o)| (k.clone(), buckets(&o.latency_ns)))
            .collect();
        encode::histograms_by(
            &mut enc,
            "iorepro_replay_latency_seconds",
            "Latency of replayed calls from their intended start, by op kind.",
            "op",
            hists.iter().map(|(k, b)| (k.as_str(), b)),
        )?;
        encode::gauge(
            &mut enc,
            "iorepro_replay_stall_seconds",
            "How far behind the trace's schedule the furthest-behind rank is (0 with --timing afap).",
            t.stall_ns as f64 / 1e9,
        )?;
        encode::gauge(
            &mut enc,
            "iorepro_replay_elapsed_seconds",
            "Time since the replay started.",
            t.at.saturating_duration_since(self.live.created).as_secs_f64(),
        )?;
        encode::gauge(
            &mut enc,
            "iorepro_replay_progress_ratio",
            "Share of this process's planned calls replayed.",
            t.progress,
        )?;
        encode::gauge(
            &mut enc,
            "iorepro_replay_ranks",
            "Ranks this process replays.",
            t.ranks as f64,
        )?;
        encode::gauge(
            &mut enc,
            "iorepro_replay_finished",
            "1 once every rank of this process has finished: the figures are final.",
            if t.finished { 1.0 } else { 0.0 },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::new_histogram;

    #[test]
    fn hdr_values_land_in_their_buckets() {
        let mut h = new_histogram();
        h.record(5_000).unwrap(); // 5 µs
        h.record_n(2_000_000, 3).unwrap(); // 2 ms
        h.record(30_000_000_000).unwrap(); // 30 s
        let b = buckets(&h);
        assert_eq!(b.count, 5);
        assert_eq!(b.buckets.len(), LATENCY_BOUNDS_S.len() + 1);
        assert_eq!(b.buckets[0], (1e-5, 1));
        let ms = b.buckets.iter().find(|(le, _)| *le == 2.5e-3).unwrap();
        assert_eq!(ms.1, 3);
        assert_eq!(*b.buckets.last().unwrap(), (f64::INFINITY, 1));
        assert!((b.sum - 30.006).abs() < 0.5, "{}", b.sum);
    }
}
