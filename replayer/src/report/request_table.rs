//! The requests to an object-storage target in the report: every rank's
//! [`RequestStats`] merged, per request kind with rates and latency
//! percentiles, the GETs' time to first byte, retries and throttles.

use std::collections::BTreeMap;

use serde::Serialize;

use iorepro_format::units::GIB;

use super::latency::{lat, Latency};
use super::stats::RankResult;
use crate::io::objects::ObjectTarget;
use crate::io::objects::RequestStats;
use iorepro_format::units::per_s;

/// One request kind in the report.
#[derive(Debug, Clone, Serialize)]
pub struct RequestKindReport {
    pub count: u64,
    pub bytes: u64,
    /// Requests that got no answer after their retries, or a 404.
    pub failed: u64,
    pub per_s: f64,
    pub gib_s: f64,
    /// From the first attempt to the answer's last byte, retries included.
    pub lat_us: Latency,
}

/// The requests of every rank, in the report (object-storage targets only).
#[derive(Debug, Clone, Serialize)]
pub struct RequestsReport {
    /// The target, `s3://BUCKET/PREFIX`.
    pub target: String,
    /// `--s3-read`.
    pub read: &'static str,
    pub multipart_threshold: u64,
    pub part_size: u64,
    /// With `--s3-read parallel`: GETs in flight per rank asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// The most requests one rank had in flight at once.
    pub max_in_flight: u64,
    /// By request kind: GET, PUT, MPU-create, MPU-part, MPU-complete,
    /// HEAD, LIST, DELETE, COPY.
    pub kinds: BTreeMap<String, RequestKindReport>,
    /// GETs: from sending the request to the response's headers.
    pub first_byte_us: Option<Latency>,
    pub retries: u64,
    /// Answers of 503 SlowDown or 429 met, retried or (past the bound) not.
    pub throttles: u64,
    /// Traced calls that made no request (mkdir, a buffered write, a read
    /// inside bytes an earlier GET brought), by op.
    pub without_request: BTreeMap<String, u64>,
    /// The ranks' own CPU time per request made, in µs: what the replay's
    /// client spent on each (its threads', the kernel's work on their
    /// sockets included; the process's start-up and its reading of the
    /// trace are not). `None` when no request was made.
    pub client_cpu_us_per_request: Option<f64>,
}

/// The ranks' CPU time over the `requests` they made, in µs a request.
fn client_cpu_us(results: &[RankResult], requests: u64) -> Option<f64> {
    let cpu_ns: u64 = results.iter().map(|r| r.cpu_ns).sum();
    (requests > 0).then(|| cpu_ns as f64 / 1e3 / requests as f64)
}

impl RequestsReport {
    /// Every rank's requests merged, over a replay of `duration_s`.
    pub fn build(target: &ObjectTarget, results: &[RankResult], duration_s: f64) -> Self {
        let mut all = RequestStats::default();
        for r in results {
            all.merge(&r.requests);
        }
        let per_s = |x: f64| per_s(x, duration_s);
        let kinds = all
            .kinds
            .iter()
            .map(|(k, s)| {
                let o = &s.figures;
                let r = RequestKindReport {
                    count: o.count,
                    bytes: o.bytes,
                    failed: s.failed,
                    per_s: per_s(o.count as f64),
                    gib_s: per_s(o.bytes as f64 / GIB),
                    lat_us: lat(&o.latency_ns),
                };
                (k.clone(), r)
            })
            .collect();
        RequestsReport {
            target: target.url(),
            read: target.read.name(),
            multipart_threshold: target.multipart_threshold,
            part_size: target.part_size,
            concurrency: (target.read == crate::io::objects::ReadMode::Parallel)
                .then_some(target.concurrency),
            max_in_flight: all.max_in_flight,
            kinds,
            first_byte_us: (!all.first_byte_ns.is_empty()).then(|| lat(&all.first_byte_ns)),
            retries: all.retries,
            throttles: all.throttles,
            without_request: all.without_request,
            client_cpu_us_per_request: client_cpu_us(
                results,
                all.kinds.values().map(|s| s.figures.count).sum(),
            ),
        }
    }
}
