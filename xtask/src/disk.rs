//! Whether the disks hold what a test run writes. A disk that fills during
//! the run fails tests in ways that do not say so (a store's monitor that
//! will not start, a capture cut short), so `test` says it first.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

const GB: u64 = 1_000_000_000;
/// What a cold `cargo xtask test` writes at its peak, measured on a fresh
/// clone (README): its builds under `target/`...
const BUILDS: u64 = 15 * GB;
/// ...and its tests' scratch under the temp dir while they run.
const TEST_SCRATCH: u64 = 5 * GB;

/// Bytes an unprivileged writer may still use on the file system of `path`.
fn available(path: &Path) -> std::io::Result<u64> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statvfs the call fills.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(s.f_bavail as u64 * s.f_frsize as u64)
}

/// The first existing folder at or above `path` (`target/` of a fresh
/// clone is not made yet).
fn existing(path: &Path) -> &Path {
    path.ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"))
}

/// A line for each disk with less free than the run writes there: the
/// builds' disk and the temp dir's, or both needs on one disk.
pub fn shortfalls(target: &Path, temp: &Path) -> Vec<String> {
    shortfalls_of(target, temp, BUILDS, TEST_SCRATCH)
}

fn shortfalls_of(target: &Path, temp: &Path, builds: u64, scratch: u64) -> Vec<String> {
    let (target, temp) = (existing(target), existing(temp));
    let device = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    let needs: Vec<(&Path, u64, &str)> = if device(target) == device(temp) {
        vec![(
            target,
            builds + scratch,
            "the builds and the tests' scratch",
        )]
    } else {
        vec![
            (target, builds, "the builds"),
            (temp, scratch, "the tests' scratch"),
        ]
    };
    needs
        .into_iter()
        .filter_map(|(path, need, what)| {
            let free = available(path).ok()?;
            (free < need).then(|| {
                format!(
                    "{:.1} GB free on the disk of {}, where a cold test run writes up to {:.0} GB \
                     ({what}); a disk that fills fails tests without saying why",
                    free as f64 / GB as f64,
                    path.display(),
                    need as f64 / GB as f64
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_free_space_is_the_file_system_s_and_a_missing_folder_is_its_parent_s() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("not/made/yet");
        assert_eq!(existing(&missing), dir.path());
        let free = available(existing(&missing)).unwrap();
        assert!(free > 0, "a writable temp dir has room");
        // Against what `df` says of the same file system, within what a
        // second writer on the machine could move between the two reads.
        let out = std::process::Command::new("df")
            .args(["-B1", "--output=avail"])
            .arg(dir.path())
            .output()
            .unwrap();
        let df: u64 = String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(free.abs_diff(df) < GB, "statvfs says {free}, df says {df}");
    }

    #[test]
    fn a_disk_short_of_the_run_s_need_is_named_once_and_one_with_room_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        // The same file system for both: one line, with both needs summed.
        let short = shortfalls_of(&target, dir.path(), u64::MAX / 4, u64::MAX / 4);
        assert_eq!(short.len(), 1, "{short:?}");
        assert!(
            short[0].contains(&dir.path().display().to_string())
                && short[0].contains("the builds and the tests' scratch"),
            "{}",
            short[0]
        );
        assert!(shortfalls_of(&target, dir.path(), 0, 0).is_empty());
    }
}
