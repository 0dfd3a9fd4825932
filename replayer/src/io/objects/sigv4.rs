//! AWS Signature Version 4 for the requests `direct` makes: the canonical
//! request, the string to sign and the `Authorization` header, with the
//! signing key derived once a day rather than once a request (four HMACs
//! saved on each). Payloads are not hashed (`UNSIGNED-PAYLOAD`), as
//! object_store's client does by default; the requests signed here carry
//! no body.

use std::time::{SystemTime, UNIX_EPOCH};

use ring::{digest, hmac};

/// What S3 calls its service in a credential scope.
const SERVICE: &str = "s3";
pub const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";

/// Static credentials and the region they sign for.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
    /// A session token (`AWS_SESSION_TOKEN`), sent as `x-amz-security-token`.
    pub token: Option<String>,
    pub region: String,
}

/// A request's time as SigV4 spells it: `20130524T000000Z`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmzDate([u8; 16]);

impl AmzDate {
    pub fn now() -> AmzDate {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        AmzDate::at(secs)
    }

    /// The UTC time `secs` seconds after the Unix epoch.
    pub fn at(secs: u64) -> AmzDate {
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

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("ASCII digits")
    }

    /// The day alone, `20130524`, which scopes the signing key.
    pub fn day(&self) -> &str {
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

/// Bytes that stay as they are in a SigV4 URI: letters, digits, `-._~`.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// `s` URI-encoded as SigV4 asks, `/` kept where `keep_slash` (a path).
pub fn uri_encode(out: &mut String, s: &str, keep_slash: bool) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in s.as_bytes() {
        if unreserved(b) || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 15) as usize] as char);
        }
    }
}

/// A query string in SigV4's canonical form (encoded, sorted by name):
/// the same string is sent, so what is signed is what the store reads.
pub fn canonical_query(params: &mut [(&str, &str)]) -> String {
    params.sort_unstable();
    let mut q = String::with_capacity(params.iter().map(|(k, v)| k.len() + v.len() + 8).sum());
    for (i, (k, v)) in params.iter().enumerate() {
        if i > 0 {
            q.push('&');
        }
        uri_encode(&mut q, k, false);
        q.push('=');
        uri_encode(&mut q, v, false);
    }
    q
}

fn hex(bytes: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
}

/// Signs requests with one set of credentials, keeping the day's key.
#[derive(Debug)]
pub struct Signer {
    credentials: Credentials,
    /// The day (`20130524`), its credential scope and its derived key.
    day: Option<(String, String, hmac::Key)>,
    /// The canonical request, then the string to sign.
    scratch: String,
    /// The signed request's headers, as written on the wire.
    headers: String,
    /// The canonical request `headers` signs. A storm asks the same thing
    /// many times a second (a listing of one prefix, a HEAD of one object),
    /// and a request the same to the second has the same signature: it is
    /// given again, not hashed and keyed anew.
    signed: String,
}

impl Signer {
    pub fn new(credentials: Credentials) -> Signer {
        Signer {
            credentials,
            day: None,
            scratch: String::with_capacity(512),
            headers: String::with_capacity(512),
            signed: String::with_capacity(512),
        }
    }

    /// The scope and key of `day`, derived when the day changes.
    fn day(&mut self, day: &str) -> &(String, String, hmac::Key) {
        if self.day.as_ref().is_none_or(|(d, _, _)| d != day) {
            let c = &self.credentials;
            let step = |key: &[u8], data: &str| {
                hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
            };
            let secret = format!("AWS4{}", c.secret_key);
            let k = step(secret.as_bytes(), day);
            let k = step(k.as_ref(), &c.region);
            let k = step(k.as_ref(), SERVICE);
            let k = step(k.as_ref(), "aws4_request");
            self.day = Some((
                day.to_string(),
                format!("{day}/{}/{SERVICE}/aws4_request", c.region),
                hmac::Key::new(hmac::HMAC_SHA256, k.as_ref()),
            ));
        }
        self.day.as_ref().expect("just set")
    }

    /// The header lines (each ending in CRLF) that sign `method
    /// path?query` to `host` at `date`, `extra` (lower-case names such as
    /// `range`) among them, signed too. `path` and `query` are as sent:
    /// already encoded.
    pub fn sign(
        &mut self,
        method: &str,
        host: &str,
        path: &str,
        query: &str,
        extra: &[(&'static str, &str)],
        date: AmzDate,
    ) -> &str {
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
        {
            headers[n] = h;
            n += 1;
        }
        let headers = &mut headers[..n];
        headers.sort_unstable_by_key(|(name, _)| *name);

        let c = &mut self.scratch;
        c.clear();
        // Pieces pushed one by one, not formatted: a request's signing is
        // the most of its CPU in user space, and `fmt` was half of that.
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
        let names_end = c.len();
        c.push('\n');
        c.push_str(UNSIGNED_PAYLOAD);
        // The date is in the request, and the day's key and scope follow
        // from it: the same request is the same signature.
        if *c == self.signed {
            self.credentials.token = token;
            return &self.headers;
        }
        let hashed = digest::digest(&digest::SHA256, c.as_bytes());
        self.signed.clear();
        self.signed.push_str(c);

        // The wire's headers first, while the signed names are at hand.
        let out = &mut self.headers;
        out.clear();
        for (name, v) in headers.iter().filter(|(name, _)| *name != "host") {
            for piece in [name, ": ", v, "\r\n"] {
                out.push_str(piece);
            }
        }
        out.push_str("authorization: AWS4-HMAC-SHA256 Credential=");
        out.push_str(&self.credentials.access_key);
        out.push('/');
        let scope_at = out.len();
        out.push_str(", SignedHeaders=");
        out.push_str(&c[names_at..names_end]);
        out.push_str(", Signature=");

        let mut string_to_sign = std::mem::take(&mut self.scratch);
        let mut headers_out = std::mem::take(&mut self.headers);
        let (_, scope, key) = self.day(date.day());
        headers_out.insert_str(scope_at, scope);
        string_to_sign.clear();
        for piece in ["AWS4-HMAC-SHA256\n", date.as_str(), "\n", scope, "\n"] {
            string_to_sign.push_str(piece);
        }
        hex(hashed.as_ref(), &mut string_to_sign);
        let signature = hmac::sign(key, string_to_sign.as_bytes());
        hex(signature.as_ref(), &mut headers_out);
        headers_out.push_str("\r\n");
        self.scratch = string_to_sign;
        self.headers = headers_out;
        self.credentials.token = token;
        &self.headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_in_sigv4s_form() {
        assert_eq!(AmzDate::at(0).as_str(), "19700101T000000Z");
        // 2013-05-24 00:00:00 UTC, and a leap day's last second.
        assert_eq!(AmzDate::at(1_369_353_600).as_str(), "20130524T000000Z");
        assert_eq!(AmzDate::at(951_868_799).as_str(), "20000229T235959Z");
        assert_eq!(AmzDate::at(1_795_000_000).as_str(), "20261118T110640Z");
    }

    #[test]
    fn encoding_keeps_unreserved_bytes_and_slashes_only_in_paths() {
        let mut s = String::new();
        uri_encode(&mut s, "a b/é~%", true);
        assert_eq!(s, "a%20b/%C3%A9~%25");
        let mut q = [("prefix", "a/b"), ("list-type", "2"), ("delimiter", "/")];
        assert_eq!(
            canonical_query(&mut q),
            "delimiter=%2F&list-type=2&prefix=a%2Fb"
        );
    }

    fn authorization(headers: &str) -> String {
        let line = headers
            .lines()
            .find(|l| l.starts_with("authorization: "))
            .expect("an authorization header");
        line["authorization: ".len()..].to_string()
    }

    fn example_signer() -> Signer {
        // The example credentials of S3's SigV4 documentation.
        Signer::new(Credentials {
            access_key: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_key: "wJalrXUtnFI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            token: None,
            region: "us-east-1".into(),
        })
    }

    /// The signature must not depend on the cached key: a second request
    /// on the same day, and one after a day change, sign as a fresh signer.
    #[test]
    fn the_days_key_is_derived_once_and_renewed_the_next_day() {
        let date = AmzDate::at(1_369_353_600);
        let next = AmzDate::at(1_369_353_600 + 86_400);
        let sign = |s: &mut Signer, d| authorization(s.sign("HEAD", "h:1", "/b/k", "", &[], d));
        let mut kept = example_signer();
        let first = sign(&mut kept, date);
        assert_eq!(sign(&mut kept, date), first);
        let renewed = sign(&mut kept, next);
        assert_ne!(renewed, first);
        assert_eq!(sign(&mut example_signer(), next), renewed);
        assert!(
            first.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
                 SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature="
            ),
            "{first}"
        );
    }

    /// A request asked again within its second is given its signature
    /// again; any change (its second, its query, its path, a header) signs
    /// it anew, as a fresh signer would.
    #[test]
    fn a_request_the_same_to_the_second_is_given_its_signature_again() {
        let at = AmzDate::at(1_369_353_600);
        let later = AmzDate::at(1_369_353_601);
        let mut kept = example_signer();
        let fresh = |q: &str, path: &str, extra: &[(&'static str, &str)], d| {
            example_signer()
                .sign("GET", "h:1", path, q, extra, d)
                .to_string()
        };
        type Ask<'a> = (&'a str, &'a str, &'a [(&'static str, &'a str)], AmzDate);
        let asks: [Ask; 6] = [
            ("list-type=2&prefix=d%2F", "/b", &[], at),
            ("list-type=2&prefix=d%2F", "/b", &[], at),
            ("list-type=2&prefix=d%2F", "/b", &[], later),
            ("list-type=2&prefix=e%2F", "/b", &[], later),
            ("", "/b/k", &[("range", "bytes=0-9")], later),
            ("", "/b/k", &[("range", "bytes=10-19")], later),
        ];
        let mut signed = Vec::new();
        for (q, path, extra, d) in asks {
            let headers = kept.sign("GET", "h:1", path, q, extra, d).to_string();
            assert_eq!(headers, fresh(q, path, extra, d), "{q} {path} {extra:?}");
            signed.push(headers);
        }
        assert_eq!(signed[0], signed[1]);
        for pair in signed[1..].windows(2) {
            assert_ne!(pair[0], pair[1]);
        }
    }

    /// Known answers, computed apart from this code with Python's `hmac`
    /// and `hashlib` from SigV4's steps: a ranged GET of a key with a space,
    /// and a listing's query.
    #[test]
    fn signatures_match_an_independent_computation() {
        let mut s = example_signer();
        let date = AmzDate::at(1_369_353_600);
        let mut path = String::from("/examplebucket/");
        uri_encode(&mut path, "test file.txt", true);
        let get = authorization(s.sign(
            "GET",
            "127.0.0.1:8000",
            &path,
            "",
            &[("range", "bytes=0-9")],
            date,
        ));
        assert!(get.ends_with(
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=953977269e64145609542d9f9cd35e5719ac0cfd503553c3abb2818e37603a27"
        ));
        let query = canonical_query(&mut [
            ("list-type", "2"),
            ("prefix", "a/b/"),
            ("delimiter", "/"),
            ("max-keys", "1"),
        ]);
        let list =
            authorization(s.sign("GET", "127.0.0.1:8000", "/examplebucket", &query, &[], date));
        assert!(list.ends_with(
            "Signature=fe4b2c78b1b742be5b037f60054b396ba53877fb636a98718f3dc929958786f2"
        ));
    }

    #[test]
    fn a_token_is_sent_and_signed() {
        let mut s = Signer::new(Credentials {
            token: Some("session".into()),
            ..example_signer().credentials
        });
        let h = s.sign(
            "GET",
            "h",
            "/b/k",
            "",
            &[("range", "bytes=0-9")],
            AmzDate::at(0),
        );
        let names: Vec<&str> = h.lines().map(|l| l.split(':').next().unwrap()).collect();
        assert_eq!(
            names,
            [
                "range",
                "x-amz-content-sha256",
                "x-amz-date",
                "x-amz-security-token",
                "authorization"
            ]
        );
        assert!(h.ends_with("\r\n"));
        assert!(h.contains("x-amz-security-token: session\r\n"));
        assert!(authorization(h).contains(
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date;x-amz-security-token,"
        ));
    }
}
