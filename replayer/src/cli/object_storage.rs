//! How the replay talks to a bucket (`--s3-*`): how reads become GETs,
//! when writes become multipart uploads, and how hard a request is retried;
//! checked into the [`ObjectTarget`] of an `s3://` `--target`.

use std::path::Path;

use clap::Args;

use crate::error::{ReplayError, ReplayResult};
use crate::io::objects::{self, ObjectTarget, ReadMode};

#[derive(Debug, Args)]
#[command(next_help_heading = "Object storage (s3:// targets)")]
pub struct ObjectStorageArgs {
    /// On s3:// targets, how reads become GETs: as-traced (a ranged GET per
    /// read), coalesce (one GET of --s3-coalesce bytes serves the reads
    /// inside it), whole (one GET of the object at its first read),
    /// parallel (the object from the read on in ranged GETs of
    /// --s3-part-size, --s3-concurrency in flight, as AWS CRT clients).
    #[arg(
        long,
        value_enum,
        default_value = "as-traced",
        hide_possible_values = true
    )]
    pub s3_read: ReadMode,
    /// Bytes one GET fetches with --s3-read coalesce.
    #[arg(long, value_name = "SIZE", default_value = "8MiB")]
    pub s3_coalesce: String,
    /// Objects written from this size on are sent as multipart uploads
    /// (default as the AWS CLI and boto3).
    #[arg(long, value_name = "SIZE", default_value = "8MiB")]
    pub s3_multipart_threshold: String,
    /// Part size of multipart uploads, at least 5MiB (default as the AWS CLI and boto3).
    #[arg(long, value_name = "SIZE", default_value = "8MiB")]
    pub s3_part_size: String,
    /// GETs in flight per rank with --s3-read parallel.
    #[arg(long, value_name = "N", default_value_t = objects::DEFAULT_CONCURRENCY)]
    pub s3_concurrency: u32,
    /// Retries of a request that met a 5xx, a 429 or a timeout; past them the rank fails.
    #[arg(long, value_name = "N", default_value_t = objects::DEFAULT_RETRIES)]
    pub s3_retries: u32,
}

impl ObjectStorageArgs {
    /// The bucket and prefix of `target`, an `s3://` URL, with these
    /// settings checked: sizes S3 takes, and at least one GET in flight.
    pub fn object_target(&self, target: &Path) -> ReplayResult<ObjectTarget> {
        let usage = ReplayError::Usage;
        let shown = target.display();
        let (bucket, prefix) = ObjectTarget::parse(&target.to_string_lossy())
            .expect("an s3:// URL")
            .map_err(|e| usage(format!("--target {shown}: {e}")))?;
        let size = |flag: &str, v: &str| {
            iorepro_format::units::parse_size(v).map_err(|e| usage(format!("{flag}: {e}")))
        };
        let part_size = size("--s3-part-size", &self.s3_part_size)?;
        if !(objects::MIN_PART_SIZE..=objects::MAX_PART_SIZE).contains(&part_size) {
            return Err(usage(format!(
                "--s3-part-size {}: S3 takes parts of 5MiB to 5GiB",
                self.s3_part_size
            )));
        }
        let multipart_threshold = size("--s3-multipart-threshold", &self.s3_multipart_threshold)?;
        if multipart_threshold > objects::MAX_PART_SIZE {
            return Err(usage(format!(
                "--s3-multipart-threshold {}: a single PUT takes at most 5GiB",
                self.s3_multipart_threshold
            )));
        }
        let coalesce = size("--s3-coalesce", &self.s3_coalesce)?.max(1);
        if self.s3_concurrency == 0 {
            return Err(usage("--s3-concurrency must be at least 1".into()));
        }
        Ok(ObjectTarget {
            bucket,
            prefix,
            read: self.s3_read,
            coalesce,
            multipart_threshold,
            part_size,
            concurrency: self.s3_concurrency,
            retries: self.s3_retries,
        })
    }
}
