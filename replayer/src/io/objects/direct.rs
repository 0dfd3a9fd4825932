//! The single S3 requests, GET, HEAD, LIST, PUT, COPY and DELETE, made directly
//! over a kept-alive plain-HTTP connection with SigV4 signing of our own,
//! for endpoints named with `http://` (an in-cluster gateway, a test store).
//! object_store's client spends about 75 µs of CPU on a HEAD (its runtime's
//! wake-ups, URL parsing again per request, signing through chrono and
//! `fmt`); this path spends a fraction of that, so a rank can replay a
//! metadata storm at the store's pace rather than its own. Keys are
//! spelled as object_store spells them (`Path`), so objects one path writes
//! the other reads. TLS endpoints, multipart uploads and parallel parts
//! stay with object_store.

use std::fmt;
use std::io;
use std::ops::Range;
use std::time::Duration;

use object_store::path::Path as Key;

use super::http::{BodyUse, Connection};
use super::listing::{read_page, Page};
use super::sigv4::{canonical_query, uri_encode, AmzDate, Credentials, Signer};

/// Where and as whom the direct requests go.
#[derive(Debug, Clone)]
pub struct DirectSettings {
    /// `http://host:port`, without a trailing `/`.
    pub endpoint: String,
    pub credentials: Credentials,
    pub connect_timeout: Duration,
    pub timeout: Duration,
}

/// Why a direct request gave no answer, worded as object_store words its
/// errors (the status as `status code: NNN`), so the refusal hints and the
/// retry rules read both alike.
#[derive(Debug)]
pub enum DirectError {
    Status {
        method: &'static str,
        url: String,
        status: u16,
        reason: String,
        body: String,
    },
    Transport {
        method: &'static str,
        url: String,
        error: io::Error,
    },
    /// A listing the store answered with XML we could not read.
    Answer { url: String, why: String },
}

impl fmt::Display for DirectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirectError::Status {
                method,
                url,
                status,
                reason,
                body,
            } => write!(
                f,
                "Error performing {method} {url} - Server returned non-2xx status code: \
                 {status} {reason}: {body}"
            ),
            DirectError::Transport { method, url, error } => {
                write!(f, "Error performing {method} {url} - HTTP error: {error}")
            }
            DirectError::Answer { url, why } => {
                write!(f, "Error reading the listing of {url}: {why}")
            }
        }
    }
}

pub struct Direct {
    bucket: String,
    /// The bucket's path on the endpoint: `/BUCKET` (path-style requests).
    bucket_path: String,
    /// `http://host:port`, for messages.
    endpoint: String,
    authority: String,
    connection: Connection,
    signer: Signer,
    /// Scratch for a request's path and query.
    target: String,
    /// The last object's key and its encoded path: a rank reads one
    /// object in many requests, and spelling a key as object_store does
    /// costs more than the rest of the path's making.
    last_key: String,
    last_path: String,
    /// Scratch for a range header's value.
    range: String,
    /// The last listing's first page: its directory, depth, page size, and
    /// the query that asks for it.
    first_page: Option<(String, bool, Option<usize>, String)>,
}

impl Direct {
    pub fn new(settings: &DirectSettings, bucket: &str) -> Result<Direct, String> {
        let rest = settings
            .endpoint
            .strip_prefix("http://")
            .ok_or_else(|| format!("{} is not an http:// endpoint", settings.endpoint))?;
        let (authority, base) = rest.split_once('/').unwrap_or((rest, ""));
        let authority = authority.to_string();
        let mut bucket_path = String::new();
        for seg in base.split('/').filter(|s| !s.is_empty()) {
            bucket_path.push('/');
            uri_encode(&mut bucket_path, seg, false);
        }
        bucket_path.push('/');
        uri_encode(&mut bucket_path, bucket, false);
        Ok(Direct {
            bucket: bucket.to_string(),
            bucket_path,
            endpoint: settings.endpoint.clone(),
            connection: Connection::new(
                authority.clone(),
                settings.connect_timeout,
                settings.timeout,
            ),
            authority,
            signer: Signer::new(settings.credentials.clone()),
            target: String::with_capacity(256),
            last_key: String::new(),
            last_path: String::new(),
            range: String::with_capacity(48),
            first_page: None,
        })
    }

    /// The request's path for `key`, spelled as object_store spells it.
    fn object_path(&mut self, key: &str) {
        if self.last_key != key || self.last_path.is_empty() {
            self.last_path.clear();
            self.last_path.push_str(&self.bucket_path);
            self.last_path.push('/');
            if spelled_as_it_is(key) {
                uri_encode(&mut self.last_path, key, true);
            } else {
                uri_encode(&mut self.last_path, Key::from(key).as_ref(), true);
            }
            self.last_key.clear();
            self.last_key.push_str(key);
        }
        self.target.clear();
        self.target.push_str(&self.last_path);
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.endpoint)
    }

    /// Signs and sends the request for `self.target` (a path, and `query`
    /// unless empty), with the headers `extra` besides the signature's.
    fn send(
        &mut self,
        method: &'static str,
        query: &str,
        extra: &[(&'static str, &str)],
        payload: Option<&[u8]>,
        body: BodyUse,
    ) -> Result<super::http::Answer, DirectError> {
        let headers = self.signer.sign(
            method,
            &self.authority,
            &self.target,
            query,
            extra,
            AmzDate::now(),
        );
        if !query.is_empty() {
            self.target.push('?');
            self.target.push_str(query);
        }
        let answer = self
            .connection
            .request(method, &self.target, headers, payload, body)
            .map_err(|error| DirectError::Transport {
                method,
                url: self.url(&self.target),
                error,
            })?;
        if (200..300).contains(&answer.status) {
            return Ok(answer);
        }
        Err(DirectError::Status {
            method,
            url: self.url(&self.target),
            status: answer.status,
            reason: answer.reason,
            body: String::from_utf8_lossy(&answer.body).into_owned(),
        })
    }

    /// A GET of `range` (the whole object if `None`), its body counted and
    /// dropped: the bytes and the time to the first byte.
    pub fn get(
        &mut self,
        key: &str,
        range: Option<&Range<u64>>,
    ) -> Result<(u64, Duration), DirectError> {
        self.object_path(key);
        let body = match range {
            Some(r) => BodyUse::Range(r.end.saturating_sub(r.start)),
            None => BodyUse::Count,
        };
        let mut value = std::mem::take(&mut self.range);
        if let Some(r) = range {
            use std::fmt::Write;
            value.clear();
            let _ = write!(value, "bytes={}-{}", r.start, r.end.saturating_sub(1));
        }
        let header = range.map(|_| ("range", value.as_str()));
        let a = self.send("GET", "", header.as_slice(), None, body);
        self.range = value;
        let a = a?;
        Ok((a.body_bytes, a.first_byte))
    }

    /// A HEAD: the object's size.
    pub fn head(&mut self, key: &str) -> Result<u64, DirectError> {
        self.object_path(key);
        let a = self.send("HEAD", "", &[], None, BodyUse::None)?;
        Ok(a.content_length.unwrap_or(0))
    }

    /// A PUT of `data` as the object `key`.
    pub fn put(&mut self, key: &str, data: &[u8]) -> Result<(), DirectError> {
        self.object_path(key);
        self.send("PUT", "", &[], Some(data), BodyUse::Count)
            .map(drop)
    }

    /// A copy of `from` to `to` in the bucket: a PUT of `to` naming its
    /// source, spelled as object_store spells it. A copy can fail after
    /// the store has answered 200 (it sends the status before it copies):
    /// the error is then in the body, and read as the 500 it stands for,
    /// retried as object_store retries it.
    pub fn copy(&mut self, from: &str, to: &str) -> Result<(), DirectError> {
        let mut source = String::with_capacity(self.bucket.len() + from.len() + 8);
        source.push_str(&self.bucket);
        source.push('/');
        uri_encode(&mut source, Key::from(from).as_ref(), true);
        self.object_path(to);
        let extra = [("x-amz-copy-source", source.as_str())];
        let a = self.send("PUT", "", &extra, None, BodyUse::Keep)?;
        if !error_in(&a.body) {
            return Ok(());
        }
        Err(DirectError::Status {
            method: "PUT",
            url: self.url(&self.target),
            status: 500,
            reason: "(the store answered 200 OK, then this error)".into(),
            body: String::from_utf8_lossy(&a.body).into_owned(),
        })
    }

    /// A DELETE of `key` (S3 answers success whether it was there or not).
    pub fn delete(&mut self, key: &str) -> Result<(), DirectError> {
        self.object_path(key);
        self.send("DELETE", "", &[], None, BodyUse::Count).map(drop)
    }

    /// One ListObjectsV2 page beneath `dir` (a prefix ending in `/`, or
    /// empty for the bucket's root), one level deep if `one_level`.
    pub fn list_page(
        &mut self,
        dir: &str,
        one_level: bool,
        max_keys: Option<usize>,
        token: Option<&str>,
    ) -> Result<Page, DirectError> {
        // A storm lists one prefix again and again: its first page's query
        // is kept, not encoded and sorted anew.
        let asked = (dir, one_level, max_keys);
        let kept = token.is_none()
            && (self.first_page.as_ref()).is_some_and(|(d, o, m, _)| (d.as_str(), *o, *m) == asked);
        let query = match &mut self.first_page {
            // Lent to the request, and kept again after it.
            Some((.., query)) if kept => std::mem::take(query),
            _ => {
                let max = max_keys.map(|m| m.to_string());
                let mut params: Vec<(&str, &str)> = vec![("list-type", "2"), ("prefix", dir)];
                if one_level {
                    params.push(("delimiter", "/"));
                }
                if let Some(m) = &max {
                    params.push(("max-keys", m));
                }
                if let Some(t) = token {
                    params.push(("continuation-token", t));
                }
                let query = canonical_query(&mut params);
                if token.is_none() {
                    self.first_page = Some((dir.to_string(), one_level, max_keys, query.clone()));
                }
                query
            }
        };
        self.target.clear();
        self.target.push_str(&self.bucket_path);
        let a = self.send("GET", &query, &[], None, BodyUse::Keep);
        if let (true, Some((.., lent))) = (kept, &mut self.first_page) {
            *lent = query;
        }
        let a = a?;
        let page = read_page(&a.body).map_err(|why| DirectError::Answer {
            url: format!("s3://{}/{dir}", self.bucket),
            why,
        });
        self.connection.recycle(a.body);
        page
    }
}

/// Whether object_store's `Path` spells `key` as it is: parts of letters,
/// digits and `-_.`, none empty, `.` or `..`. Most keys a replay makes are
/// such (`data/rep-0000/...`), and parsing one costs as much as the rest
/// of a request's path and signature.
fn spelled_as_it_is(key: &str) -> bool {
    !key.is_empty()
        && key.split('/').all(|part| {
            !matches!(part, "" | "." | "..")
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
}

/// Whether a successful answer's body is an S3 error (`<Error>`), as a
/// copy that failed after its 200 sends.
fn error_in(body: &[u8]) -> bool {
    body.windows(b"<Error>".len()).any(|w| w == b"<Error>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_answered_200_can_still_have_failed() {
        let done = br#"<?xml version="1.0" encoding="UTF-8"?>
<CopyObjectResult><LastModified>2026-11-27T20:00:00.000Z</LastModified><ETag>"9b2cf535f27731c974343645a3985328"</ETag></CopyObjectResult>"#;
        let failed = br#"<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>"#;
        assert!(!error_in(done));
        assert!(error_in(failed));
    }

    #[test]
    fn a_key_taken_as_it_is_is_one_object_store_spells_so() {
        let keys = [
            "data/rep-0000/bench/r2.bin",
            "ranks/rank-00003/ckpt/step_10/model.pt",
            "a",
            "a.b_c-d/E9",
            "/lead",
            "trail/",
            "two//slashes",
            "./x",
            "x/../y",
            "a b",
            "x#1",
            "100%",
            "é/ü",
            "a~b",
            "",
        ];
        for key in keys {
            if spelled_as_it_is(key) {
                assert_eq!(Key::from(key).as_ref(), key, "{key:?}");
            }
        }
        assert!(spelled_as_it_is("data/rep-0000/bench/r2.bin"));
        assert!(!spelled_as_it_is("two//slashes") && !spelled_as_it_is("x/../y"));
    }

    #[test]
    fn keys_are_spelled_as_object_store_spells_them() {
        let settings = DirectSettings {
            endpoint: "http://127.0.0.1:9000/gw".into(),
            credentials: Credentials {
                access_key: "a".into(),
                secret_key: "s".into(),
                token: None,
                region: "us-east-1".into(),
            },
            connect_timeout: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
        };
        let mut d = Direct::new(&settings, "bench").unwrap();
        assert_eq!(d.authority, "127.0.0.1:9000");
        d.object_path("run/a b/x#1.bin");
        // object_store percent-encodes `#` in the key itself; the URL
        // encodes that `%` again.
        assert_eq!(d.target, "/gw/bench/run/a%20b/x%25231.bin");
        // The last key's path is kept; another key's is spelled anew, and a
        // query added to the target does not stay in the kept path.
        d.target.push_str("?x=1");
        d.object_path("run/a b/x#1.bin");
        assert_eq!(d.target, "/gw/bench/run/a%20b/x%25231.bin");
        d.object_path("run/b");
        assert_eq!(d.target, "/gw/bench/run/b");
        d.object_path("run/a b/x#1.bin");
        assert_eq!(d.target, "/gw/bench/run/a%20b/x%25231.bin");
    }
}
