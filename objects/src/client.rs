//! The requests of one rank (or one preparing thread), one in flight as the
//! traced thread had one call in flight, on the rank's own connection; the
//! parts of a parallel download or upload go out on a few more, one scoped
//! thread each. A request that fails with a 5xx, a 429 or a transport
//! error (a timeout, a reset) is made again up to the retries allowed,
//! backing off; the retries, and the throttling answers met (503 SlowDown,
//! 429), are counted. Every request is measured into the [`Meter`], from
//! its first attempt to its answer; GETs also give their time to first
//! byte.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::s3::{S3Error, S3};
use crate::{Meter, RequestError, RequestKind, Settings};

/// An uploaded part: its number (from 1) and the ETag the store gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub number: usize,
    pub etag: String,
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

fn verdict(e: &S3Error) -> Verdict {
    match e {
        S3Error::Status { status: 404, .. } => Verdict::Missing,
        S3Error::Status { status, .. } => match status {
            429 | 500..=599 => Verdict::Retry {
                throttled: *status == 429 || *status == 503,
            },
            _ => Verdict::Final,
        },
        // A certificate refused is refused again.
        S3Error::Transport { error, .. }
            if error.get_ref().is_some_and(|e| e.is::<rustls::Error>()) =>
        {
            Verdict::Final
        }
        S3Error::Transport { .. } => Verdict::Retry { throttled: false },
        S3Error::Answer { .. } => Verdict::Final,
    }
}

/// Wait before attempt `n + 1`: 100 ms doubling, at most 5 s.
fn backoff(n: u32) -> Duration {
    Duration::from_millis(100u64 << n.min(6)).min(Duration::from_secs(5))
}

/// Makes requests, retried and measured: what every connection of a
/// client shares.
struct Requests {
    retries: u32,
    bucket: String,
    meter: Arc<dyn Meter>,
}

impl Requests {
    /// Makes the request `make` makes, retrying it as allowed; measures it
    /// as `kind` with the bytes `bytes` says it moved.
    fn make<T>(
        &self,
        kind: RequestKind,
        key: &str,
        mut make: impl FnMut() -> Result<T, S3Error>,
        bytes: impl Fn(&T) -> u64,
    ) -> Result<T, RequestError> {
        let start = Instant::now();
        let mut attempt = 0;
        loop {
            let e = match make() {
                Ok(v) => {
                    (self.meter).request(kind, bytes(&v), start.elapsed(), true);
                    return Ok(v);
                }
                Err(e) => e,
            };
            match verdict(&e) {
                Verdict::Missing => {
                    (self.meter).request(kind, 0, start.elapsed(), false);
                    return Err(RequestError::Missing);
                }
                Verdict::Retry { throttled } if attempt < self.retries => {
                    self.meter.retry(throttled);
                    std::thread::sleep(backoff(attempt));
                    attempt += 1;
                }
                v => {
                    (self.meter).request(kind, 0, start.elapsed(), false);
                    if v == (Verdict::Retry { throttled: true }) {
                        self.meter.throttled();
                    }
                    let tries = match attempt {
                        0 => String::new(),
                        n => format!(" (after {n} retries)"),
                    };
                    return Err(RequestError::Failed(format!(
                        "{} s3://{}/{key}: {e}{tries}",
                        kind.name(),
                        self.bucket
                    )));
                }
            }
        }
    }

    /// A GET of `range` on `s3`: the bytes it brought and the object's
    /// size; its time to first byte is measured.
    fn get(
        &self,
        s3: &mut S3,
        key: &str,
        range: Option<&Range<u64>>,
    ) -> Result<(u64, u64), RequestError> {
        let get = || s3.get(key, range);
        let (n, first_byte, size) = self.make(RequestKind::Get, key, get, |(n, ..)| *n)?;
        self.meter.first_byte(first_byte);
        Ok((n, size))
    }
}

pub struct Client {
    settings: Settings,
    /// The rank's own connection.
    s3: S3,
    /// More connections, made at the first parallel transfer that needs
    /// them and kept.
    more: Vec<S3>,
    requests: Requests,
}

impl Client {
    /// A client of `bucket` as `settings` say, counting into `meter`,
    /// retrying a failed request up to `retries` times. The keys are found
    /// (and an instance's role asked) here, before any request.
    pub fn new(
        settings: &Settings,
        bucket: &str,
        retries: u32,
        meter: Arc<dyn Meter>,
    ) -> Result<Client, String> {
        Ok(Client {
            s3: S3::new(settings, bucket)?,
            settings: settings.clone(),
            more: Vec::new(),
            requests: Requests {
                retries,
                bucket: bucket.to_string(),
                meter,
            },
        })
    }

    /// Runs `jobs` jobs, `concurrency` at once, each on a connection of its
    /// own (the rank's, then more): their results in order.
    fn in_parallel<T: Send>(
        &mut self,
        jobs: usize,
        concurrency: u32,
        job: impl Fn(&Requests, &mut S3, usize) -> Result<T, RequestError> + Sync,
    ) -> Result<Vec<T>, RequestError> {
        let workers = (concurrency.max(1) as usize).min(jobs);
        while self.more.len() + 1 < workers {
            let s3 =
                S3::new(&self.settings, &self.requests.bucket).map_err(RequestError::Failed)?;
            self.more.push(s3);
        }
        let next = AtomicUsize::new(0);
        let now = AtomicU64::new(0);
        let done: Mutex<Vec<Option<Result<T, RequestError>>>> =
            Mutex::new((0..jobs).map(|_| None).collect());
        let requests = &self.requests;
        let connections = std::iter::once(&mut self.s3).chain(self.more.iter_mut());
        std::thread::scope(|scope| {
            for s3 in connections.take(workers) {
                let (next, now, done, job) = (&next, &now, &done, &job);
                scope.spawn(move || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= jobs {
                        return;
                    }
                    requests
                        .meter
                        .in_flight(now.fetch_add(1, Ordering::Relaxed) + 1);
                    let r = job(requests, s3, i);
                    now.fetch_sub(1, Ordering::Relaxed);
                    let failed = r.is_err();
                    done.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(r);
                    if failed {
                        // The transfer has failed: the other parts stop.
                        next.store(jobs, Ordering::Relaxed);
                    }
                });
            }
        });
        let done = done.into_inner().unwrap_or_else(|p| p.into_inner());
        done.into_iter().flatten().collect()
    }

    /// A GET of `range` (the whole object if `None`): the bytes it
    /// brought, read to the end and dropped.
    pub fn get(&mut self, key: &str, range: Option<Range<u64>>) -> Result<u64, RequestError> {
        let (n, _) = self.requests.get(&mut self.s3, key, range.as_ref())?;
        Ok(n)
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
        let part = part.max(1);
        let first = from..from + part;
        let (first, size) = self.requests.get(&mut self.s3, key, Some(&first))?;
        let rest = from + part;
        let parts = size.saturating_sub(rest).div_ceil(part) as usize;
        let got = self.in_parallel(parts, concurrency, |requests, s3, i| {
            let at = rest + i as u64 * part;
            let (n, _) = requests.get(s3, key, Some(&(at..(at + part).min(size))))?;
            Ok(n)
        })?;
        Ok((first + got.iter().sum::<u64>(), size))
    }

    /// A HEAD: the object's size.
    pub fn head(&mut self, key: &str) -> Result<u64, RequestError> {
        let s3 = &mut self.s3;
        (self.requests).make(RequestKind::Head, key, || s3.head(key), |_| 0)
    }

    pub fn put(&mut self, key: &str, data: &[u8]) -> Result<(), RequestError> {
        let (s3, n) = (&mut self.s3, data.len() as u64);
        (self.requests).make(RequestKind::Put, key, || s3.put(key, data), |_| n)
    }

    /// CreateMultipartUpload: the upload's id.
    pub fn create_multipart(&mut self, key: &str) -> Result<String, RequestError> {
        let s3 = &mut self.s3;
        let create = || s3.create_multipart(key);
        (self.requests).make(RequestKind::Create, key, create, |_| 0)
    }

    /// Part `index` (from 0) of upload `id`.
    pub fn put_part(
        &mut self,
        key: &str,
        id: &str,
        index: usize,
        data: &[u8],
    ) -> Result<Part, RequestError> {
        let mut sent = self.put_parts(key, id, index, &[data], 1)?;
        Ok(sent.pop().expect("one part sent"))
    }

    /// Parts `first..` (from 0) of upload `id`, one per piece,
    /// `concurrency` in flight, as a client on the AWS Common Runtime
    /// uploads; in order.
    pub fn put_parts(
        &mut self,
        key: &str,
        id: &str,
        first: usize,
        pieces: &[&[u8]],
        concurrency: u32,
    ) -> Result<Vec<Part>, RequestError> {
        self.in_parallel(pieces.len(), concurrency, |requests, s3, i| {
            let (number, data) = (first + i + 1, pieces[i]);
            let put = || s3.put_part(key, id, number, data);
            let etag = requests.make(RequestKind::Part, key, put, |_| data.len() as u64)?;
            Ok(Part { number, etag })
        })
    }

    pub fn complete(&mut self, key: &str, id: &str, parts: &[Part]) -> Result<(), RequestError> {
        let etags: Vec<String> = parts.iter().map(|p| p.etag.clone()).collect();
        let s3 = &mut self.s3;
        let complete = || s3.complete(key, id, &etags);
        (self.requests).make(RequestKind::Complete, key, complete, |_| 0)
    }

    /// Abandons upload `id`, so its parts are not left on the store (not
    /// retried, not counted: it is cleanup after a failure).
    pub fn abort(&mut self, key: &str, id: &str) {
        let _ = self.s3.abort(key, id);
    }

    /// A listing of `prefix` as a directory (one level, every page, a
    /// request each): how many entries it holds.
    pub fn list(&mut self, prefix: &str) -> Result<u64, RequestError> {
        let dir = as_directory(prefix);
        let mut entries = 0u64;
        let mut token = None;
        loop {
            let s3 = &mut self.s3;
            let page = || s3.list_page(&dir, true, None, token.as_deref());
            let page = (self.requests).make(RequestKind::List, prefix, page, |_| 0)?;
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
        let dir = as_directory(prefix);
        let s3 = &mut self.s3;
        let page = || s3.list_page(&dir, true, Some(1), None);
        let page = (self.requests).make(RequestKind::List, prefix, page, |_| 0)?;
        Ok(page.entries > 0)
    }

    /// Every key beneath `prefix`, at any depth, with its size (every page,
    /// a request each), as the store spells it.
    pub fn keys_beneath(&mut self, prefix: &str) -> Result<Vec<(String, u64)>, RequestError> {
        let dir = as_directory(prefix);
        let mut keys = Vec::new();
        let mut token = None;
        loop {
            let s3 = &mut self.s3;
            let page = || s3.keys_page(&dir, token.as_deref());
            let (mut page, next) = (self.requests).make(RequestKind::List, prefix, page, |_| 0)?;
            keys.append(&mut page);
            match next {
                Some(t) => token = Some(t),
                None => return Ok(keys),
            }
        }
    }

    pub fn delete(&mut self, key: &str) -> Result<(), RequestError> {
        let s3 = &mut self.s3;
        (self.requests).make(RequestKind::Delete, key, || s3.delete(key, false), |_| 0)
    }

    /// A DELETE of a key as a listing spelled it (not spelled again).
    pub fn delete_listed(&mut self, key: &str) -> Result<(), RequestError> {
        let s3 = &mut self.s3;
        (self.requests).make(RequestKind::Delete, key, || s3.delete(key, true), |_| 0)
    }

    pub fn copy(&mut self, from: &str, to: &str) -> Result<(), RequestError> {
        let s3 = &mut self.s3;
        (self.requests).make(RequestKind::Copy, from, || s3.copy(from, to), |_| 0)
    }
}

/// `prefix` as a directory's: with a `/` after it, unless it is the
/// bucket's root.
fn as_directory(prefix: &str) -> String {
    if prefix.is_empty() {
        String::new()
    } else {
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
        let status = |status| S3Error::Status {
            method: "GET",
            url: "u".into(),
            status,
            reason: String::new(),
            body: String::new(),
        };
        assert_eq!(verdict(&status(404)), Verdict::Missing);
        assert_eq!(verdict(&status(503)), Verdict::Retry { throttled: true });
        assert_eq!(verdict(&status(429)), Verdict::Retry { throttled: true });
        assert_eq!(verdict(&status(500)), Verdict::Retry { throttled: false });
        assert_eq!(verdict(&status(403)), Verdict::Final);
        let transport = |error| S3Error::Transport {
            method: "GET",
            url: "u".into(),
            error,
        };
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(
            verdict(&transport(reset)),
            Verdict::Retry { throttled: false }
        );
        let untrusted = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let untrusted = std::io::Error::new(std::io::ErrorKind::InvalidData, untrusted);
        assert_eq!(verdict(&transport(untrusted)), Verdict::Final);
        assert_eq!(backoff(0), Duration::from_millis(100));
        assert_eq!(backoff(10), Duration::from_secs(5));
    }
}
