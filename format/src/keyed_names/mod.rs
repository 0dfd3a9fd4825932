//! Names made safe to hand to another team: every path component, host name
//! and thread name replaced by a keyed hash (HMAC-SHA256 under the owner's
//! key, which is never stored), so the same name gives the same hash across
//! ranks, nodes, segments and traces anonymized with the same key, and
//! nothing else can be learnt from it without the key.
//!
//! What the analysis and the replay need of a name stays in it:
//! - the directory structure and depth (each component hashed on its own;
//!   `.`, `..` and empty components as they are), so parents, prefixes and
//!   mount points still match;
//! - the extension, when it is a known file format ([`EXTENSIONS`]);
//! - the numbers inside a name below 100,000 (a shard's rank, a step, an
//!   epoch: `__3_0.distcp` becomes `kfpa…_3_0.distcp`), where the checkpoint
//!   families of the scaling model are found, and the word `rank` before
//!   such a number. A hash is written in the letters `a` to `p` alone, so
//!   its digits are the name's and no `rank` appears by chance. A name that
//!   is a number alone (a pid, a uid, a year) and larger numbers (job ids,
//!   dates as one number) are hashed into digits of their own, at least
//!   100,000, so they never pass for a rank;
//! - `/proc`, `/sys`, `/dev` and `/dev/shm` (what they hold is hashed), the
//!   kernel's names of what is no file (`pipe:[12]`), and the `<...>` form
//!   of a made-up name, so a path's kind ([`crate::mounts`], the analysis's
//!   forms) is what it was.
//!
//! What the name's words said about the file (code, a log, a launcher's
//! file...) is recorded beside it, in `path_traits` (see
//! [`crate::schema::COL_PATH_TRAITS`]), by whoever hashes it.
//! [`manifest`] makes the manifest of an anonymized trace.

pub mod manifest;

use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::{TraceError, TraceResult};
use crate::mounts::Mount;

/// The scheme, as the manifest names it: change it when any hash changes.
pub const SCHEME: &str = "hmac-sha256-components-v1";

/// The shortest key accepted: a key that can be guessed opens every name.
pub const MIN_KEY_BYTES: usize = 16;

/// Extensions kept as they are (compared without case): the formats of
/// data, checkpoints, code, logs and records, which say what a file is and
/// not whose it is. Any other extension is hashed with the name.
#[rustfmt::skip]
pub const EXTENSIONS: &[&str] = &[
    // Checkpoints and model weights.
    "pt", "pth", "ckpt", "safetensors", "distcp", "bin", "pkl", "pickle", "h5", "hdf5", "onnx",
    "msgpack", "gguf", "ggml", "index", "metadata",
    // Data.
    "npz", "npy", "tar", "tfrecord", "tfrecords", "record", "parquet", "arrow", "feather", "csv",
    "tsv", "json", "jsonl", "yaml", "yml", "toml", "txt", "xml", "idx", "mds", "lmdb", "mdb", "db",
    "sqlite", "zarr", "nc", "rec", "lst", "dat", "raw", "jpg", "jpeg", "png", "gif", "bmp", "tif",
    "tiff", "webp", "wav", "flac", "mp3", "mp4", "avi", "mkv", "webm", "ogg", "zip", "gz", "bz2",
    "xz", "zst", "lz4", "7z",
    // Code, libraries and environments.
    "py", "pyc", "pyi", "pyx", "pxd", "so", "c", "cc", "cpp", "h", "hpp", "cu", "cuh", "sh",
    "ipynb", "cfg", "ini", "conf", "lock", "egg-link", "dist-info", "egg-info", "whl",
    "typed",
    // Logs and leftovers.
    "log", "out", "err", "tmp", "bak", "pid", "sock",
];

/// Top-level directories kept, with what lies beneath hashed: the kernel's
/// own files and devices, as the analysis and the replay tell them apart.
const KEPT_ROOTS: [&str; 3] = ["proc", "sys", "dev"];

/// Letters a hash is written in: 16 of them, 4 bits each; no digits (a
/// digit in a hashed name is the name's own) and no `r` (no `rank`).
const LETTERS: &[u8; 16] = b"abcdefghijklmnop";
/// Letters per hashed component or host: 64 bits.
const NAME_LETTERS: usize = 16;
/// Digits of a hashed number (the first never 0).
const NUMBER_DIGITS: usize = 12;
/// Numbers inside a name below this are kept (ranks, steps, epochs).
const KEPT_BELOW: u64 = 100_000;

/// What a hash is of, so that equal text in two places (a host named as a
/// directory) hashes differently.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Domain {
    Name = b'n',
    Number = b'#',
    Host = b'h',
    Thread = b't',
    Word = b'w',
}

/// The owner's key, read from a file; never printed, never stored.
pub struct Key(Vec<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// The key in `path`: its bytes as they are. A missing, empty or short
    /// file is an error naming it.
    pub fn load(path: &Path) -> TraceResult<Key> {
        let bytes = std::fs::read(path).map_err(|e| TraceError::BadKey {
            path: path.to_path_buf(),
            problem: e.to_string(),
        })?;
        let bad = |problem: String| TraceError::BadKey {
            path: path.to_path_buf(),
            problem,
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(bad(format!(
                "the key file is empty; make one with `head -c 32 /dev/urandom > {}`",
                path.display()
            )));
        }
        if bytes.len() < MIN_KEY_BYTES {
            return Err(bad(format!(
                "the key holds {} bytes, fewer than {MIN_KEY_BYTES}; make one with `head -c 32 /dev/urandom > {}`",
                bytes.len(),
                path.display()
            )));
        }
        Ok(Key(bytes))
    }

    /// A key from bytes (tests, and callers that hold it already).
    pub fn from_bytes(bytes: &[u8]) -> Key {
        Key(bytes.to_vec())
    }
}

/// Hashes names under one key. Cheap to clone (the keyed state is copied,
/// the key itself is not kept).
#[derive(Clone)]
pub struct Anonymizer {
    mac: Hmac<Sha256>,
}

impl std::fmt::Debug for Anonymizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Anonymizer(..)")
    }
}

impl Anonymizer {
    pub fn new(key: &Key) -> Anonymizer {
        Anonymizer {
            mac: Hmac::<Sha256>::new_from_slice(&key.0).expect("HMAC takes a key of any length"),
        }
    }

    fn digest(&self, domain: Domain, text: &str) -> [u8; 32] {
        let mut m = self.mac.clone();
        m.update(&[domain as u8]);
        m.update(text.as_bytes());
        m.finalize().into_bytes().into()
    }

    fn letters(&self, domain: Domain, text: &str) -> String {
        let d = self.digest(domain, text);
        d.iter()
            .flat_map(|b| [b >> 4, b & 15])
            .take(NAME_LETTERS)
            .map(|n| LETTERS[n as usize] as char)
            .collect()
    }

    fn number(&self, digits: &str) -> String {
        let d = self.digest(Domain::Number, digits);
        d.iter()
            .take(NUMBER_DIGITS)
            .enumerate()
            .map(|(i, b)| {
                let n = if i == 0 { 1 + b % 9 } else { b % 10 };
                (b'0' + n) as char
            })
            .collect()
    }

    /// A path, component by component (see the module's rules).
    pub fn path(&self, p: &str) -> String {
        if p.is_empty() {
            return String::new();
        }
        if crate::paths::is_url(p) {
            return self.url(p);
        }
        if !p.starts_with('/') {
            // The kernel's names of pipes, sockets and anonymous inodes.
            if p.contains(":[") || p.starts_with("anon_inode:") {
                return p.to_string();
            }
            if let Some(name) = p.strip_prefix("memfd:") {
                return format!("memfd:{}", self.letters(Domain::Name, name));
            }
        } else if let Some(name) = p.strip_prefix("/memfd:") {
            return format!("/memfd:{}", self.letters(Domain::Name, name));
        }
        let comps: Vec<&str> = p.split('/').collect();
        let mut out = String::with_capacity(p.len() + 16);
        for (i, c) in comps.iter().enumerate() {
            if i > 0 {
                out.push('/');
            }
            let kept = p.starts_with('/')
                && (i == 1 && KEPT_ROOTS.contains(c) || i == 2 && comps[1] == "dev" && *c == "shm");
            if kept {
                out.push_str(c);
            } else {
                out.push_str(&self.component(c));
            }
        }
        out
    }

    /// One component of a path (see the module's rules).
    /// An object-storage request's URL: its scheme and the query's
    /// parameter names kept (they say what the request did), its host,
    /// bucket, key and the query's values hashed as names.
    fn url(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (rest, None),
        };
        let mut out = format!("{scheme}://");
        for (i, c) in path.split('/').enumerate() {
            if i > 0 {
                out.push('/');
            }
            out.push_str(&self.component(c));
        }
        if let Some(query) = query {
            out.push('?');
            for (i, param) in query.split('&').enumerate() {
                if i > 0 {
                    out.push('&');
                }
                match param.split_once('=') {
                    Some((name, value)) => {
                        out.push_str(name);
                        out.push('=');
                        out.push_str(&self.component(value));
                    }
                    None => out.push_str(param),
                }
            }
        }
        out
    }

    pub fn component(&self, c: &str) -> String {
        if matches!(c, "" | "." | "..") {
            return c.to_string();
        }
        if c.len() >= 2 && c.starts_with('<') && c.ends_with('>') {
            return format!("<{}>", self.letters(Domain::Name, c));
        }
        let (hidden, rest) = match c.strip_prefix('.') {
            Some(r) if !r.is_empty() => (".", r),
            _ => ("", c),
        };
        let (base, ext) = split_extension(rest);
        // A name that is a number alone keeps none of it.
        let has_text = c.bytes().any(|b| !b.is_ascii_digit());
        let mut skeleton = String::with_capacity(base.len() + 1);
        skeleton.push_str(hidden);
        let mut numbers: Vec<(bool, &str)> = Vec::new();
        for (text, digits) in runs(base) {
            skeleton.push_str(text);
            if let Some(d) = digits {
                skeleton.push('#');
                numbers.push((before_rank(&skeleton), d));
            }
        }
        let mut out = String::with_capacity(c.len() + NAME_LETTERS);
        out.push_str(hidden);
        out.push_str(&self.letters(Domain::Name, &skeleton));
        for (rank, d) in numbers {
            out.push_str(if rank { "rank" } else { "_" });
            let small = d.len() <= 19 && d.parse::<u64>().is_ok_and(|v| v < KEPT_BELOW);
            if has_text && small {
                out.push_str(d);
            } else {
                out.push_str(&self.number(d));
            }
        }
        out.push_str(ext);
        out
    }

    /// A host name (the `host` column, `host=NAME/` partitions, `hosts`).
    pub fn host(&self, h: &str) -> String {
        self.letters(Domain::Host, h)
    }

    /// A thread's name (`comm`): the main thread's is the program's file
    /// name, which may name the project; hashed, threads stay told apart.
    pub fn thread(&self, comm: &str) -> String {
        self.letters(Domain::Thread, comm)
    }

    /// A free-standing word (a mount's source).
    pub fn word(&self, w: &str) -> String {
        self.letters(Domain::Word, w)
    }

    /// A mount: its point hashed as a path (so the paths beneath still
    /// match it), its file system type kept, its source (a device, a
    /// server's export) hashed unless it merely repeats the type.
    pub fn mount(&self, m: &Mount) -> Mount {
        let plain = m.source == m.fs_type || m.source == "none";
        Mount {
            mount_point: self.path(&m.mount_point),
            fs_type: m.fs_type.clone(),
            source: if plain {
                m.source.clone()
            } else if m.source.starts_with('/') {
                self.path(&m.source)
            } else {
                self.word(&m.source)
            },
        }
    }
}

/// `rest` as (name, extensions): up to two known extensions from the end,
/// as long as a name is left before them.
fn split_extension(rest: &str) -> (&str, &str) {
    let mut base_end = rest.len();
    for _ in 0..2 {
        let Some(dot) = rest[..base_end].rfind('.') else {
            break;
        };
        let ext = &rest[dot + 1..base_end];
        if dot == 0 || !EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(ext)) {
            break;
        }
        base_end = dot;
    }
    (&rest[..base_end], &rest[base_end..])
}

/// `s` as runs of text each followed by a run of digits (the last maybe by none).
fn runs(s: &str) -> impl Iterator<Item = (&str, Option<&str>)> {
    let b = s.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        if i >= b.len() {
            return None;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_digit() {
            i += 1;
        }
        let text = &s[start..i];
        if i == b.len() {
            return Some((text, None));
        }
        let d = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        Some((text, Some(&s[d..i])))
    })
}

/// Whether the number just added to `skeleton` follows the word `rank`
/// (separators `-` and `_` aside), as a shard's name says its rank.
fn before_rank(skeleton: &str) -> bool {
    let text = skeleton
        .strip_suffix('#')
        .unwrap_or(skeleton)
        .trim_end_matches(['-', '_']);
    let b = text.as_bytes();
    b.len() >= 4 && b[b.len() - 4..].eq_ignore_ascii_case(b"rank")
}

#[cfg(test)]
mod tests;
