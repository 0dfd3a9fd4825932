//! A capture's figures in the Prometheus text format, read at each scrape
//! from the copy the capture loop last published (names in docs/PRODUCTION.md).

use std::sync::Arc;

use iorepro_telemetry::encode;
use iorepro_telemetry::tally::{encode_families, Families};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::Shared;

/// The per-op families of a capture.
const OPS: Families = Families {
    label: "op",
    calls: (
        "iorepro_collect_ops",
        "Calls captured (written to the trace), by op kind.",
    ),
    bytes: (
        "iorepro_collect_bytes",
        "Bytes moved by captured calls, by op kind.",
    ),
    latency: (
        "iorepro_collect_latency_seconds",
        "Time the job's captured calls took, by op kind.",
    ),
};

pub struct CaptureFigures {
    pub shared: Arc<Shared>,
}

impl std::fmt::Debug for CaptureFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CaptureFigures")
    }
}

impl Collector for CaptureFigures {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let s = self.shared.snapshot();
        encode_families(&mut enc, &OPS, s.written.ops.iter())?;
        encode::counter(
            &mut enc,
            "iorepro_collect_events",
            "Rows written to the trace (the manifest's events).",
            s.written.rows,
        )?;
        encode::counter(
            &mut enc,
            "iorepro_collect_records",
            "Records read from the kernel side.",
            s.records,
        )?;
        encode::counter(
            &mut enc,
            "iorepro_collect_dropped_events",
            "I/O records the kernel side could not deliver (ring buffer full).",
            s.dropped_io,
        )?;
        encode::counter(
            &mut enc,
            "iorepro_collect_dropped_process_events",
            "Process records (fork, exec, exit) the kernel side could not deliver.",
            s.dropped_proc,
        )?;
        encode::gauge(
            &mut enc,
            "iorepro_collect_ring_fill_ratio",
            "Share of the fuller ring buffer waiting to be read, before the latest read.",
            s.ring_fill,
        )?;
        encode::gauge(
            &mut enc,
            "iorepro_collect_ring_fill_peak_ratio",
            "The highest ring fill seen since the capture began.",
            s.ring_fill_peak,
        )?;
        encode::gauge(
            &mut enc,
            "iorepro_collect_elapsed_seconds",
            "Time since the capture started.",
            s.at.saturating_duration_since(s.started).as_secs_f64(),
        )?;
        encode::gauge(
            &mut enc,
            "iorepro_collect_finished",
            "1 once the trace is closed: the figures are final.",
            if s.finished { 1.0 } else { 0.0 },
        )
    }
}
