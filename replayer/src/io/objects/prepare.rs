//! Puts an object-storage target in the state the traced job found, as
//! [`crate::io::prepare`] does a directory: the objects the replay reads,
//! uploaded at the size the trace reads of them with incompressible data
//! (kept when already there at least that large: one HEAD each); where the
//! trace creates a path anew, what an earlier replay left at its key (and
//! beneath it, for a directory) deleted. Directories need nothing: a
//! prefix exists when a key does. Only the keys of replayed paths are ever
//! deleted or written, so foreign objects under the prefix stay as they are.
//! Several threads upload at a time, each with its own client.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use super::requests::RequestStats;
use super::{Bucket, ObjectClient, ObjectTarget, RequestError};
use crate::error::{ReplayError, ReplayResult};
use crate::io::prepare::{run_tasks, Counters, PrepareStats, PrepareTask, Step, StepDoer};
use crate::plan::survey::{PathInfo, Survey};

/// Upload data: one incompressible buffer of `len` bytes, the largest
/// single request, which every upload of the process slices.
pub fn upload_data(len: u64) -> Vec<u8> {
    let mut buf = vec![0u8; len as usize];
    SmallRng::seed_from_u64(0x53).fill_bytes(&mut buf);
    buf
}

/// Uploads `size` bytes of `data` to `key`: one PUT below the multipart
/// threshold, else a multipart upload in parts of the part size.
pub fn upload(
    client: &mut ObjectClient,
    target: &ObjectTarget,
    key: &str,
    size: u64,
    data: &[u8],
) -> Result<(), RequestError> {
    if size < target.multipart_threshold {
        return client.put(key, &data[..size as usize]);
    }
    let id = client.create_multipart(key)?;
    let mut parts = Vec::new();
    let mut sent = 0u64;
    while sent < size {
        let n = (size - sent).min(target.part_size);
        parts.push(client.put_part(key, &id, parts.len(), &data[..n as usize])?);
        sent += n;
    }
    client.complete(key, &id, &parts)
}

/// Prepares tasks `i` with `i % share.1 == share.0` in `bucket`.
pub(crate) fn prepare(
    bucket: &Bucket,
    survey: &Survey,
    all: &[PrepareTask],
    share: (u32, u32),
    threads: usize,
    counters: &Counters,
) -> ReplayResult<PrepareStats> {
    // Every thread's client counts into one tally, for the report.
    let requests = Arc::new(Mutex::new(RequestStats::default()));
    let mut stats = run_tasks(survey, all, share, threads, counters, |_| {
        Ok(ObjectDoer {
            client: ObjectClient::connect(&bucket.target, requests.clone())
                .map_err(ReplayError::Usage)?,
            target: &bucket.target,
            data: bucket.data(),
        })
    })?;
    let requests = requests.lock().unwrap_or_else(|p| p.into_inner());
    stats.requests = requests
        .kinds
        .iter()
        .map(|(kind, s)| (kind.clone(), s.figures.count))
        .collect();
    Ok(stats)
}

struct ObjectDoer<'a> {
    client: ObjectClient,
    target: &'a ObjectTarget,
    data: &'a [u8],
}

impl ObjectDoer<'_> {
    fn failed(&self, what: &'static str, rel: &Path, e: RequestError) -> ReplayError {
        ReplayError::io(
            what,
            self.target.display(rel),
            std::io::Error::other(e.to_string()),
        )
    }
}

impl StepDoer for ObjectDoer<'_> {
    fn step(
        &mut self,
        step: Step,
        rel: &Path,
        info: &PathInfo,
        counters: &Counters,
    ) -> ReplayResult<()> {
        let key = self.target.key(rel);
        match step {
            Step::Clear => {
                let mut cleared = false;
                match self.client.head(&key) {
                    Ok(_) => {
                        self.client
                            .delete(&key)
                            .map_err(|e| self.failed("clearing", rel, e))?;
                        cleared = true;
                    }
                    Err(RequestError::Missing) => {}
                    Err(e) => return Err(self.failed("clearing", rel, e)),
                }
                if info.is_dir {
                    let beneath = self
                        .client
                        .keys_beneath(&key)
                        .map_err(|e| self.failed("clearing", rel, e))?;
                    for (k, _) in beneath {
                        self.client
                            .delete_listed(&k)
                            .map_err(|e| self.failed("clearing", rel, e))?;
                        cleared = true;
                    }
                }
                if cleared {
                    counters.cleared.fetch_add(1, Ordering::Relaxed);
                }
            }
            Step::Dir => {}
            Step::File => {
                let size = info.read_extent;
                let have = match self.client.head(&key) {
                    Ok(n) => Some(n),
                    Err(RequestError::Missing) => None,
                    Err(e) => return Err(self.failed("checking", rel, e)),
                };
                if have.is_some_and(|h| h >= size) {
                    counters.file_done(false, 0);
                } else {
                    upload(&mut self.client, self.target, &key, size, self.data)
                        .map_err(|e| self.failed("uploading", rel, e))?;
                    counters.file_done(true, size);
                }
            }
        }
        Ok(())
    }
}
