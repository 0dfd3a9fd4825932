//! A replay's figures in the Prometheus text format, read from the ranks at
//! each scrape (names and meanings in docs/PRODUCTION.md). Counters only grow, so
//! `rate()` gives throughput and ops/s; latency is a histogram, so
//! `histogram_quantile()` gives p99 over any window and across processes.

use std::sync::Arc;

use iorepro_telemetry::encode;
use iorepro_telemetry::tally::{encode_families, Families};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::LiveRanks;
use crate::io::objects::RequestStats;

/// The per-op families of a replay.
const OPS: Families = Families {
    label: "op",
    calls: ("iorepro_replay_ops", "Calls replayed, by op kind."),
    bytes: (
        "iorepro_replay_bytes",
        "Bytes moved by replayed calls, by op kind.",
    ),
    latency: (
        "iorepro_replay_latency_seconds",
        "Latency of replayed calls from their intended start, by op kind.",
    ),
};

/// The per-kind families of the requests to an object store.
const REQUESTS: Families = Families {
    label: "kind",
    calls: (
        "iorepro_replay_requests",
        "Requests to the object store, by kind (GET, PUT, MPU-part...).",
    ),
    bytes: (
        "iorepro_replay_request_bytes",
        "Bytes the requests moved, by kind.",
    ),
    latency: (
        "iorepro_replay_request_latency_seconds",
        "Latency of requests from the first attempt to the last byte, by kind.",
    ),
};

pub struct ReplayFigures {
    pub live: Arc<LiveRanks>,
}

impl std::fmt::Debug for ReplayFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReplayFigures")
    }
}

impl Collector for ReplayFigures {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let t = self.live.totals();
        encode_families(&mut enc, &OPS, t.ops.iter())?;
        if !t.requests.is_empty() {
            requests(&mut enc, &t.requests)?;
        }
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
            t.at.saturating_duration_since(self.live.created)
                .as_secs_f64(),
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

/// The requests to an object-storage target, by request kind.
fn requests(enc: &mut DescriptorEncoder, r: &RequestStats) -> std::fmt::Result {
    let kinds = r.kinds.iter().map(|(k, s)| (k.as_str(), s));
    encode_families(enc, &REQUESTS, kinds)?;
    encode::counter(
        enc,
        "iorepro_replay_request_retries",
        "Requests made again after a 5xx, a 429 or a transport error.",
        r.retries,
    )?;
    encode::counter(
        enc,
        "iorepro_replay_request_throttles",
        "Answers of 503 SlowDown or 429 met, retried or not.",
        r.throttles,
    )
}
