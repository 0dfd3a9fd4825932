//! `--cgroup PATH`: a capture of whatever runs in a cgroup v2 (a Slurm job
//! or step, a Kubernetes pod), including processes that join it after the
//! capture began. Membership is checked in the kernel (the directory's
//! descriptor goes to the probes; see `probes`), so nothing here has to
//! watch the cgroup; this module finds and opens it, and lists the processes
//! already in it so their ranks and open files are known from the start.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{CollectError, CollectResult};

/// `CGROUP2_SUPER_MAGIC`.
const CGROUP2_MAGIC: u64 = 0x6367_7270;

pub struct Cgroup {
    pub path: PathBuf,
    /// The directory, open: what the kernel side checks tasks against.
    pub dir: File,
}

impl Cgroup {
    /// Opens a cgroup v2 directory: an absolute path on a cgroup2 file
    /// system, or a path relative to this machine's cgroup2 mount.
    pub fn open(path: &Path) -> CollectResult<Cgroup> {
        let full = if path.is_absolute() {
            path.to_path_buf()
        } else {
            cgroup2_mount()
                .ok_or_else(|| {
                    CollectError::Usage(format!(
                        "--cgroup {}: no cgroup v2 file system is mounted here; give an absolute path",
                        path.display()
                    ))
                })?
                .join(path)
        };
        let dir = File::open(&full).map_err(|e| CollectError::io(&full, e))?;
        if !is_cgroup2(&dir) {
            return Err(CollectError::Usage(format!(
                "--cgroup {}: not a cgroup v2 directory (cgroup v1 hierarchies cannot be followed)",
                full.display()
            )));
        }
        Ok(Cgroup { path: full, dir })
    }

    /// Processes in the cgroup and below, now.
    pub fn processes(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        let mut stack = vec![self.path.clone()];
        while let Some(dir) = stack.pop() {
            if let Ok(s) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                pids.extend(s.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            }
            if let Ok(rd) = std::fs::read_dir(&dir) {
                stack.extend(
                    rd.flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| e.path()),
                );
            }
        }
        pids
    }

    /// Whether the cgroup is still there (Slurm removes a job's at its end).
    pub fn exists(&self) -> bool {
        self.path.join("cgroup.procs").exists()
    }
}

fn is_cgroup2(dir: &File) -> bool {
    rustix::fs::fstatfs(dir).is_ok_and(|fs| fs.f_type as u64 == CGROUP2_MAGIC)
}

/// Where cgroup v2 is mounted: `/sys/fs/cgroup` on a unified system,
/// `/sys/fs/cgroup/unified` on a hybrid one; the first in mountinfo.
fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        // `id parent maj:min root mountpoint opts... - fstype source superopts`
        let (pre, post) = l.split_once(" - ")?;
        if post.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        pre.split_whitespace().nth(4).map(PathBuf::from)
    })
}
