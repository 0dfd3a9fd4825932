//! The target, the one place that knows its two kinds: a directory (made
//! if missing and held open; every path of the replay is resolved beneath
//! it) or object storage (a bucket and prefix over the S3 API, checked with
//! one request, so a missing bucket or refused credentials stop the run
//! before any work). [`Target`] is what `--target` names, checked before
//! the trace is read; [`Opened`] is the target held for the replay, which
//! `prepare`, `execute`, `ranks` and `report` take and match on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{ReplayError, ReplayResult};
use crate::io::confine::Confined;
use crate::io::objects::{self, Bucket, ObjectTarget};
use crate::io::paths::{resolve, Place};
use crate::io::prepare::{self, Counters, PrepareStats, PrepareTask};
use crate::plan::rank_map::RankMap;
use crate::plan::survey::Survey;

/// Why launched processes cannot meet on a bucket by default.
pub const NO_MEETING_ON_A_BUCKET: &str =
    "an s3:// target under a launcher needs --rendezvous-dir (a directory every process \
     sees) or a build with MPI, for the processes to meet";

/// What `--target` names.
#[derive(Debug, Clone)]
pub enum Target {
    /// A directory on the storage under test.
    Dir(PathBuf),
    /// `s3://BUCKET/PREFIX`.
    Bucket(ObjectTarget),
}

/// The target held for the replay.
#[derive(Debug, Clone)]
pub enum Opened {
    Dir(Arc<Confined>),
    Bucket(Arc<Bucket>),
}

impl Target {
    /// Checks what can be checked before the trace is read, which can take
    /// a while. `meets_on_target`: launched processes would meet through
    /// files on the target (no MPI, no `--rendezvous-dir`).
    pub fn check(&self, meets_on_target: bool) -> ReplayResult<()> {
        match self {
            Target::Bucket(_) if meets_on_target => {
                Err(ReplayError::Usage(NO_MEETING_ON_A_BUCKET.into()))
            }
            Target::Bucket(_) => Ok(()),
            Target::Dir(dir) if dir.exists() && !dir.is_dir() => Err(ReplayError::Usage(format!(
                "--target {} is not a directory",
                dir.display()
            ))),
            Target::Dir(_) => Ok(()),
        }
    }

    /// Checks, once the plan is made and before any request, that every
    /// path the replay keeps can be named on the target: a bucket refuses
    /// keys over S3's length. Paths land at the same length for every rank
    /// (rank and replica numbers are zero-padded), so rank 0's places
    /// stand for all.
    pub fn check_names(&self, survey: &Survey, map: &RankMap) -> ReplayResult<()> {
        let Target::Bucket(target) = self else {
            return Ok(());
        };
        let kept = survey
            .paths
            .iter()
            .filter(|info| info.skip.is_none() || info.keeps);
        let rels = kept.filter_map(|info| {
            let rel = resolve(&info.path, Place::of_call(info, 0, map))?;
            Some((&*info.path, rel))
        });
        objects::check_key_lengths(target, rels).map_err(ReplayError::Usage)
    }

    /// The directory made and held open, or the bucket reached (its
    /// upload buffer as large as `largest_put`, the trace's largest PUT).
    pub fn open(&self, largest_put: u64) -> ReplayResult<Opened> {
        match self {
            Target::Dir(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| ReplayError::io("creating target", dir, e))?;
                let conf = Confined::open_root(dir)
                    .map_err(|e| ReplayError::io("opening target", dir, e))?;
                Ok(Opened::Dir(Arc::new(conf)))
            }
            Target::Bucket(target) => {
                objects::check_reachable(target).map_err(ReplayError::Usage)?;
                Ok(Opened::Bucket(Arc::new(Bucket::new(
                    target.clone(),
                    largest_put,
                ))))
            }
        }
    }

    /// The target as the user wrote it.
    pub fn display(&self) -> String {
        match self {
            Target::Dir(dir) => dir.display().to_string(),
            Target::Bucket(t) => t.url(),
        }
    }
}

impl Opened {
    /// The directory held open, for what needs one (the files rendezvous
    /// on the target); `None` for a bucket.
    pub fn dir(&self) -> Option<&Arc<Confined>> {
        match self {
            Opened::Dir(conf) => Some(conf),
            Opened::Bucket(_) => None,
        }
    }

    /// How reports and errors name the copy of a path at `rel`.
    pub fn display(&self, rel: &Path) -> PathBuf {
        match self {
            Opened::Dir(conf) => conf.display(rel),
            Opened::Bucket(b) => PathBuf::from(b.target.display(rel)),
        }
    }

    /// Puts the target in the state the traced job found: tasks `i` with
    /// `i % share.1 == share.0`, `threads` at a time, counted in `counters`.
    pub fn prepare(
        &self,
        survey: &Survey,
        tasks: &[PrepareTask],
        share: (u32, u32),
        threads: usize,
        counters: &Counters,
    ) -> ReplayResult<PrepareStats> {
        match self {
            Opened::Dir(conf) => prepare::prepare(conf, survey, tasks, share, threads, counters),
            Opened::Bucket(b) => {
                objects::prepare::prepare(b, survey, tasks, share, threads, counters)
            }
        }
    }

    /// Why the target is gone, if it vanished under the replay (a directory
    /// unmounted or removed; a bucket's failures are its requests' own).
    pub fn vanished(&self, calls_failed: bool) -> Option<String> {
        match self {
            Opened::Dir(conf) => conf.vanished_settled(calls_failed),
            Opened::Bucket(_) => None,
        }
    }
}
