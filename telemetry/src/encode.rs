//! Writing a binary's figures in the Prometheus text format through
//! `prometheus-client`: the binaries keep their figures in their own
//! structures and describe them at scrape time (a
//! `prometheus_client::collector::Collector`), with these helpers for the
//! three shapes they need: a single value, one value per label (per op kind),
//! and a latency histogram per label.
//!
//! Counter names are given without `_total`: the encoder appends it.

use std::fmt::Result;

use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

/// A histogram in Prometheus's shape: per-bucket counts (not cumulative),
/// by upper bound, the last bound `f64::INFINITY`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Buckets {
    pub sum: f64,
    pub count: u64,
    pub buckets: Vec<(f64, u64)>,
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
            counters_by(&mut enc, "x_bytes", "Bytes.", "op", [("read", 10), ("write", 20)])?;
            let h = Buckets {
                sum: 0.3,
                count: 3,
                buckets: vec![(0.1, 1), (1.0, 2), (f64::INFINITY, 0)],
            };
            histograms_by(&mut enc, "x_latency_seconds", "Latency.", "op", [("read", &h)])
        }
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
