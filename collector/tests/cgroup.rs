//! `--cgroup`: everything that runs in a cgroup v2, including processes that
//! join it after the capture began (as a Slurm prolog attaches before the
//! job's tasks exist), and nothing else; the capture ends when the cgroup is
//! removed, and one that saw no process says so.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use iorepro_format::Op;

/// Where cgroup v2 is mounted, mounting it if it is not; None (and why) if
/// it cannot be here.
fn cgroup2_root() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for l in info.lines() {
        if let Some((pre, post)) = l.split_once(" - ") {
            if post.starts_with("cgroup2 ") {
                return pre.split_whitespace().nth(4).map(PathBuf::from);
            }
        }
    }
    let at = Path::new("/run/iorepro-test-cgroup2");
    std::fs::create_dir_all(at).ok()?;
    let ok = Command::new("mount")
        .args(["-t", "cgroup2", "none"])
        .arg(at)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        iorepro_tests::skip::cannot_run(
            "no cgroup v2 mount, and mounting one failed (cgroup v1 only?)",
        );
        return None;
    }
    Some(at.to_path_buf())
}

/// A fresh cgroup under the v2 root, removed on drop.
struct TestCgroup(PathBuf);

impl TestCgroup {
    fn new(name: &str) -> Option<TestCgroup> {
        let root = cgroup2_root()?;
        let dir = root.join(format!("iorepro-test-{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        Some(TestCgroup(dir))
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn wait_for_manifest(trace: &Path) {
    let t = Instant::now();
    while !trace.join("manifest.json").exists() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "capture did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The manifest comes first; the probes attach right after.
    std::thread::sleep(Duration::from_millis(700));
}

#[test]
fn processes_that_join_the_cgroup_later_are_captured_and_no_others() {
    if !can_trace() {
        return;
    }
    let Some(cg) = TestCgroup::new("join") else {
        return;
    };
    let dir = scratch();
    let inside = dir.path().join("inside.dat");
    let outside = dir.path().join("outside.dat");
    write_file(&inside, 1 << 20);
    write_file(&outside, 1 << 20);
    let trace = dir.path().join("trace");
    let capture = collector()
        .arg("--out")
        .arg(&trace)
        .arg("--cgroup")
        .arg(&cg.0)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_manifest(&trace);
    // Joins after the capture began, then reads (in a child, which inherits
    // the cgroup and the rank); with the rank a Slurm task has.
    let joined = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && cat {} > /dev/null && sleep 0.3",
            cg.0.display(),
            inside.display()
        ))
        .env("SLURM_PROCID", "3")
        .status()
        .unwrap();
    assert!(joined.success());
    // Never in the cgroup.
    Command::new("cat")
        .arg(&outside)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    // Removing the cgroup (as Slurm does at the job's end) ends the capture.
    let t = Instant::now();
    std::fs::remove_dir(&cg.0).unwrap();
    let out = capture.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let (manifest, rows) = read_rows(&trace);
    assert!(manifest.complete);
    let reads = |f: &Path| -> Vec<&Row> {
        rows_for(&rows, f)
            .into_iter()
            .filter(|r| r.op == Op::Read)
            .collect()
    };
    let inside_reads = reads(&inside);
    assert_eq!(
        inside_reads.iter().map(|r| r.moved()).sum::<u64>(),
        1 << 20,
        "every byte the joined process read"
    );
    assert!(inside_reads.iter().all(|r| r.rank == Some(3)));
    assert!(reads(&outside).is_empty(), "a process outside the cgroup");
    assert!(manifest.extra.get("no_process_seen").is_none());
}

#[test]
fn a_cgroup_capture_that_saw_no_process_says_so() {
    if !can_trace() {
        return;
    }
    let Some(cg) = TestCgroup::new("empty") else {
        return;
    };
    let dir = scratch();
    let trace = dir.path().join("trace");
    let o = collect(
        &trace,
        &["--cgroup", cg.0.to_str().unwrap(), "--duration", "1s"],
        &[],
    );
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no process of the cgroup"), "{err}");
    let (manifest, rows) = read_rows(&trace);
    assert!(rows.is_empty());
    assert!(manifest.extra.get("no_process_seen").is_some());
}
