//! Time at N: a trace of the DLIO-like benchmark at 2 processes, replayed
//! at 4 ranks with `--timing original`, against the benchmark run at 4
//! processes on the same storage, as it is and with reads throttled below
//! what 4 processes ask for (`tests/jobs/time_fidelity.py` runs both sides
//! and the plan's prediction; `cargo xtask bench --only time-fidelity`
//! prints the same figures). The replay must take the job at 4's time, not
//! the job at 2's, and answer "stalled" where the job at 4 stalls.
//!
//! The bounds here are looser than the figures the bench gives on a quiet
//! machine (span within 1-3 %, epochs within 2-9 %): CI runs other test
//! binaries' builds and this one's sleeps beside them.

use std::process::Command;

use iorepro_tests::bins::{bin, scratch, workspace_root};
use iorepro_tests::skip::cannot_run;
use serde_json::Value;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn list(v: &Value) -> Vec<f64> {
    v.as_array()
        .map_or(Vec::new(), |a| a.iter().map(f).collect())
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

#[test]
fn a_replay_at_twice_the_ranks_takes_the_jobs_time_there_fast_and_throttled() {
    let out = Command::new("python3")
        .arg(workspace_root().join("tests/jobs/time_fidelity.py"))
        .arg("--collect")
        .arg(bin("iorepro-collect"))
        .arg("--replay")
        .arg(bin("iorepro-replay"))
        .arg("--scratch")
        .arg(scratch("time-fidelity"))
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(3) {
        return cannot_run(stderr.trim());
    }
    assert!(out.status.success(), "time_fidelity.py failed:\n{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    eprintln!("{r:#}");
    for storage in ["same_scale", "fast", "throttled"] {
        let s = &r[storage];
        let e = &s["errors"];
        assert!(
            s["replay"]["errors"]
                .as_array()
                .is_some_and(|a| a.is_empty()),
            "{storage}: {}",
            s["replay"]["errors"]
        );
        assert!(
            f(&e["span"]).abs() <= 0.10,
            "{storage}: span error {}",
            e["span"]
        );
        // The first epoch holds the start-up the job's own clock leaves out.
        for (i, err) in list(&e["epochs"]).iter().enumerate().skip(1) {
            assert!(err.abs() <= 0.12, "{storage}: epoch {} error {err}", i + 1);
        }
        for (i, pts) in list(&e["au_points"]).iter().enumerate() {
            assert!(
                pts.abs() <= 10.0,
                "{storage}: epoch {} AU off by {pts} points",
                i + 1
            );
        }
    }
    // The answer a user came for: fed on the storage as it is, stalled on
    // the throttled one, as the job at 4 was.
    let au = |storage: &str, side: &str| mean(&list(&r[storage][side]["au_percent"]));
    assert!(
        au("fast", "job") >= 85.0 && au("fast", "replay") >= 85.0,
        "{r}"
    );
    assert!(
        au("throttled", "job") < 80.0 && au("throttled", "replay") < 80.0,
        "{r}"
    );
    assert!(f(&r["throttled"]["replay"]["stall_s"]) > 0.5, "{r}");
    for err in list(&r["throttled"]["errors"]["plan_epochs"]) {
        assert!(err.abs() <= 0.2, "the plan's epoch error {err}");
    }
}
