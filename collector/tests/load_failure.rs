//! A start that fails (a kernel that refuses the programs, forced here with
//! `IOREPRO_FORCE_LOAD_FAILURE`) leaves nothing that looks like a trace, says
//! so on stderr, and with `-- COMMAND` runs the job untraced by default
//! (`--on-load-failure run`), or not at all with `--on-load-failure fail`.

mod common;

use common::*;

const WHY: &str = "this kernel (test) refused the program `sys_exit`";

#[test]
fn the_job_runs_untraced_and_no_trace_is_left() {
    if !can_trace() {
        return;
    }
    let dir = scratch();
    let out = dir.path().join("trace");
    let marker = dir.path().join("ran");
    let o = collector()
        .env("IOREPRO_FORCE_LOAD_FAILURE", WHY)
        .arg("--out")
        .arg(&out)
        .args(["--", "sh", "-c"])
        .arg(format!("touch {}; exit 7", marker.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(7), "the job's status: {stderr}");
    assert!(marker.exists(), "the job ran");
    assert!(stderr.contains(WHY), "{stderr}");
    assert!(stderr.contains("running the job untraced"), "{stderr}");
    assert!(!out.exists(), "no trace directory is made");
}

#[test]
fn with_fail_the_job_does_not_run_and_no_trace_is_left() {
    if !can_trace() {
        return;
    }
    let dir = scratch();
    let out = dir.path().join("trace");
    let marker = dir.path().join("ran");
    let o = collector()
        .env("IOREPRO_FORCE_LOAD_FAILURE", WHY)
        .arg("--out")
        .arg(&out)
        .args(["--on-load-failure", "fail", "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(!marker.exists(), "the job did not run");
    assert!(stderr.contains(WHY), "{stderr}");
    assert!(
        stderr.contains("run it without iorepro-collect"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(!out.exists(), "no trace directory is made");
}

#[test]
fn a_pid_capture_that_cannot_start_leaves_nothing() {
    if !can_trace() {
        return;
    }
    let dir = scratch();
    // An existing, empty trace directory stays empty.
    let out = dir.path().join("trace");
    std::fs::create_dir(&out).unwrap();
    let o = collector()
        .env("IOREPRO_FORCE_LOAD_FAILURE", WHY)
        .arg("--out")
        .arg(&out)
        .args(["--pid", &std::process::id().to_string()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains(WHY));
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "no manifest, no .space-reserve"
    );
}
