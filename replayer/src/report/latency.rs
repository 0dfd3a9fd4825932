//! Latency percentiles as the report gives them (µs), from a histogram of
//! nanoseconds.

use serde::Serialize;

/// p50, p90, p99, p99.9 and the maximum, in µs.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

pub fn lat(h: &hdrhistogram::Histogram<u64>) -> Latency {
    let us = |v: u64| v as f64 / 1e3;
    Latency {
        p50: us(h.value_at_quantile(0.5)),
        p90: us(h.value_at_quantile(0.9)),
        p99: us(h.value_at_quantile(0.99)),
        p999: us(h.value_at_quantile(0.999)),
        max: us(h.max()),
    }
}
