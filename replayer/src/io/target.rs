//! The target, checked before the trace is read and opened before the
//! plan's work: a directory, made if missing and held open (every path of
//! the replay is resolved beneath it), or object storage, whose bucket is
//! checked with one request (a missing bucket or refused credentials stop
//! the run before any work) and for which a local scratch directory stands
//! in as what the ranks meet on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{ReplayError, ReplayResult};
use crate::io::confine::Confined;
use crate::io::objects::{self, ObjectTarget};

/// Said before the trace is read, which can take a while. `meets_on_target`:
/// launched processes would meet through files on the target (no MPI, no
/// `--rendezvous-dir`).
pub fn check(
    dir: &Path,
    objects: Option<&ObjectTarget>,
    meets_on_target: bool,
) -> ReplayResult<()> {
    if objects.is_some() {
        // A bucket cannot hold the rendezvous files.
        if meets_on_target {
            return Err(ReplayError::Usage(
                "an s3:// target under a launcher needs --rendezvous-dir (a directory every \
                 process sees) or a build with MPI, for the processes to meet"
                    .into(),
            ));
        }
        return Ok(());
    }
    if dir.exists() && !dir.is_dir() {
        return Err(ReplayError::Usage(format!(
            "--target {} is not a directory",
            dir.display()
        )));
    }
    Ok(())
}

/// The directory every rank's paths are resolved beneath, held open, and,
/// for an object-storage target, the scratch directory standing in for it
/// (to remove at the end).
pub fn open(
    dir: &Path,
    objects: Option<&ObjectTarget>,
) -> ReplayResult<(Arc<Confined>, Option<PathBuf>)> {
    let (root, scratch) = match objects {
        Some(target) => {
            objects::check_reachable(target).map_err(ReplayError::Usage)?;
            let scratch =
                std::env::temp_dir().join(format!("iorepro-replay-{}", std::process::id()));
            (scratch.clone(), Some(scratch))
        }
        None => (dir.to_path_buf(), None),
    };
    std::fs::create_dir_all(&root).map_err(|e| ReplayError::io("creating target", &root, e))?;
    let conf =
        Confined::open_root(&root).map_err(|e| ReplayError::io("opening target", &root, e))?;
    Ok((Arc::new(conf), scratch))
}
