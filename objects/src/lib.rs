//! The S3 client of iorepro's object-storage targets. Every request, to an
//! `http://` or an `https://` endpoint, takes one path: signed with SigV4
//! (`sign`: the day's key and each signature by the AWS SDKs' own signer,
//! `aws-sigv4`), written whole on a kept-alive HTTP/1.1
//! connection and its answer read with httparse (`connection`, `answer`,
//! `transport`), retried and measured (`client`). A rank makes one request
//! at a time on its own thread, as the traced thread made one call at a
//! time; the parts of a parallel download or upload go out on a few
//! connections of the rank's own, on scoped threads.
//!
//! A replay of a metadata storm makes tens of thousands of small requests
//! a second across its ranks, so the path is kept lean: no runtime, no
//! wake-up a request does not need (see `connection`), a request's head
//! written in one system call.
//!
//! `settings` finds the endpoint, region and credentials where the AWS CLI
//! finds them. The caller counts what the requests did through [`Meter`].

mod answer;
mod client;
mod connection;
mod documents;
mod imds;
mod keys;
mod listing;
mod s3;
mod settings;
mod sign;
mod transport;

use std::time::Duration;

pub use client::{Client, Part};
pub use keys::spelled;
pub use settings::{Settings, DEFAULT_REGION};

/// What a request is, as the report counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    Get,
    Put,
    /// CreateMultipartUpload.
    Create,
    /// UploadPart.
    Part,
    /// CompleteMultipartUpload.
    Complete,
    Head,
    List,
    Delete,
    Copy,
}

impl RequestKind {
    pub fn name(self) -> &'static str {
        match self {
            RequestKind::Get => "GET",
            RequestKind::Put => "PUT",
            RequestKind::Create => "MPU-create",
            RequestKind::Part => "MPU-part",
            RequestKind::Complete => "MPU-complete",
            RequestKind::Head => "HEAD",
            RequestKind::List => "LIST",
            RequestKind::Delete => "DELETE",
            RequestKind::Copy => "COPY",
        }
    }
}

/// Why a request gave no answer.
#[derive(Debug)]
pub enum RequestError {
    /// 404: the object (or, for a bucket check, the bucket) is not there.
    Missing,
    /// Anything else, after the retries it was allowed.
    Failed(String),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::Missing => f.write_str("no such object"),
            RequestError::Failed(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for RequestError {}

/// Where a client counts what its requests did: the one seam between the
/// client and whoever keeps its figures (the replayer's per-rank request
/// statistics). Called from the rank's thread, and from the threads of a
/// parallel download or upload while they run.
pub trait Meter: Send + Sync {
    /// A request of `kind`, from its first attempt to its answer (`ok`) or
    /// to the failure it ended with, and the payload bytes it moved.
    fn request(&self, kind: RequestKind, bytes: u64, took: Duration, ok: bool);
    /// A GET's time from its request's write to its answer's first byte.
    fn first_byte(&self, took: Duration);
    /// An attempt that failed and is made again; `throttled` for a 503
    /// SlowDown or a 429.
    fn retry(&self, throttled: bool);
    /// A throttling answer (503, 429) that ended a request past its retries.
    fn throttled(&self);
    /// Requests this client has in flight together, when more than one.
    fn in_flight(&self, now: u64);
}

/// A meter that counts nothing: for a check made before the replay starts.
pub struct Uncounted;

impl Meter for Uncounted {
    fn request(&self, _: RequestKind, _: u64, _: Duration, _: bool) {}
    fn first_byte(&self, _: Duration) {}
    fn retry(&self, _: bool) {}
    fn throttled(&self) {}
    fn in_flight(&self, _: u64) {}
}
