//! An ext4 file system of a test's own on a loop device: its
//! `/sys/block/loopN/stat` counts every sector read from it and written to
//! it, whoever asked, so a test can hold what the trace or the replay says
//! the storage served against the block layer's own count. Needs root.

use std::path::{Path, PathBuf};
use std::process::Command;

/// An ext4 file system on a loop device, mounted at `dir`; unmounted,
/// detached and its image removed when dropped, however the test ended.
pub struct LoopMount {
    image: PathBuf,
    pub dir: PathBuf,
    /// `/dev/loopN`, once attached.
    device: Option<String>,
    mounted: bool,
}

/// Runs `cmd`, saying what failed where it does.
fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl LoopMount {
    /// One of `bytes` in `scratch`, or `None` having said (through
    /// [`crate::skip::cannot_run`]) why this machine cannot make one.
    pub fn for_test(scratch: &Path, bytes: u64) -> Option<LoopMount> {
        if !iorepro_format::host::is_root() {
            crate::skip::cannot_run("a loop device and a mount need root");
            return None;
        }
        LoopMount::make(scratch, bytes)
            .map_err(|why| crate::skip::cannot_run(format!("no ext4 loop mount here: {why}")))
            .ok()
    }

    /// Makes one of `bytes` in `scratch` (a sparse image: it takes on disk
    /// what is written); `Err` says why this machine cannot.
    pub fn make(scratch: &Path, bytes: u64) -> Result<LoopMount, String> {
        let mut m = LoopMount {
            image: scratch.join("ext4.img"),
            dir: scratch.join("mnt"),
            device: None,
            mounted: false,
        };
        std::fs::File::create(&m.image)
            .and_then(|f| f.set_len(bytes))
            .map_err(|e| format!("{}: {e}", m.image.display()))?;
        // Inode tables and journal made now: no lazy initialisation
        // writing behind the test's back.
        run(Command::new("mkfs.ext4")
            .args(["-q", "-E", "lazy_itable_init=0,lazy_journal_init=0"])
            .arg(&m.image))?;
        let device = run(Command::new("losetup").args(["-f", "--show"]).arg(&m.image))?;
        m.device = Some(device.clone());
        std::fs::create_dir_all(&m.dir).map_err(|e| e.to_string())?;
        run(Command::new("mount").arg(&device).arg(&m.dir))?;
        m.mounted = true;
        Ok(m)
    }

    /// The device's own count of bytes read and written so far: sectors
    /// of 512 bytes, the third and seventh fields of its `stat`.
    pub fn device_bytes(&self) -> (u64, u64) {
        let name = self.device.as_deref().unwrap().trim_start_matches("/dev/");
        let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
        let fields: Vec<u64> = stat
            .split_whitespace()
            .map(|f| f.parse().unwrap())
            .collect();
        (fields[2] * 512, fields[6] * 512)
    }

    /// Every dirty page written, and the pages of every file on this mount
    /// dropped from the page cache. Not the node's whole cache: the tools'
    /// own programs, their libraries and the traces would then be read
    /// again from the node's disk while they run, into counts that stand
    /// for a process's whole I/O.
    pub fn drop_own_pages(&self) {
        // SAFETY: sync has no preconditions.
        unsafe { libc::sync() };
        let mut dirs = vec![self.dir.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.is_file() {
                    let file = std::fs::File::open(&path).unwrap();
                    // SAFETY: the descriptor is this open file's.
                    let r = unsafe {
                        libc::posix_fadvise(
                            std::os::fd::AsRawFd::as_raw_fd(&file),
                            0,
                            0,
                            libc::POSIX_FADV_DONTNEED,
                        )
                    };
                    assert_eq!(r, 0, "{}: posix_fadvise", path.display());
                }
            }
        }
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        if self.mounted && run(Command::new("umount").arg(&self.dir)).is_err() {
            // Something still holds it (a process killed mid-way): detach
            // it now, it goes once released.
            let _ = run(Command::new("umount").arg("-l").arg(&self.dir));
        }
        if let Some(d) = &self.device {
            let _ = run(Command::new("losetup").arg("-d").arg(d));
        }
        let _ = std::fs::remove_file(&self.image);
    }
}
