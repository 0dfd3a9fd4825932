//! SigV4 signatures as S3 asks for them: the path sent as it is (encoded
//! once, not normalised), the payload unsigned and said so in
//! `x-amz-content-sha256`, a session token signed. The AWS SDKs' own
//! signer (`aws-sigv4`) derives the day's signing key and computes each
//! signature; the canonical request and the string to sign are put
//! together here, because the crate's whole signing of a request (its URI
//! parsed again, a header map built, the date formatted through `fmt`)
//! costs about 9 µs against about 1.5 µs this way, a sixth of a small
//! GET's whole CPU (`cargo run --release -p iorepro-objects --example
//! request_cost`; the object-storage lines of `cargo xtask bench`). The
//! tests hold every kind of request this client signs against the crate's
//! whole signer.
//!
//! The day's key is derived once a day, not once a request; and a storm
//! asks the same thing many times a second (a listing of one prefix, a
//! HEAD of one object), and a request the same to the second has the same
//! signature: it is given again, not signed anew.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_sigv4::sign::v4;
use sha2::{Digest, Sha256};

/// What S3 calls its service in a credential scope.
const SERVICE: &str = "s3";
const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";

/// Keys and where they are good.
#[derive(Clone)]
pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
    pub token: Option<String>,
    pub region: String,
}

impl std::fmt::Debug for Credentials {
    /// The secret and the token are not printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// A request's time as SigV4 spells it: `20130524T000000Z`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AmzDate([u8; 16]);

impl AmzDate {
    /// The UTC time `secs` seconds after the Unix epoch.
    fn at(secs: u64) -> AmzDate {
        let (days, rest) = (secs / 86_400, secs % 86_400);
        let (y, m, d) = civil_from_days(days as i64);
        let (hh, mm, ss) = (rest / 3600, rest / 60 % 60, rest % 60);
        let mut out = [0u8; 16];
        let mut put = |at: usize, value: u64, width: usize| {
            let mut v = value;
            for i in (0..width).rev() {
                out[at + i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        };
        put(0, y as u64, 4);
        put(4, m as u64, 2);
        put(6, d as u64, 2);
        put(9, hh, 2);
        put(11, mm, 2);
        put(13, ss, 2);
        out[8] = b'T';
        out[15] = b'Z';
        AmzDate(out)
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("ASCII digits")
    }

    /// The day alone, `20130524`, which scopes the signing key.
    fn day(&self) -> &str {
        &self.as_str()[..8]
    }
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn hex(bytes: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
}

/// The day's scope and signing key.
struct DayKey {
    day: String,
    scope: String,
    key: Vec<u8>,
}

pub struct Signer {
    credentials: Credentials,
    day: Option<DayKey>,
    /// The canonical request, then the string to sign.
    scratch: String,
    /// The canonical request the last lines signed: a request the same to
    /// the second is given them again.
    signed: String,
    /// The signing header lines, as written on the wire.
    lines: String,
}

impl std::fmt::Debug for Signer {
    /// The keys and what they signed (a token among the headers) are not
    /// printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

impl Signer {
    pub fn new(credentials: &Credentials) -> Signer {
        Signer {
            credentials: credentials.clone(),
            day: None,
            scratch: String::with_capacity(512),
            signed: String::with_capacity(512),
            lines: String::with_capacity(512),
        }
    }

    /// The day's key, derived by the crate when the day changes (`at` is
    /// a time of `date`'s day).
    fn day_key(&mut self, date: &AmzDate, at: SystemTime) {
        if self.day.as_ref().is_none_or(|d| d.day != date.day()) {
            let c = &self.credentials;
            let key = v4::generate_signing_key(&c.secret_key, at, &c.region, SERVICE);
            self.day = Some(DayKey {
                day: date.day().to_string(),
                scope: format!("{}/{}/{SERVICE}/aws4_request", date.day(), c.region),
                key: key.as_ref().to_vec(),
            });
        }
    }

    /// The header lines (each ending in CRLF) that sign `method
    /// path?query` to `host` at `at`, with `extra` (lower-case names, such
    /// as `range`) signed too. `path_and_query` is as sent: encoded, its
    /// query in canonical order.
    pub fn sign(
        &mut self,
        method: &str,
        host: &str,
        path_and_query: &str,
        extra: &[(&'static str, &str)],
        at: SystemTime,
    ) -> &str {
        let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let date = AmzDate::at(secs);
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let token = self.credentials.token.take();
        // Canonical headers, sorted by name: host, the extras (`range`),
        // then the x-amz- ones.
        let mut headers: [(&str, &str); 8] = [("", ""); 8];
        let mut n = 0;
        for h in [("host", host)]
            .into_iter()
            .chain(extra.iter().copied())
            .chain([
                ("x-amz-content-sha256", UNSIGNED_PAYLOAD),
                ("x-amz-date", date.as_str()),
            ])
            .chain(token.as_deref().map(|t| ("x-amz-security-token", t)))
            .take(8)
        {
            headers[n] = h;
            n += 1;
        }
        let headers = &mut headers[..n];
        headers.sort_unstable_by_key(|(name, _)| *name);

        let names = canonical_request(&mut self.scratch, method, path, query, headers);
        let c = &self.scratch;
        // The date is in the request, and the day's key and scope follow
        // from it: the same request is the same signature.
        if *c == self.signed && !self.lines.is_empty() {
            self.credentials.token = token;
            return &self.lines;
        }
        let hashed = Sha256::digest(c.as_bytes());
        self.signed.clear();
        self.signed.push_str(c);

        let out = &mut self.lines;
        out.clear();
        // The extras first, as the request's own headers, then the x-amz-
        // ones the signature adds.
        let added = |name: &str| {
            matches!(
                name,
                "x-amz-content-sha256" | "x-amz-date" | "x-amz-security-token"
            )
        };
        let signers = headers.iter().copied().filter(|(name, _)| added(name));
        for (name, v) in extra.iter().copied().chain(signers) {
            for piece in [name, ": ", v, "\r\n"] {
                out.push_str(piece);
            }
        }
        let mut string_to_sign = std::mem::take(&mut self.scratch);
        let mut lines = std::mem::take(&mut self.lines);
        let names = self.signed[names].to_string();
        self.day_key(&date, at);
        let day = self.day.as_ref().expect("derived");
        string_to_sign.clear();
        for piece in ["AWS4-HMAC-SHA256\n", date.as_str(), "\n", &day.scope, "\n"] {
            string_to_sign.push_str(piece);
        }
        hex(&hashed, &mut string_to_sign);
        let signature = v4::calculate_signature(&day.key, string_to_sign.as_bytes());
        for piece in [
            "authorization: AWS4-HMAC-SHA256 Credential=",
            &self.credentials.access_key,
            "/",
            &day.scope,
            ", SignedHeaders=",
            &names,
            ", Signature=",
            &signature,
            "\r\n",
        ] {
            lines.push_str(piece);
        }
        self.scratch = string_to_sign;
        self.lines = lines;
        self.credentials.token = token;
        &self.lines
    }
}

/// `c` made the canonical request of `method path?query` with `headers`
/// (sorted by name); where in it the signed headers' names are.
fn canonical_request(
    c: &mut String,
    method: &str,
    path: &str,
    query: &str,
    headers: &[(&str, &str)],
) -> std::ops::Range<usize> {
    c.clear();
    // Pieces pushed one by one, not formatted: signing is most of a
    // request's CPU in user space.
    for piece in [method, "\n", path, "\n", query, "\n"] {
        c.push_str(piece);
    }
    for (name, v) in headers.iter() {
        for piece in [name, ":", v.trim(), "\n"] {
            c.push_str(piece);
        }
    }
    c.push('\n');
    let names_at = c.len();
    for (i, (name, _)) in headers.iter().enumerate() {
        if i > 0 {
            c.push(';');
        }
        c.push_str(name);
    }
    let names = names_at..c.len();
    c.push('\n');
    c.push_str(UNSIGNED_PAYLOAD);
    names
}

#[cfg(test)]
mod tests;
