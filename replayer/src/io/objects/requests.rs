//! What a rank's object-storage client measured, request by request: kept
//! beside the client that makes the requests, merged and shown by the
//! report and the live figures.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use iorepro_telemetry::tally::KindFigures as _;

use iorepro_telemetry::tally::latency_histogram;

use crate::io::call_tally::OpStats;

/// What a rank's requests to an object-storage target did: per request
/// kind (GET, PUT, the three steps of a multipart upload, HEAD, LIST,
/// DELETE, COPY) their count, bytes, failures and latency, the GETs' time to
/// first byte, the retries and throttles, and the traced calls that made no
/// request (a mkdir, a read inside data an earlier GET brought). Kept by
/// the rank's client, which shares it with the rank's live figures.
#[derive(Debug, Clone)]
pub struct RequestStats {
    /// By [`crate::io::objects::RequestKind::name`].
    pub kinds: BTreeMap<String, OpStats>,
    pub first_byte_ns: Histogram<u64>,
    pub retries: u64,
    /// Answers of 503 SlowDown or 429 met, retried or (past the bound) not.
    pub throttles: u64,
    /// Traced calls that made no request, by op.
    pub without_request: BTreeMap<String, u64>,
    /// The most requests one client had in flight at once (1 but for
    /// `--s3-read parallel`).
    pub max_in_flight: u64,
}

impl Default for RequestStats {
    fn default() -> Self {
        RequestStats {
            kinds: BTreeMap::new(),
            first_byte_ns: latency_histogram(),
            retries: 0,
            throttles: 0,
            without_request: BTreeMap::new(),
            max_in_flight: 0,
        }
    }
}

impl RequestStats {
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty() && self.without_request.is_empty()
    }

    /// One request of kind `kind` (a [`crate::io::objects::RequestKind`]'s name).
    pub fn record(&mut self, kind: &str, bytes: u64, latency_ns: u64, ok: bool) {
        self.max_in_flight = self.max_in_flight.max(1);
        // Looked up before it is named anew: a request's figures cost no
        // allocation (and one lookup) once its kind is known.
        let s = match self.kinds.get_mut(kind) {
            Some(s) => s,
            None => self.kinds.entry(kind.to_string()).or_default(),
        };
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
        self.max_in_flight = self.max_in_flight.max(other.max_in_flight);
        for (k, n) in &other.without_request {
            *self.without_request.entry(k.clone()).or_default() += n;
        }
    }
}
