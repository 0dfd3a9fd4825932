//! The requests of one rank (or one preparing thread): object_store's S3
//! client driven on a current-thread tokio runtime of the caller's own, one
//! request in flight as the traced thread had one call in flight; single
//! requests (GET, HEAD, LIST, PUT, DELETE) to an `http://` endpoint go the
//! `direct` way instead (object_store's client is then built only if
//! another request needs it). A request that fails with a 5xx, a 429 or a
//! transport error (a timeout, a reset) is made again up to
//! `--s3-retries` times, backing off; the retries, and the throttling
//! answers met (503 SlowDown, 429), are counted. Every request
//! is measured into the caller's [`RequestStats`], from its first attempt to
//! its answer; GETs also give their time to first byte.
//!
//! object_store's own retries are off: it neither counts nor reports them.
//! Keys are object_store paths: the characters S3's guidelines say to avoid
//! in keys (backslash, braces, caret, percent, backtick, square brackets,
//! double quote, angle brackets, tilde, hash, pipe, asterisk, question mark
//! and control characters) are percent-encoded, as are `.` and `..` segments.

use std::future::Future;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::aws::AmazonS3;
use object_store::list::{PaginatedListOptions, PaginatedListResult, PaginatedListStore};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as Key;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};

use super::direct::{Direct, DirectError};
use super::listing::Page;
use super::RequestStats;
use super::{settings, ObjectTarget};

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

/// How a failed attempt is answered.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Missing,
    /// Worth another attempt; `throttled` for 503 and 429.
    Retry {
        throttled: bool,
    },
    Final,
}

/// The HTTP status a failed request carried, from object_store's message
/// (its retry error, which holds the status, is not public).
fn status_of(text: &str) -> Option<u16> {
    let at = text.find("status code: ")? + "status code: ".len();
    text.get(at..at + 3)?.parse().ok()
}

/// A request that got an answer with status `code`, not a success.
fn by_status(code: u16) -> Verdict {
    match code {
        404 => Verdict::Missing,
        429 | 500..=599 => Verdict::Retry {
            throttled: code == 429 || code == 503,
        },
        _ => Verdict::Final,
    }
}

/// A failed attempt, as the retry rules judge it.
trait Attempt: std::fmt::Display {
    fn verdict(&self) -> Verdict;
}

impl Attempt for object_store::Error {
    fn verdict(&self) -> Verdict {
        use object_store::Error as E;
        match self {
            E::NotFound { .. } => Verdict::Missing,
            E::Generic { .. } => {
                let text = self.to_string();
                match status_of(&text) {
                    // object_store says 404 as NotFound where it applies.
                    Some(404) => Verdict::Final,
                    Some(code) => by_status(code),
                    // No status: the request never got an answer (a timeout,
                    // a refused or reset connection), or the answer said
                    // SlowDown in a body without a status line.
                    None => Verdict::Retry {
                        throttled: text.contains("SlowDown"),
                    },
                }
            }
            _ => Verdict::Final,
        }
    }
}

impl Attempt for DirectError {
    fn verdict(&self) -> Verdict {
        match self {
            DirectError::Status { status, .. } => by_status(*status),
            DirectError::Transport { .. } => Verdict::Retry { throttled: false },
            DirectError::Answer { .. } => Verdict::Final,
        }
    }
}

/// Counts the requests in flight together, keeping the most in the stats.
struct InFlight<'a> {
    now: std::cell::Cell<u64>,
    stats: &'a Mutex<RequestStats>,
}

impl<'a> InFlight<'a> {
    fn new(stats: &'a Mutex<RequestStats>) -> Self {
        InFlight {
            now: std::cell::Cell::new(0),
            stats,
        }
    }

    fn start(&self) -> OneInFlight<'_, 'a> {
        self.now.set(self.now.get() + 1);
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        s.max_in_flight = s.max_in_flight.max(self.now.get());
        OneInFlight(self)
    }
}

/// A request in flight, until dropped.
struct OneInFlight<'b, 'a>(&'b InFlight<'a>);

impl Drop for OneInFlight<'_, '_> {
    fn drop(&mut self) {
        self.0.now.set(self.0.now.get() - 1);
    }
}

/// Wait before attempt `n + 1`: 100 ms doubling, at most 5 s.
fn backoff(n: u32) -> Duration {
    Duration::from_millis(100u64 << n.min(6)).min(Duration::from_secs(5))
}

/// Makes one request, retried and measured; several can be in flight on
/// the client's runtime at once.
struct Requests {
    retries: u32,
    bucket: String,
    stats: Arc<Mutex<RequestStats>>,
}

impl Requests {
    fn stats(&self) -> MutexGuard<'_, RequestStats> {
        self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn request<T, E: Attempt, Fut>(
        &self,
        kind: RequestKind,
        key: &str,
        mut make: impl FnMut() -> Fut,
        bytes: impl Fn(&T) -> u64,
    ) -> Result<T, RequestError>
    where
        Fut: Future<Output = Result<T, E>>,
    {
        let start = Instant::now();
        let mut attempt = 0;
        loop {
            match make().await {
                Ok(v) => return Ok(self.made(kind, start, &bytes, v)),
                Err(e) => {
                    let wait = self.failed(kind, key, start, e, attempt)?;
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
            }
        }
    }

    /// [`Requests::request`] for a request made on the rank's own thread
    /// (the direct path): the same retries and figures, without a
    /// runtime's entry and exit around each request.
    fn request_blocking<T, E: Attempt>(
        &self,
        kind: RequestKind,
        key: &str,
        mut make: impl FnMut() -> Result<T, E>,
        bytes: impl Fn(&T) -> u64,
    ) -> Result<T, RequestError> {
        let start = Instant::now();
        let mut attempt = 0;
        loop {
            match make() {
                Ok(v) => return Ok(self.made(kind, start, &bytes, v)),
                Err(e) => {
                    let wait = self.failed(kind, key, start, e, attempt)?;
                    std::thread::sleep(wait);
                    attempt += 1;
                }
            }
        }
    }

    /// A request begun at `start` that succeeded: counted.
    fn made<T>(&self, kind: RequestKind, start: Instant, bytes: impl Fn(&T) -> u64, v: T) -> T {
        let took = start.elapsed().as_nanos() as u64;
        self.stats().record(kind.name(), bytes(&v), took, true);
        v
    }

    /// A request begun at `start` whose attempt `attempt` failed with `e`:
    /// how long to wait before the next attempt, or (a missing object, a
    /// failure not worth retrying, the retries spent) the error, counted.
    fn failed<E: Attempt>(
        &self,
        kind: RequestKind,
        key: &str,
        start: Instant,
        e: E,
        attempt: u32,
    ) -> Result<Duration, RequestError> {
        let took = start.elapsed().as_nanos() as u64;
        match e.verdict() {
            Verdict::Missing => {
                self.stats().record(kind.name(), 0, took, false);
                Err(RequestError::Missing)
            }
            Verdict::Retry { throttled } if attempt < self.retries => {
                let mut stats = self.stats();
                stats.retries += 1;
                stats.throttles += u64::from(throttled);
                Ok(backoff(attempt))
            }
            v => {
                let mut stats = self.stats();
                stats.record(kind.name(), 0, took, false);
                stats.throttles += u64::from(v == Verdict::Retry { throttled: true });
                let tries = if attempt > 0 {
                    format!(" (after {attempt} retries)")
                } else {
                    String::new()
                };
                Err(RequestError::Failed(format!(
                    "{} s3://{}/{key}: {e}{tries}",
                    kind.name(),
                    self.bucket
                )))
            }
        }
    }

    /// A GET of `range` (the whole object if `None`), its body read to the
    /// end and dropped: the bytes it brought and the object's size.
    async fn get(
        &self,
        store: &AmazonS3,
        key: &str,
        range: Option<Range<u64>>,
    ) -> Result<(u64, u64), RequestError> {
        let path = Key::from(key);
        let (n, size, first_byte) = self
            .request(
                RequestKind::Get,
                key,
                || {
                    let opts = GetOptions {
                        range: range.clone().map(GetRange::Bounded),
                        ..Default::default()
                    };
                    let path = &path;
                    async move {
                        let sent = Instant::now();
                        let r = store.get_opts(path, opts).await?;
                        let first_byte = sent.elapsed();
                        let size = r.meta.size;
                        let mut body = r.into_stream();
                        let mut n = 0u64;
                        while let Some(chunk) = body.next().await {
                            n += chunk?.len() as u64;
                        }
                        Ok::<_, object_store::Error>((n, size, first_byte))
                    }
                },
                |(n, _, _)| *n,
            )
            .await?;
        self.stats().first_byte(first_byte.as_nanos() as u64);
        Ok((n, size))
    }
}

pub struct ObjectClient {
    /// object_store's client: built at once where every request needs it,
    /// else at the first request `direct` does not make.
    store: Option<Arc<AmazonS3>>,
    /// Its settings (boxed, as `direct`: large, and needed once).
    builder: Box<object_store::aws::AmazonS3Builder>,
    endpoint: String,
    /// Single requests (GET, HEAD, LIST, PUT, DELETE) to an `http://`
    /// endpoint.
    direct: Option<Box<Direct>>,
    rt: tokio::runtime::Runtime,
    /// Retries, the bucket's name for messages, and where the requests
    /// are counted: shared with the rank's live figures (the lock is the
    /// rank's own but for a reader's moment).
    requests: Requests,
}

impl ObjectClient {
    /// A client for `target` counting its requests into `stats`.
    pub fn connect(target: &ObjectTarget, stats: Arc<Mutex<RequestStats>>) -> Result<Self, String> {
        // rustls needs its crypto chosen once per process; a second
        // install (another rank) is refused harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let builder = settings::builder(&target.bucket).with_retry(RetryConfig {
            max_retries: 0,
            ..Default::default()
        });
        let endpoint = settings::endpoint(&builder);
        let direct = settings::direct(&builder)
            .map(|s| Direct::new(&s, &target.bucket).map(Box::new))
            .transpose()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("starting the S3 client's runtime: {e}"))?;
        let mut client = ObjectClient {
            store: None,
            builder: Box::new(builder),
            endpoint,
            direct,
            rt,
            requests: Requests {
                retries: target.retries,
                bucket: target.bucket.clone(),
                stats,
            },
        };
        if client.direct.is_none() {
            // What is wrong with the settings is said before any request.
            client.store().map_err(|e| e.to_string())?;
        }
        Ok(client)
    }

    /// object_store's client, built at its first use.
    fn store(&mut self) -> Result<Arc<AmazonS3>, RequestError> {
        if self.store.is_none() {
            let store = (*self.builder).clone().build().map_err(|e| {
                RequestError::Failed(format!("S3 client for {}: {e}", self.endpoint))
            })?;
            self.store = Some(Arc::new(store));
        }
        Ok(self.store.clone().expect("built"))
    }

    /// The request figures, to change.
    pub fn stats(&self) -> MutexGuard<'_, RequestStats> {
        self.requests.stats()
    }

    /// Makes the request `make` starts, retrying it as allowed; measures it
    /// as `kind` with the bytes `bytes` says it moved.
    fn request<T, E: Attempt, Fut>(
        &mut self,
        kind: RequestKind,
        key: &str,
        make: impl FnMut() -> Fut,
        bytes: impl Fn(&T) -> u64,
    ) -> Result<T, RequestError>
    where
        Fut: Future<Output = Result<T, E>>,
    {
        self.rt
            .block_on(self.requests.request(kind, key, make, bytes))
    }

    /// Makes `call` on the direct path, retrying it as allowed and
    /// measuring it as `kind`; `None` where this client has no direct
    /// path (the request goes through object_store).
    fn direct<T>(
        &mut self,
        kind: RequestKind,
        key: &str,
        mut call: impl FnMut(&mut Direct) -> Result<T, DirectError>,
        bytes: impl Fn(&T) -> u64,
    ) -> Option<Result<T, RequestError>> {
        let direct = self.direct.as_mut()?;
        Some(
            self.requests
                .request_blocking(kind, key, || call(direct), bytes),
        )
    }

    /// A GET of `range` (the whole object if `None`): the bytes it
    /// brought, read to the end and dropped.
    pub fn get(&mut self, key: &str, range: Option<Range<u64>>) -> Result<u64, RequestError> {
        let get = |d: &mut Direct| d.get(key, range.as_ref());
        if let Some(answer) = self.direct(RequestKind::Get, key, get, |(n, _)| *n) {
            let (n, first_byte) = answer?;
            self.stats().first_byte(first_byte.as_nanos() as u64);
            return Ok(n);
        }
        let store = self.store()?;
        self.rt
            .block_on(self.requests.get(&store, key, range))
            .map(|(n, _)| n)
    }

    /// The object from `from` to its end in ranged GETs of `part` bytes,
    /// `concurrency` in flight, as a client on the AWS Common Runtime
    /// downloads one: the first part alone (its answer gives the object's
    /// size), then the rest together. The bytes brought, and the object's
    /// size.
    pub fn get_in_parts(
        &mut self,
        key: &str,
        from: u64,
        part: u64,
        concurrency: u32,
    ) -> Result<(u64, u64), RequestError> {
        let store = self.store()?;
        let (requests, store) = (&self.requests, &*store);
        let part = part.max(1);
        self.rt.block_on(async {
            let (first, size) = requests.get(store, key, Some(from..from + part)).await?;
            let starts = (from + part..size).step_by(part as usize);
            let in_flight = InFlight::new(&requests.stats);
            let rest: Vec<Result<(u64, u64), RequestError>> = futures_util::stream::iter(starts)
                .map(|at| {
                    let in_flight = &in_flight;
                    async move {
                        let _one = in_flight.start();
                        requests
                            .get(store, key, Some(at..(at + part).min(size)))
                            .await
                    }
                })
                .buffer_unordered(concurrency.max(1) as usize)
                .collect()
                .await;
            let mut got = first;
            for r in rest {
                got += r?.0;
            }
            Ok((got, size))
        })
    }

    /// A HEAD: the object's size.
    pub fn head(&mut self, key: &str) -> Result<u64, RequestError> {
        if let Some(answer) = self.direct(RequestKind::Head, key, |d| d.head(key), |_| 0) {
            return answer;
        }
        let store = self.store()?;
        let path = Key::from(key);
        let meta = self.request(RequestKind::Head, key, || store.head(&path), |_| 0)?;
        Ok(meta.size)
    }

    pub fn put(&mut self, key: &str, data: Bytes) -> Result<(), RequestError> {
        let n = data.len() as u64;
        if let Some(answer) = self.direct(RequestKind::Put, key, |d| d.put(key, &data), |_| n) {
            return answer;
        }
        let store = self.store()?;
        let path = Key::from(key);
        let payload = PutPayload::from_bytes(data);
        self.request(
            RequestKind::Put,
            key,
            || store.put(&path, payload.clone()),
            |_| n,
        )
        .map(drop)
    }

    pub fn create_multipart(&mut self, key: &str) -> Result<String, RequestError> {
        let store = self.store()?;
        let path = Key::from(key);
        self.request(
            RequestKind::Create,
            key,
            || store.create_multipart(&path),
            |_| 0,
        )
    }

    /// Part `index` (from 0) of upload `id`.
    pub fn put_part(
        &mut self,
        key: &str,
        id: &str,
        index: usize,
        data: Bytes,
    ) -> Result<PartId, RequestError> {
        let mut sent = self.put_parts(key, id, index, vec![data], 1)?;
        Ok(sent.pop().expect("one part sent"))
    }

    /// Parts `first..` of upload `id`, one per piece, `concurrency` in
    /// flight, as a client on the AWS Common Runtime uploads; their ids in
    /// order.
    pub fn put_parts(
        &mut self,
        key: &str,
        id: &str,
        first: usize,
        pieces: Vec<Bytes>,
        concurrency: u32,
    ) -> Result<Vec<PartId>, RequestError> {
        let store = self.store()?;
        let (requests, store) = (&self.requests, &*store);
        let path = Key::from(key);
        let id = &id.to_string();
        self.rt.block_on(async {
            let in_flight = InFlight::new(&requests.stats);
            let sent: Vec<Result<PartId, RequestError>> =
                futures_util::stream::iter(pieces.into_iter().enumerate())
                    .map(|(i, piece)| {
                        let (path, in_flight) = (&path, &in_flight);
                        let n = piece.len() as u64;
                        let payload = PutPayload::from_bytes(piece);
                        async move {
                            let _one = in_flight.start();
                            requests
                                .request(
                                    RequestKind::Part,
                                    key,
                                    || store.put_part(path, id, first + i, payload.clone()),
                                    |_| n,
                                )
                                .await
                        }
                    })
                    .buffered(concurrency.max(1) as usize)
                    .collect()
                    .await;
            sent.into_iter().collect()
        })
    }

    pub fn complete(
        &mut self,
        key: &str,
        id: &str,
        parts: Vec<PartId>,
    ) -> Result<(), RequestError> {
        let store = self.store()?;
        let path = Key::from(key);
        let id = id.to_string();
        self.request(
            RequestKind::Complete,
            key,
            || store.complete_multipart(&path, &id, parts.clone()),
            |_| 0,
        )
        .map(drop)
    }

    /// Abandons upload `id`, so its parts are not left on the store (not
    /// retried, not counted: it is cleanup after a failure).
    pub fn abort(&mut self, key: &str, id: &str) {
        let path = Key::from(key);
        let id = id.to_string();
        if let Ok(store) = self.store() {
            let _ = self.rt.block_on(store.abort_multipart(&path, &id));
        }
    }

    /// One page of the listing beneath `prefix`, counted: one LIST request,
    /// made `direct`ly where it can be.
    fn page(
        &mut self,
        prefix: &str,
        max_keys: Option<usize>,
        token: Option<String>,
    ) -> Result<Page, RequestError> {
        let dir = as_directory(prefix);
        let list = |d: &mut Direct| d.list_page(&dir, true, max_keys, token.as_deref());
        if let Some(answer) = self.direct(RequestKind::List, prefix, list, |_| 0) {
            return answer;
        }
        let page = self.listing(prefix, true, max_keys, token)?;
        Ok(Page {
            entries: (page.result.objects.len() + page.result.common_prefixes.len()) as u64,
            next: page.page_token,
        })
    }

    /// One page of the listing beneath `prefix` (as a directory, so with
    /// a `/` after it unless it is the bucket's root), through object_store:
    /// one LIST request.
    fn listing(
        &mut self,
        prefix: &str,
        one_level: bool,
        max_keys: Option<usize>,
        token: Option<String>,
    ) -> Result<PaginatedListResult, RequestError> {
        let store = self.store()?;
        let dir = as_directory(prefix);
        self.request(
            RequestKind::List,
            prefix,
            || {
                let opts = PaginatedListOptions {
                    delimiter: one_level.then_some("/".into()),
                    max_keys,
                    page_token: token.clone(),
                    ..Default::default()
                };
                store.list_paginated(Some(&dir), opts)
            },
            |_| 0,
        )
    }

    /// A listing of `prefix` as a directory (one level, every page, a
    /// request each): how many entries it holds.
    pub fn list(&mut self, prefix: &str) -> Result<u64, RequestError> {
        let mut entries = 0u64;
        let mut token = None;
        loop {
            let page = self.page(prefix, None, token)?;
            entries += page.entries;
            match page.next {
                Some(t) => token = Some(t),
                None => return Ok(entries),
            }
        }
    }

    /// Whether any key lies beneath `prefix`: one LIST of at most one key,
    /// as a file-system client of a bucket asks whether a directory exists.
    pub fn any_beneath(&mut self, prefix: &str) -> Result<bool, RequestError> {
        Ok(self.page(prefix, Some(1), None)?.entries > 0)
    }

    /// Every key beneath `prefix`, at any depth, with its size (every page,
    /// a request each), as the store spells it.
    pub fn keys_beneath(&mut self, prefix: &str) -> Result<Vec<(Key, u64)>, RequestError> {
        let mut keys = Vec::new();
        let mut token = None;
        loop {
            let page = self.listing(prefix, false, None, token)?;
            keys.extend(
                page.result
                    .objects
                    .into_iter()
                    .map(|m| (m.location, m.size)),
            );
            match page.page_token {
                Some(t) => token = Some(t),
                None => return Ok(keys),
            }
        }
    }

    pub fn delete(&mut self, key: &str) -> Result<(), RequestError> {
        if let Some(answer) = self.direct(RequestKind::Delete, key, |d| d.delete(key), |_| 0) {
            return answer;
        }
        self.delete_key(&Key::from(key))
    }

    /// A DELETE of a key as a listing spelled it (not encoded again).
    pub fn delete_key(&mut self, key: &Key) -> Result<(), RequestError> {
        let store = self.store()?;
        self.request(
            RequestKind::Delete,
            key.as_ref(),
            || store.delete(key),
            |_| 0,
        )
    }

    pub fn copy(&mut self, from: &str, to: &str) -> Result<(), RequestError> {
        if let Some(answer) = self.direct(RequestKind::Copy, from, |d| d.copy(from, to), |_| 0) {
            return answer;
        }
        let store = self.store()?;
        let (a, b) = (Key::from(from), Key::from(to));
        self.request(RequestKind::Copy, from, || store.copy(&a, &b), |_| 0)
    }
}

/// `prefix` as a directory's: with a `/` after it, unless it is the
/// bucket's root.
fn as_directory(prefix: &str) -> String {
    if prefix.is_empty() {
        String::new()
    } else {
        // Built by hand: a listing storm names a directory per request.
        let dir = prefix.trim_end_matches('/');
        let mut named = String::with_capacity(dir.len() + 1);
        named.push_str(dir);
        named.push('/');
        named
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_decide_retries() {
        assert_eq!(
            status_of("Error performing GET http://x in 2ms - Server returned non-2xx status code: 503 Service Unavailable: <Code>SlowDown</Code>"),
            Some(503)
        );
        assert_eq!(status_of("HTTP error: connection refused"), None);
        assert_eq!(backoff(0), Duration::from_millis(100));
        assert_eq!(backoff(10), Duration::from_secs(5));
    }
}
