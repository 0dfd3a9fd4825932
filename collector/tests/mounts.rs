//! The mount table in the manifest: a job writes to a tmpfs mounted before
//! the capture, to one it mounts itself while captured, and to the disk;
//! each file is put on the right mount with the right file system type,
//! with findmnt(8) as the judge.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use iorepro_analysis::roles::FileRoles;
use iorepro_format::TraceReader;

/// A tmpfs mounted at a directory for the test's length, unmounted on drop
/// (also when an assertion fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, source: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=16m", source])
            .arg(dir)
            .status()
            .ok()?;
        st.success().then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// (mount point, fs type) of `path` by findmnt.
fn findmnt(path: &Path) -> (String, String) {
    let o = Command::new("findmnt")
        .args(["-n", "-o", "TARGET,FSTYPE", "-T"])
        .arg(path)
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&o.stdout);
    let mut it = s.split_whitespace();
    (it.next().unwrap().into(), it.next().unwrap().into())
}

#[test]
fn files_on_a_tmpfs_and_on_the_disk() {
    if !can_trace() || !have("findmnt") || !have("mount") {
        return;
    }
    let scratch = scratch();
    let early = scratch.path().join("early");
    let late = scratch.path().join("late");
    std::fs::create_dir_all(&late).unwrap();
    let Some(_early_mount) = Tmpfs::mount(&early, "iorepro-test-early") else {
        return iorepro_tests::skip::cannot_run("cannot mount a tmpfs here");
    };
    // Unmounted after the capture: the job mounts it, and it must still be
    // there when the capture ends and reads the table again.
    let _late_mount = Tmpfs(late.clone());
    let disk = scratch.path().join("disk.bin");
    let on_early = early.join("a.bin");
    let on_late = late.join("b.bin");
    let job = format!(
        "head -c 65536 /dev/zero > {a} && head -c 4096 /dev/zero > {d} \
         && mount -t tmpfs -o size=16m iorepro-test-late {l} \
         && head -c 8192 /dev/zero > {b} && cat {a} {d} {b} > /dev/null",
        a = on_early.display(),
        d = disk.display(),
        l = late.display(),
        b = on_late.display(),
    );
    let trace = scratch.path().join("trace");
    let prefix = scratch.path().to_str().unwrap();
    let o = collect(&trace, &["--path-prefix", prefix], &["sh", "-c", &job]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let reader = TraceReader::open(&trace).unwrap();
    let mounts = reader.manifest().mounts.clone().expect("a mount table");
    let early_m = mounts
        .iter()
        .find(|m| Path::new(&m.mount_point) == early)
        .expect("the tmpfs mounted before the capture");
    assert_eq!(early_m.fs_type, "tmpfs");
    assert_eq!(early_m.source, "iorepro-test-early");
    assert!(
        mounts.iter().any(|m| m.source == "iorepro-test-late"),
        "the tmpfs the job mounted: {mounts:?}"
    );

    let roles = FileRoles::compute(&reader).unwrap();
    for (file, fs) in [(&on_early, "tmpfs"), (&on_late, "tmpfs"), (&disk, "")] {
        let f = roles
            .get(file.to_str().unwrap())
            .unwrap_or_else(|| panic!("{} not in the trace", file.display()));
        let (mount_point, fs_type) = findmnt(file);
        assert_eq!(f.mount, mount_point, "{}", file.display());
        assert_eq!(f.fs_type, fs_type, "{}", file.display());
        if !fs.is_empty() {
            assert_eq!(f.fs_type, fs);
        } else {
            assert_ne!(f.fs_type, "tmpfs", "the disk file is not on a tmpfs");
        }
    }
    let per_mount = roles.per_mount();
    let early_t = per_mount
        .iter()
        .find(|m| Path::new(&m.mount_point) == early)
        .unwrap();
    assert_eq!(early_t.write_bytes, 65536);
    assert_eq!(early_t.read_bytes, 65536);
}
