//! Failures of the target stop the run with a message naming the cause,
//! the partial report, and a failing exit status: a full target (ENOSPC on
//! a small tmpfs), a read-only one, and a rank that never arrives. A call
//! that only meets another outcome than the traced one (a file the traced
//! job found that the target lacks) is counted and described, and the run
//! goes on.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command as Std;
use std::time::{Duration, Instant};

use common::*;
use iorepro_format::Op;

/// A small tmpfs, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let st = Std::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .ok()?;
        if !st.status.success() {
            eprintln!(
                "cannot mount a tmpfs here ({}); this test needs root",
                String::from_utf8_lossy(&st.stderr).trim()
            );
            return None;
        }
        Some(Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Std::new("umount").arg(&self.0).status();
    }
}

fn checkpoint_rows(mib: i64) -> Vec<Row<'static>> {
    let mut rows = vec![(
        0,
        Op::Open,
        "/ckpt/model.pt",
        5,
        None,
        0,
        Some(O_WRITE_CREATE),
    )];
    for i in 0..mib {
        rows.push((
            0,
            Op::Write,
            "/ckpt/model.pt",
            5,
            Some(i << 20),
            1 << 20,
            None,
        ));
    }
    rows.push((0, Op::Fsync, "/ckpt/model.pt", 5, None, 0, None));
    rows.push((0, Op::Close, "/ckpt/model.pt", 5, None, 0, None));
    rows
}

#[test]
fn enospc_stops_the_run_with_a_partial_report() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = write_rows(tmp.path(), &checkpoint_rows(8));
    let Some(fs) = Tmpfs::mount(&tmp.path().join("small"), "4m") else {
        return;
    };
    let out = replay_into(&trace, &fs.0, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("No space left on device") && err.contains("model.pt"),
        "{err}"
    );
    let r = json(&out);
    let written = r["write_bytes"].as_u64().unwrap();
    assert!(written > 0 && written < 8 << 20, "partial: {written}");
    assert!(r["errors"][0]
        .as_str()
        .unwrap()
        .contains("No space left on device"));
}

#[test]
fn read_only_target_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = write_rows(tmp.path(), &checkpoint_rows(1));
    let Some(fs) = Tmpfs::mount(&tmp.path().join("ro"), "4m") else {
        return;
    };
    let ok = Std::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&fs.0)
        .status()
        .unwrap();
    assert!(ok.success());
    let out = replay_into(&trace, &fs.0, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Read-only file system"), "{err}");
}

#[test]
fn a_missing_rank_times_out_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), TWO_RANKS);
    let start = Instant::now();
    let out = replay()
        .arg(&trace)
        .arg("--target")
        .arg(tmp.path().join("t"))
        .args(["--timeout", "1s", "--prepare", "skip"])
        .env("RANK", "0")
        .env("WORLD_SIZE", "3")
        .output()
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("timed out") && err.contains("ranks 1, 2"),
        "{err}"
    );
}

#[test]
fn a_call_that_fails_only_in_the_replay_is_counted_and_the_run_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    // A file some other process made before the job (a launcher's lock
    // file), opened for writing and read; then the job's own checkpoint.
    let mut rows: Vec<Row<'static>> = vec![
        (
            0,
            Op::Open,
            "/run/made-by-launcher.lock",
            4,
            None,
            0,
            Some(libc::O_RDWR),
        ),
        (
            0,
            Op::Read,
            "/run/made-by-launcher.lock",
            4,
            Some(0),
            4096,
            None,
        ),
        (0, Op::Close, "/run/made-by-launcher.lock", 4, None, 0, None),
    ];
    rows.extend(checkpoint_rows(2));
    let trace = write_rows(tmp.path(), &rows);
    // Prepare skipped: the target lacks what the traced job found.
    let out = replay_into(
        &trace,
        &tmp.path().join("t"),
        &["--json", "--prepare", "skip"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json(&out);
    assert!(r["errors"].as_array().unwrap().is_empty(), "{r}");
    // The open, and the read (which tries the open again), differ.
    assert_eq!(r["results_differed"], 2, "{r}");
    let said = r["result_differences"].to_string();
    assert!(
        said.contains("made-by-launcher.lock") && said.contains("No such file"),
        "{said}"
    );
    // The checkpoint after it was still written.
    assert_eq!(r["write_bytes"], 2 << 20, "{r}");
}
