//! The S3 requests, each one signed exchange on the rank's connection:
//! GET, HEAD, PUT, COPY, DELETE, a ListObjectsV2 page, and the steps of a
//! multipart upload. Keys are spelled as `keys` says; the bucket is named
//! in the path, or in the host where the settings ask for it.

use std::fmt::{self, Write as _};
use std::io;
use std::ops::Range;
use std::time::{Duration, SystemTime};

use rustls::pki_types::ServerName;

use crate::answer::{Answer, BodyUse};
use crate::connection::Connection;
use crate::documents::{error_in, keys_page, upload_id};
use crate::keys::{canonical_query, spelled, uri_encode};
use crate::listing::{read_page, Page};
use crate::settings::Settings;
use crate::sign::Signer;
use crate::transport::{tls_config, Peer};

/// Why a request gave no answer, its status worded as `status code: NNN`,
/// so that the retry rules and the refusal hints read it.
#[derive(Debug)]
pub enum S3Error {
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
    /// An answer we could not read (a listing's XML, an upload's id).
    Answer { url: String, why: String },
}

impl fmt::Display for S3Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            S3Error::Status {
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
            S3Error::Transport { method, url, error } => {
                write!(f, "Error performing {method} {url} - HTTP error: {error}")
            }
            S3Error::Answer { url, why } => write!(f, "Error reading the answer of {url}: {why}"),
        }
    }
}

pub struct S3 {
    bucket: String,
    /// `http://` or `https://`.
    scheme: &'static str,
    authority: String,
    /// The bucket's path on the endpoint: `/BASE/BUCKET` path-style, or
    /// `/BASE` where the host names the bucket.
    bucket_path: String,
    connection: Connection,
    signer: Signer,
    /// Scratch for a request's path and query.
    target: String,
    /// The last object's key and its encoded path: a rank reads one
    /// object in many requests.
    last_key: String,
    last_path: String,
    /// Scratch for a range header's value.
    range: String,
    /// The last listing's first page: its directory, depth, page size, and
    /// the query that asks for it.
    first_page: Option<(String, bool, Option<usize>, String)>,
}

impl S3 {
    pub fn new(settings: &Settings, bucket: &str) -> Result<S3, String> {
        let (scheme, rest) = match settings.endpoint.split_once("://") {
            Some(("http", rest)) => ("http://", rest),
            Some(("https", rest)) => ("https://", rest),
            _ => {
                return Err(format!(
                    "{} is not an http:// or https:// URL",
                    settings.endpoint
                ))
            }
        };
        let (host, base) = rest.split_once('/').unwrap_or((rest, ""));
        // A bucket named with dots in the host would not match a wildcard
        // certificate: such a bucket is named in the path.
        let in_host = settings.virtual_hosted && !bucket.contains('.');
        let authority = match in_host {
            true => format!("{bucket}.{host}"),
            false => host.to_string(),
        };
        let mut bucket_path = String::new();
        for seg in base.split('/').filter(|s| !s.is_empty()) {
            bucket_path.push('/');
            uri_encode(&mut bucket_path, seg, false);
        }
        if !in_host {
            bucket_path.push('/');
            uri_encode(&mut bucket_path, bucket, false);
        }
        let tls = match scheme {
            "https://" => {
                let name = authority
                    .rsplit_once(':')
                    .map_or(authority.as_str(), |(h, p)| {
                        if p.bytes().all(|b| b.is_ascii_digit()) {
                            h
                        } else {
                            authority.as_str()
                        }
                    });
                let name = ServerName::try_from(name.trim_matches(['[', ']']).to_string())
                    .map_err(|e| format!("{}: {e}", settings.endpoint))?;
                Some((tls_config()?, name))
            }
            _ => None,
        };
        Ok(S3 {
            bucket: bucket.to_string(),
            scheme,
            connection: Connection::new(Peer {
                authority: authority.clone(),
                tls,
                connect_timeout: settings.connect_timeout,
                timeout: settings.timeout,
            }),
            authority,
            bucket_path,
            signer: Signer::new(&settings.credentials()?),
            target: String::with_capacity(256),
            last_key: String::new(),
            last_path: String::new(),
            range: String::with_capacity(48),
            first_page: None,
        })
    }

    /// The request's path for `key`.
    fn object_path(&mut self, key: &str) {
        if self.last_key != key || self.last_path.is_empty() {
            self.last_path.clear();
            self.last_path.push_str(&self.bucket_path);
            self.last_path.push('/');
            uri_encode(&mut self.last_path, &spelled(key), true);
            self.last_key.clear();
            self.last_key.push_str(key);
        }
        self.target.clear();
        self.target.push_str(&self.last_path);
    }

    fn named_url(&self) -> String {
        format!("{}{}{}", self.scheme, self.authority, self.target)
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
    ) -> Result<Answer, S3Error> {
        if !query.is_empty() {
            self.target.push('?');
            self.target.push_str(query);
        }
        let headers = (self.signer).sign(
            method,
            &self.authority,
            &self.target,
            extra,
            SystemTime::now(),
        );
        let answer = self
            .connection
            .request(method, &self.target, headers, payload, body)
            .map_err(|error| S3Error::Transport {
                method,
                url: self.named_url(),
                error,
            })?;
        if answer.success() {
            return Ok(answer);
        }
        Err(S3Error::Status {
            method,
            url: self.named_url(),
            status: answer.status,
            reason: answer.reason,
            body: String::from_utf8_lossy(&answer.body).into_owned(),
        })
    }

    /// A success whose body says it failed (a copy, a completed upload:
    /// the store sends its 200 before the work), as the 500 it stands for.
    fn failed_after_200(&self, method: &'static str, a: &Answer) -> Result<(), S3Error> {
        if !error_in(&a.body) {
            return Ok(());
        }
        Err(S3Error::Status {
            method,
            url: self.named_url(),
            status: 500,
            reason: "(the store answered 200 OK, then this error)".into(),
            body: String::from_utf8_lossy(&a.body).into_owned(),
        })
    }

    /// A GET of `range` (the whole object if `None`), its body counted and
    /// dropped: the bytes, the time to the first byte, and the object's
    /// size.
    pub fn get(
        &mut self,
        key: &str,
        range: Option<&Range<u64>>,
    ) -> Result<(u64, Duration, u64), S3Error> {
        self.object_path(key);
        let body = match range {
            Some(r) => BodyUse::Range(r.end.saturating_sub(r.start)),
            None => BodyUse::Count,
        };
        let mut value = std::mem::take(&mut self.range);
        if let Some(r) = range {
            value.clear();
            let _ = write!(value, "bytes={}-{}", r.start, r.end.saturating_sub(1));
        }
        let header = range.map(|_| ("range", value.as_str()));
        let a = self.send("GET", "", header.as_slice(), None, body);
        self.range = value;
        let a = a?;
        let size = a.object_size.or(a.content_length).unwrap_or(a.body_bytes);
        Ok((a.body_bytes, a.first_byte, size))
    }

    /// A HEAD: the object's size.
    pub fn head(&mut self, key: &str) -> Result<u64, S3Error> {
        self.object_path(key);
        let a = self.send("HEAD", "", &[], None, BodyUse::None)?;
        Ok(a.content_length.unwrap_or(0))
    }

    /// A PUT of `data` as the object `key`.
    pub fn put(&mut self, key: &str, data: &[u8]) -> Result<(), S3Error> {
        self.object_path(key);
        self.send("PUT", "", &[], Some(data), BodyUse::Count)
            .map(drop)
    }

    /// A copy of `from` to `to` in the bucket: a PUT of `to` naming its
    /// source.
    pub fn copy(&mut self, from: &str, to: &str) -> Result<(), S3Error> {
        let mut source = String::with_capacity(self.bucket.len() + from.len() + 8);
        source.push_str(&self.bucket);
        source.push('/');
        uri_encode(&mut source, &spelled(from), true);
        self.object_path(to);
        let extra = [("x-amz-copy-source", source.as_str())];
        let a = self.send("PUT", "", &extra, None, BodyUse::Keep)?;
        self.failed_after_200("PUT", &a)
    }

    /// A DELETE of `key` (S3 answers success whether it was there or not);
    /// `as_listed` for a key as a listing spelled it (not spelled again).
    pub fn delete(&mut self, key: &str, as_listed: bool) -> Result<(), S3Error> {
        if as_listed {
            self.target.clear();
            self.target.push_str(&self.bucket_path);
            self.target.push('/');
            uri_encode(&mut self.target, key, true);
            self.last_path.clear();
        } else {
            self.object_path(key);
        }
        self.send("DELETE", "", &[], None, BodyUse::Count).map(drop)
    }

    /// CreateMultipartUpload: the upload's id.
    pub fn create_multipart(&mut self, key: &str) -> Result<String, S3Error> {
        self.object_path(key);
        let a = self.send("POST", "uploads=", &[], Some(&[]), BodyUse::Keep)?;
        upload_id(&a.body).map_err(|why| S3Error::Answer {
            url: self.named_url(),
            why,
        })
    }

    /// UploadPart `number` (from 1) of upload `id`: the part's ETag.
    pub fn put_part(
        &mut self,
        key: &str,
        id: &str,
        number: usize,
        data: &[u8],
    ) -> Result<String, S3Error> {
        self.object_path(key);
        let number = number.to_string();
        let query = canonical_query(&mut [("partNumber", &number), ("uploadId", id)]);
        let a = self.send("PUT", &query, &[], Some(data), BodyUse::Count)?;
        a.etag.ok_or_else(|| S3Error::Answer {
            url: self.named_url(),
            why: "the part's answer has no ETag".into(),
        })
    }

    /// CompleteMultipartUpload of upload `id` from its parts' ETags, in
    /// order.
    pub fn complete(&mut self, key: &str, id: &str, etags: &[String]) -> Result<(), S3Error> {
        self.object_path(key);
        let mut doc = String::from("<CompleteMultipartUpload>");
        for (i, etag) in etags.iter().enumerate() {
            let etag = etag.replace('&', "&amp;").replace('<', "&lt;");
            let _ = write!(
                doc,
                "<Part><PartNumber>{}</PartNumber><ETag>{etag}</ETag></Part>",
                i + 1
            );
        }
        doc.push_str("</CompleteMultipartUpload>");
        let query = canonical_query(&mut [("uploadId", id)]);
        let a = self.send("POST", &query, &[], Some(doc.as_bytes()), BodyUse::Keep)?;
        self.failed_after_200("POST", &a)
    }

    /// AbortMultipartUpload of upload `id`.
    pub fn abort(&mut self, key: &str, id: &str) -> Result<(), S3Error> {
        self.object_path(key);
        let query = canonical_query(&mut [("uploadId", id)]);
        self.send("DELETE", &query, &[], None, BodyUse::Count)
            .map(drop)
    }

    /// The query of a ListObjectsV2 page beneath `dir`.
    fn list_query(
        dir: &str,
        one_level: bool,
        max_keys: Option<usize>,
        token: Option<&str>,
    ) -> String {
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
        canonical_query(&mut params)
    }

    /// One ListObjectsV2 page beneath `dir` (a prefix ending in `/`, or
    /// empty for the bucket's root), one level deep if `one_level`: how
    /// many entries it held and the next page's token.
    pub fn list_page(
        &mut self,
        dir: &str,
        one_level: bool,
        max_keys: Option<usize>,
        token: Option<&str>,
    ) -> Result<Page, S3Error> {
        // A storm lists one prefix again and again: its first page's query
        // is kept, not encoded and sorted anew.
        let asked = (dir, one_level, max_keys);
        let kept = token.is_none()
            && (self.first_page.as_ref()).is_some_and(|(d, o, m, _)| (d.as_str(), *o, *m) == asked);
        let query = match &mut self.first_page {
            // Lent to the request, and kept again after it.
            Some((.., query)) if kept => std::mem::take(query),
            _ => {
                let query = S3::list_query(dir, one_level, max_keys, token);
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
        let page = read_page(&a.body).map_err(|why| S3Error::Answer {
            url: format!("s3://{}/{dir}", self.bucket),
            why,
        });
        self.connection.recycle(a.body);
        page
    }

    /// One page of every key beneath `prefix` at any depth, with sizes, as
    /// the store spells the keys; and the next page's token.
    pub fn keys_page(
        &mut self,
        prefix: &str,
        token: Option<&str>,
    ) -> Result<crate::documents::KeysPage, S3Error> {
        let query = S3::list_query(prefix, false, None, token);
        self.target.clear();
        self.target.push_str(&self.bucket_path);
        let a = self.send("GET", &query, &[], None, BodyUse::Keep)?;
        keys_page(&a.body).map_err(|why| S3Error::Answer {
            url: format!("s3://{}/{prefix}", self.bucket),
            why,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(endpoint: &str, virtual_hosted: bool) -> Settings {
        Settings {
            endpoint: endpoint.into(),
            endpoint_set: true,
            region: "us-east-1".into(),
            keys: Some(("a".into(), "s".into(), None)),
            virtual_hosted,
            connect_timeout: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn keys_are_spelled_once_then_encoded_in_the_path() {
        let mut d = S3::new(&settings("http://127.0.0.1:9000/gw", false), "bench").unwrap();
        assert_eq!(d.authority, "127.0.0.1:9000");
        d.object_path("run/a b/x#1.bin");
        // `#` is percent-encoded in the key itself; the URL encodes that
        // `%` again.
        assert_eq!(d.target, "/gw/bench/run/a%20b/x%25231.bin");
        // The last key's path is kept; another key's is spelled anew, and a
        // query added to the target does not stay in the kept path.
        d.target.push_str("?x=1");
        d.object_path("run/a b/x#1.bin");
        assert_eq!(d.target, "/gw/bench/run/a%20b/x%25231.bin");
        d.object_path("run/b");
        assert_eq!(d.target, "/gw/bench/run/b");
    }

    #[test]
    fn a_virtual_hosted_bucket_is_named_in_the_host_unless_it_has_dots() {
        let d = S3::new(
            &settings("https://s3.eu-west-1.amazonaws.com", true),
            "bench",
        )
        .unwrap();
        assert_eq!(
            (d.scheme, d.authority.as_str()),
            ("https://", "bench.s3.eu-west-1.amazonaws.com")
        );
        assert_eq!(d.bucket_path, "");
        let dotted = S3::new(&settings("https://s3.amazonaws.com", true), "my.bench").unwrap();
        assert_eq!(dotted.authority, "s3.amazonaws.com");
        assert_eq!(dotted.bucket_path, "/my.bench");
        assert!(S3::new(&settings("ftp://x", false), "bench").is_err());
    }
}
