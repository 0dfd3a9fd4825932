//! What a rank's requests to an object-storage target did: per request kind
//! (GET, PUT, the three steps of a multipart upload, HEAD, LIST, DELETE,
//! COPY) their count, bytes, failures and latency, the GETs' time to first
//! byte, the retries and throttles, and the traced calls that made no
//! request (a mkdir, a read inside data an earlier GET brought). Kept by
//! the rank's [`crate::io::objects::ObjectClient`] and worker, merged by the
//! report, carried between processes beside the rank's [`super::stats`].

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use iorepro_format::units::GIB;

use super::stats::{decode_histogram, encode_histogram, new_histogram, OpStats, RankResult};
use super::summary::{lat, Latency};
use crate::io::objects::{ObjectTarget, RequestKind};

#[derive(Debug, Clone)]
pub struct RequestStats {
    /// By [`RequestKind::name`].
    pub kinds: BTreeMap<String, OpStats>,
    pub first_byte_ns: Histogram<u64>,
    pub retries: u64,
    /// Retries after a 503 (SlowDown) or a 429.
    pub throttles: u64,
    /// Traced calls that made no request, by op.
    pub without_request: BTreeMap<String, u64>,
}

impl Default for RequestStats {
    fn default() -> Self {
        RequestStats {
            kinds: BTreeMap::new(),
            first_byte_ns: new_histogram(),
            retries: 0,
            throttles: 0,
            without_request: BTreeMap::new(),
        }
    }
}

impl RequestStats {
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty() && self.without_request.is_empty()
    }

    pub fn record(&mut self, kind: RequestKind, bytes: u64, latency_ns: u64, ok: bool) {
        let s = self.kinds.entry(kind.name().to_string()).or_default();
        s.record(bytes, latency_ns);
        s.note_result(ok, false);
    }

    pub fn first_byte(&mut self, ns: u64) {
        self.first_byte_ns.saturating_record(ns.max(1));
    }

    pub fn no_request(&mut self, op: &str) {
        *self.without_request.entry(op.to_string()).or_default() += 1;
    }

    pub fn merge(&mut self, other: &RequestStats) {
        for (k, s) in &other.kinds {
            self.kinds.entry(k.clone()).or_default().merge(s);
        }
        self.first_byte_ns
            .add(&other.first_byte_ns)
            .expect("histograms share bounds");
        self.retries += other.retries;
        self.throttles += other.throttles;
        for (k, n) in &other.without_request {
            *self.without_request.entry(k.clone()).or_default() += n;
        }
    }

    /// Bytes the GETs brought.
    pub fn get_bytes(&self) -> u64 {
        self.kinds
            .get(RequestKind::Get.name())
            .map_or(0, |s| s.bytes)
    }
}

/// [`RequestStats`] between processes, histograms as in [`super::stats`].
#[derive(Serialize, Deserialize)]
pub struct WireRequests {
    kinds: BTreeMap<String, super::stats::WireOp>,
    first_byte_ns: String,
    retries: u64,
    throttles: u64,
    without_request: BTreeMap<String, u64>,
}

impl WireRequests {
    pub fn of(s: &RequestStats) -> Self {
        WireRequests {
            kinds: s
                .kinds
                .iter()
                .map(|(k, o)| (k.clone(), super::stats::WireOp::of(o)))
                .collect(),
            first_byte_ns: encode_histogram(&s.first_byte_ns),
            retries: s.retries,
            throttles: s.throttles,
            without_request: s.without_request.clone(),
        }
    }

    pub fn into_stats(self) -> Result<RequestStats, String> {
        Ok(RequestStats {
            kinds: self
                .kinds
                .into_iter()
                .map(|(k, w)| Ok((k, w.into_stats()?)))
                .collect::<Result<_, String>>()?,
            first_byte_ns: decode_histogram(&self.first_byte_ns)?,
            retries: self.retries,
            throttles: self.throttles,
            without_request: self.without_request,
        })
    }
}

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
    /// By request kind: GET, PUT, MPU-create, MPU-part, MPU-complete,
    /// HEAD, LIST, DELETE, COPY.
    pub kinds: BTreeMap<String, RequestKindReport>,
    /// GETs: from sending the request to the response's headers.
    pub first_byte_us: Option<Latency>,
    pub retries: u64,
    /// Retries after 503 SlowDown or 429.
    pub throttles: u64,
    /// Traced calls that made no request (mkdir, a buffered write, a read
    /// inside bytes an earlier GET brought), by op.
    pub without_request: BTreeMap<String, u64>,
}

impl RequestsReport {
    /// Every rank's requests merged, over a replay of `duration_s`.
    pub fn build(target: &ObjectTarget, results: &[RankResult], duration_s: f64) -> Self {
        let mut all = RequestStats::default();
        for r in results {
            all.merge(&r.requests);
        }
        let per_s = |x: f64| {
            if duration_s > 0.0 {
                x / duration_s
            } else {
                0.0
            }
        };
        let kinds = all
            .kinds
            .iter()
            .map(|(k, s)| {
                let r = RequestKindReport {
                    count: s.count,
                    bytes: s.bytes,
                    failed: s.failed,
                    per_s: per_s(s.count as f64),
                    gib_s: per_s(s.bytes as f64 / GIB),
                    lat_us: lat(&s.latency_ns),
                };
                (k.clone(), r)
            })
            .collect();
        RequestsReport {
            target: target.url(),
            read: target.read.name(),
            multipart_threshold: target.multipart_threshold,
            part_size: target.part_size,
            kinds,
            first_byte_us: (!all.first_byte_ns.is_empty()).then(|| lat(&all.first_byte_ns)),
            retries: all.retries,
            throttles: all.throttles,
            without_request: all.without_request,
        }
    }
}
