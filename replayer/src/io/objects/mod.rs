//! Object-storage targets (`--target s3://BUCKET/PREFIX`): where a replayed
//! file lands as an object, how a loader reads it (`--s3-read`), and how its
//! writes become uploads (`--s3-multipart-threshold`, `--s3-part-size`).
//! The requests are made by the `iorepro_objects` client (`client` counts
//! them into the rank's figures, `requests`); `prepare` uploads the
//! objects the replay reads. What each traced call becomes is
//! [`crate::execute`]'s (its `objects` file).

mod client;
pub mod prepare;
mod requests;

use std::path::{Path, PathBuf};

pub use client::ObjectClient;
pub use iorepro_objects::{Part, RequestError, RequestKind, Settings};
pub use requests::RequestStats;

/// A bucket held for the replay: where it is and how it is used, and the
/// incompressible bytes every upload of the process slices.
#[derive(Debug)]
pub struct Bucket {
    pub target: ObjectTarget,
    /// Made at the first upload: a replay that only reads never fills it.
    data: std::sync::OnceLock<Vec<u8>>,
    /// The largest PUT of the trace's requests, sent as one PUT of its
    /// size (see `crate::plan::requests_as_calls`).
    largest_put: u64,
}

impl Bucket {
    pub fn new(target: ObjectTarget, largest_put: u64) -> Bucket {
        Bucket {
            target,
            data: std::sync::OnceLock::new(),
            largest_put,
        }
    }

    pub fn data(&self) -> &[u8] {
        self.data.get_or_init(|| {
            prepare::upload_data(self.target.largest_upload().max(self.largest_put))
        })
    }
}

/// `--s3-read`: how the replay's ranks read an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReadMode {
    /// One ranged GET per traced read, at its offset and size.
    AsTraced,
    /// A read the last GET of the file does not cover fetches
    /// `--s3-coalesce` bytes from its offset (or the read, if larger); the
    /// reads that follow inside it make no request, as a loader's
    /// read-ahead or `get_ranges` merging neighbouring reads.
    Coalesce,
    /// One GET of the whole object at the file's first read.
    Whole,
    /// A read the last GETs of the file do not cover fetches the object
    /// from its offset to its end in ranged GETs of `--s3-part-size`,
    /// `--s3-concurrency` in flight, as clients on the AWS Common Runtime
    /// download an object (the S3 connector for PyTorch, Mountpoint for
    /// Amazon S3); the reads inside make no request.
    Parallel,
}

impl ReadMode {
    pub fn name(self) -> &'static str {
        match self {
            ReadMode::AsTraced => "as-traced",
            ReadMode::Coalesce => "coalesce",
            ReadMode::Whole => "whole",
            ReadMode::Parallel => "parallel",
        }
    }
}

/// The AWS CLI's and boto3's defaults (TransferConfig): multipart from 8 MiB,
/// in 8 MiB parts.
pub const DEFAULT_MULTIPART_THRESHOLD: u64 = 8 << 20;
pub const DEFAULT_PART_SIZE: u64 = 8 << 20;
/// `get_ranges`' own merging distance in object_store is 1 MiB; a loader's
/// read-ahead block is commonly a few MiB. 8 MiB matches the part size.
pub const DEFAULT_COALESCE: u64 = 8 << 20;
/// GETs in flight per rank with `--s3-read parallel`: the S3 connector for
/// PyTorch and Mountpoint keep several 8 MiB parts of an object coming at
/// once; 8 keeps a rank's window at 64 MiB.
pub const DEFAULT_CONCURRENCY: u32 = 8;
/// S3's smallest part (every part but the last), and its largest part or
/// single PUT.
pub const MIN_PART_SIZE: u64 = 5 << 20;
pub const MAX_PART_SIZE: u64 = 5 << 30;
/// Retries of a request that failed with a 5xx, a 429 or a timeout.
pub const DEFAULT_RETRIES: u32 = 3;

/// An object-storage target: the bucket and the key prefix every replayed
/// path is placed under, and how the replay uses it.
#[derive(Debug, Clone)]
pub struct ObjectTarget {
    pub bucket: String,
    /// The key prefix, without a trailing `/` (empty for the bucket's root).
    pub prefix: String,
    pub read: ReadMode,
    pub coalesce: u64,
    pub multipart_threshold: u64,
    pub part_size: u64,
    /// GETs in flight per rank with `--s3-read parallel`.
    pub concurrency: u32,
    pub retries: u32,
}

impl ObjectTarget {
    /// `s3://BUCKET[/PREFIX]`; `None` if `url` is not an `s3://` URL.
    pub fn parse(url: &str) -> Option<Result<(String, String), String>> {
        let rest = url.strip_prefix("s3://")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let valid = (3..=63).contains(&bucket.len())
            && bucket
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'));
        if !valid {
            return Some(Err(format!(
                "`{bucket}` is not a bucket name (3 to 63 of a-z, 0-9, `-` and `.`)"
            )));
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == "." || p == "..") {
            return Some(Err(format!("the prefix `{prefix}` holds `.` or `..`")));
        }
        Some(Ok((bucket.to_string(), prefix.to_string())))
    }

    /// Parts of a multipart upload sent together: `--s3-concurrency` with
    /// `--s3-read parallel` (a CRT client's uploads), else one.
    pub fn upload_window(&self) -> u64 {
        match self.read {
            ReadMode::Parallel => self.concurrency.max(1) as u64,
            _ => 1,
        }
    }

    /// The key of a replayed path (relative to the target, as for a
    /// directory target): PREFIX/PATH.
    pub fn key(&self, rel: &Path) -> String {
        let rel = rel.to_string_lossy();
        let rel = rel.trim_start_matches('/');
        if self.prefix.is_empty() {
            rel.to_string()
        } else if rel.is_empty() {
            self.prefix.clone()
        } else {
            let mut key = String::with_capacity(self.prefix.len() + 1 + rel.len());
            key.push_str(&self.prefix);
            key.push('/');
            key.push_str(rel);
            key
        }
    }

    /// The URL the report and errors name for `rel`.
    pub fn display(&self, rel: &Path) -> String {
        format!("s3://{}/{}", self.bucket, self.key(rel))
    }

    pub fn url(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }

    /// The size a buffer of upload data needs: the largest single PUT or part.
    pub fn largest_upload(&self) -> u64 {
        self.multipart_threshold.max(self.part_size)
    }
}

/// The longest key S3 takes, in bytes of UTF-8.
pub const KEY_LIMIT: usize = 1024;

/// Refuses, before any request, a replay that would name an object by a
/// key longer than S3 takes: the store would refuse only the first request
/// on it, in the middle of the run, with other objects already written.
/// `rels` are the trace's paths, each with where it lands beneath the target.
pub fn check_key_lengths<'a>(
    target: &ObjectTarget,
    rels: impl IntoIterator<Item = (&'a str, PathBuf)>,
) -> Result<(), String> {
    for (trace_path, rel) in rels {
        let key = target.key(&rel);
        if key.len() > KEY_LIMIT {
            let settings = Settings::from_env();
            return Err(format!(
                "--target {} at {}: trace path {trace_path:?} would be the key `{key}`, \
                 {} bytes long; S3 takes keys of at most {KEY_LIMIT} bytes: shorten the \
                 target's prefix, or leave the path out (--exclude)",
                target.url(),
                settings.endpoint_name(),
                key.len(),
            ));
        }
    }
    Ok(())
}

/// What a store's refusal of the credentials means, by the error code in
/// its answer (the codes S3 and its peers give), for the user to act on.
fn refusal(why: &str, bucket: &str) -> Option<String> {
    let hint = if why.contains("RequestTimeTooSkewed") {
        "the store refused the request's time (RequestTimeTooSkewed): this machine's \
         clock is more than 15 minutes from the store's; set it right (chrony, ntpd)"
            .to_string()
    } else if why.contains("InvalidAccessKeyId") {
        "the store knows no such access key (InvalidAccessKeyId): check \
         AWS_ACCESS_KEY_ID or the profile's aws_access_key_id (AWS_PROFILE)"
            .to_string()
    } else if why.contains("SignatureDoesNotMatch") {
        "the request's signature was refused (SignatureDoesNotMatch): the secret key \
         does not belong to the access key; check AWS_SECRET_ACCESS_KEY or the \
         profile's aws_secret_access_key (AWS_PROFILE)"
            .to_string()
    } else if why.contains("AccessDenied") {
        format!(
            "the credentials may not list bucket `{bucket}` (AccessDenied): \
             it belongs to another user, or a policy refuses it"
        )
    } else if why.contains("status code: 403") || why.contains("status code: 401") {
        "the credentials were refused (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE)"
            .to_string()
    } else {
        return None;
    };
    Some(hint)
}

/// Checks, with one LIST of the prefix, that the bucket is there and the
/// credentials open it: what is wrong is said before any work.
pub fn check_reachable(target: &ObjectTarget) -> Result<(), String> {
    // No keys and no instance role: the client says so, naming the target.
    let mut client = ObjectClient::connect(target, Default::default())?;
    let settings = Settings::from_env();
    client.any_beneath(&target.prefix).map(drop).map_err(|e| {
        let why = e.to_string();
        let hint = if why.contains("invalid peer certificate") {
            "its TLS certificate is not one this machine trusts: set AWS_CA_BUNDLE to the \
             PEM file of the CA that signed it"
                .to_string()
        } else if why.contains("NoSuchBucket") || matches!(e, RequestError::Missing) {
            format!("bucket `{}` does not exist there", target.bucket)
        } else if let Some(hint) = refusal(&why, &target.bucket) {
            hint
        } else {
            "the endpoint did not answer as S3 (AWS_ENDPOINT_URL)".to_string()
        };
        format!(
            "--target {} at {}: {hint}: {why}",
            target.url(),
            settings.endpoint_name()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> ObjectTarget {
        let (bucket, prefix) = ObjectTarget::parse(url).unwrap().unwrap();
        ObjectTarget {
            bucket,
            prefix,
            read: ReadMode::AsTraced,
            coalesce: DEFAULT_COALESCE,
            multipart_threshold: DEFAULT_MULTIPART_THRESHOLD,
            part_size: DEFAULT_PART_SIZE,
            concurrency: DEFAULT_CONCURRENCY,
            retries: DEFAULT_RETRIES,
        }
    }

    #[test]
    fn keys_are_the_prefix_and_the_replayed_path() {
        let t = target("s3://bench/run1/");
        assert_eq!(
            t.key(Path::new("rank0/ckpt/model.pt")),
            "run1/rank0/ckpt/model.pt"
        );
        assert_eq!(t.display(Path::new("a")), "s3://bench/run1/a");
        let root = target("s3://bench");
        assert_eq!(root.key(Path::new("data/x")), "data/x");
    }

    #[test]
    fn keys_up_to_s3s_limit_pass_and_longer_ones_are_refused() {
        let t = target("s3://bench/run");
        // "run/" and the path: 1,024 bytes in all, then 1,025 (a two-byte
        // character at the end: the limit is in bytes, not characters).
        let fits = PathBuf::from("a".repeat(KEY_LIMIT - 4));
        assert!(check_key_lengths(&t, [("/fits", fits)]).is_ok());
        let over = PathBuf::from("a".repeat(KEY_LIMIT - 5) + "é");
        let err = check_key_lengths(&t, [("/over", over)]).unwrap_err();
        assert!(
            err.contains("\"/over\"") && err.contains("1025 bytes long"),
            "{err}"
        );
    }

    #[test]
    fn each_refusal_says_what_to_set_right() {
        let answer = |code: &str| {
            format!(
                "Error performing GET http://127.0.0.1:1/b?list-type=2 - Server returned \
                 non-2xx status code: 403 Forbidden: <Error><Code>{code}</Code></Error>"
            )
        };
        let hint = |code: &str| refusal(&answer(code), "b").unwrap();
        assert!(hint("RequestTimeTooSkewed").contains("clock"));
        assert!(hint("InvalidAccessKeyId").contains("AWS_ACCESS_KEY_ID"));
        assert!(hint("SignatureDoesNotMatch").contains("AWS_SECRET_ACCESS_KEY"));
        assert!(hint("AccessDenied").contains("bucket `b`"));
        assert!(hint("Other").contains("credentials were refused"));
        assert!(refusal("HTTP error: connection refused", "b").is_none());
    }

    #[test]
    fn bad_urls_are_refused_and_other_schemes_are_not_s3() {
        assert!(ObjectTarget::parse("/mnt/x").is_none());
        assert!(ObjectTarget::parse("gs://b/x").is_none());
        assert!(ObjectTarget::parse("s3://B_ad/x").unwrap().is_err());
        assert!(ObjectTarget::parse("s3://ok-bucket/a/../b")
            .unwrap()
            .is_err());
        assert!(ObjectTarget::parse("s3://").unwrap().is_err());
    }
}
