//! Writing a binary's figures in the Prometheus text format through
//! `prometheus-client`: the binaries keep their figures in their own
//! structures and describe them at scrape time (a
//! `prometheus_client::collector::Collector`), with these helpers for the
//! three shapes they need: a single value, one value per label (per op kind),
//! and a latency histogram per label.
//!
//! Counter names are given without `_total`: the encoder appends it.

use std::fmt::Result;

use hdrhistogram::Histogram;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

/// Upper bounds of the latency buckets, in seconds: 10 µs (a page-cache hit)
/// to 10 s (a checkpoint's fsync on a struggling file system).
pub const LATENCY_BOUNDS_S: [f64; 19] = [
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// A histogram in Prometheus's shape: per-bucket counts (not cumulative),
/// by upper bound, the last bound `f64::INFINITY`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Buckets {
    pub sum: f64,
    pub count: u64,
    pub buckets: Vec<(f64, u64)>,
}

impl Buckets {
    /// A latency histogram kept in nanoseconds, in [`LATENCY_BOUNDS_S`].
    pub fn from_latency_ns(h: &Histogram<u64>) -> Buckets {
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
}

pub fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    m.encode_counter::<NoLabelSet, _, u64>(&value, None)
}

pub fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    m.encode_gauge(&value)
}

/// One counter per value of `label` (per op kind, say).
pub fn counters_by<'v>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    values: impl IntoIterator<Item = (&'v str, u64)>,
) -> Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (v, n) in values {
        let labels = [(label, v)];
        m.encode_family(&labels)?
            .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
    }
    Ok(())
}

/// One gauge per value of `label`.
pub fn gauges_by<'v>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    values: impl IntoIterator<Item = (&'v str, f64)>,
) -> Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (v, x) in values {
        let labels = [(label, v)];
        m.encode_family(&labels)?.encode_gauge(&x)?;
    }
    Ok(())
}

/// One histogram per value of `label`.
pub fn histograms_by<'v>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    values: impl IntoIterator<Item = (&'v str, &'v Buckets)>,
) -> Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (v, h) in values {
        let labels = [(label, v)];
        m.encode_family(&labels)?
            .encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::collector::Collector;
    use prometheus_client::registry::Registry;

    #[derive(Debug)]
    struct Figures;

    impl Collector for Figures {
        fn encode(&self, mut enc: DescriptorEncoder) -> Result {
            counter(&mut enc, "x_events", "Events.", 7)?;
            gauge(&mut enc, "x_fill_ratio", "Fill.", 0.5)?;
            counters_by(
                &mut enc,
                "x_bytes",
                "Bytes.",
                "op",
                [("read", 10), ("write", 20)],
            )?;
            let h = Buckets {
                sum: 0.3,
                count: 3,
                buckets: vec![(0.1, 1), (1.0, 2), (f64::INFINITY, 0)],
            };
            histograms_by(
                &mut enc,
                "x_latency_seconds",
                "Latency.",
                "op",
                [("read", &h)],
            )
        }
    }

    #[test]
    fn hdr_values_land_in_their_buckets() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 2).unwrap();
        h.record(5_000).unwrap(); // 5 µs
        h.record_n(2_000_000, 3).unwrap(); // 2 ms
        h.record(30_000_000_000).unwrap(); // 30 s
        let b = Buckets::from_latency_ns(&h);
        assert_eq!(b.count, 5);
        assert_eq!(b.buckets.len(), LATENCY_BOUNDS_S.len() + 1);
        assert_eq!(b.buckets[0], (1e-5, 1));
        let ms = b.buckets.iter().find(|(le, _)| *le == 2.5e-3).unwrap();
        assert_eq!(ms.1, 3);
        assert_eq!(*b.buckets.last().unwrap(), (f64::INFINITY, 1));
        assert!((b.sum - 30.006).abs() < 0.5, "{}", b.sum);
    }

    #[test]
    fn text_format() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Figures));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "# TYPE x_events counter",
            "x_events_total 7",
            "x_fill_ratio 0.5",
            "x_bytes_total{op=\"read\"} 10",
            "x_bytes_total{op=\"write\"} 20",
            "x_latency_seconds_bucket{le=\"1.0\",op=\"read\"} 3",
            "x_latency_seconds_bucket{le=\"+Inf\",op=\"read\"} 3",
            "x_latency_seconds_count{op=\"read\"} 3",
            "# EOF",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }
}
