//! How a replayed path is spelled as a key: as the Apache Arrow
//! `object_store` crate spells a path, so that objects written by other
//! tools built on it, and by earlier replays, are the same objects. Empty
//! parts are dropped, `.` and `..` parts are percent-encoded whole, and in
//! every part the characters S3's guidelines say to avoid in keys (and
//! `*`, `?`, control characters and bytes beyond ASCII) are
//! percent-encoded.

/// The bytes of a part that are percent-encoded besides control
/// characters and bytes beyond ASCII.
const AVOIDED: &[u8] = b"\\{^}%`]\">[~<#|*?";

/// Whether `key` is spelled as it is: parts of letters, digits and `-_.`,
/// none empty, `.` or `..`. Most keys a replay makes are such
/// (`data/rep-0000/...`), and spelling one costs more than the rest of a
/// request's path.
fn as_it_is(key: &str) -> bool {
    !key.is_empty()
        && key.split('/').all(|part| {
            !matches!(part, "" | "." | "..")
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
}

/// `key` as the store is asked for it.
pub fn spelled(key: &str) -> std::borrow::Cow<'_, str> {
    if as_it_is(key) {
        return key.into();
    }
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(key.len() + 8);
    for part in key.split('/').filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push('/');
        }
        match part {
            "." => out.push_str("%2E"),
            ".." => out.push_str("%2E%2E"),
            _ => {
                for &b in part.as_bytes() {
                    if !(0x20..0x7f).contains(&b) || AVOIDED.contains(&b) {
                        out.push('%');
                        out.push(HEX[(b >> 4) as usize] as char);
                        out.push(HEX[(b & 15) as usize] as char);
                    } else {
                        out.push(b as char);
                    }
                }
            }
        }
    }
    out.into()
}

/// Bytes that stay as they are in a URI: letters, digits, `-._~`.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The spellings object_store 0.14 gives these paths (`Path::from`),
    /// taken from it.
    #[test]
    fn keys_are_spelled_as_object_store_spells_them() {
        for (key, spelled_so) in [
            ("data/rep-0000/file_1.npz", "data/rep-0000/file_1.npz"),
            ("a b/c", "a b/c"),
            ("a//b/", "a/b"),
            ("/lead", "lead"),
            ("x/./y/../z", "x/%2E/y/%2E%2E/z"),
            (
                "w{e}i^r`d]\"s>[~<#|*?%",
                "w%7Be%7Di%5Er%60d%5D%22s%3E%5B%7E%3C%23%7C%2A%3F%25",
            ),
            ("tab\there\u{7f}", "tab%09here%7F"),
            ("é", "%C3%A9"),
            ("back\\slash", "back%5Cslash"),
            ("plus+eq=amp&", "plus+eq=amp&"),
        ] {
            assert_eq!(spelled(key), spelled_so, "{key:?}");
        }
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
}
