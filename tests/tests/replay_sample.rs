//! Replaying the bundled capture of the DDP training job: fidelity at the
//! original scale (`--timing original --record-ops`, then `compare`) and the
//! report of the same trace replayed at 4x the ranks.

use std::process::Command;

use iorepro_tests::bins::{bin, run_json, scratch};
use iorepro_tests::samples::{sample, TORCH_DDP};

fn finite(v: &serde_json::Value, what: &str) -> f64 {
    let x = v.as_f64().unwrap_or_else(|| panic!("{what}: not a number: {v}"));
    assert!(x.is_finite(), "{what}: {x}");
    x
}

#[test]
fn replay_at_original_timing_reproduces_the_capture() {
    let trace = sample(TORCH_DDP);
    let root = scratch("fidelity");
    let ops = root.join("ops");
    let report = run_json(
        Command::new(bin("iorepro-replay"))
            .arg(&trace)
            .arg("--target")
            .arg(root.join("target"))
            .args(["--timing", "original", "--json", "--record-ops"])
            .arg(&ops),
    );
    assert!(report["errors"].as_array().is_some_and(|e| e.is_empty()), "replay errors: {report}");
    let cmp = run_json(Command::new(bin("iorepro-trace")).arg("compare").arg(&trace).arg(&ops).arg("--json"));
    let duration = finite(&cmp["duration_error"], "duration_error");
    // The replay moves exactly the captured bytes.
    assert_eq!(finite(&cmp["read_bytes_error"], "read_bytes_error"), 0.0, "{cmp}");
    assert_eq!(finite(&cmp["write_bytes_error"], "write_bytes_error"), 0.0, "{cmp}");
    let phases = cmp["phases"].as_array().expect("phases");
    assert!(phases.iter().any(|p| p["kind"] == "checkpoint"), "no checkpoint phase compared: {cmp}");
    let mut line = format!("duration error {:+.2}%", duration * 100.0);
    for p in phases {
        let kind = p["kind"].as_str().unwrap();
        if kind == "checkpoint" || kind == "load" {
            let e = finite(&p["gib_s_error"], &format!("{kind} gib_s_error"));
            line += &format!(", {kind} GiB/s error {:+.2}%", e * 100.0);
        }
    }
    eprintln!("fidelity: {line}");
}

#[test]
fn replay_at_four_times_the_ranks_reports_the_checkpoint_spike() {
    let trace = sample(TORCH_DDP);
    let root = scratch("scale-4x");
    let report = run_json(
        Command::new(bin("iorepro-replay"))
            .arg(&trace)
            .arg("--target")
            .arg(root.join("target"))
            .args(["--ranks", "8", "--timing", "original", "--json"]),
    );
    assert!(report["errors"].as_array().is_some_and(|e| e.is_empty()), "replay errors: {report}");
    let source_ranks = report["trace"]["ranks"].as_u64().expect("trace.ranks");
    assert_eq!(source_ranks, 2, "the sample is a 2-rank job");
    assert_eq!(report["ranks"], 8);
    for key in ["read_bytes", "write_bytes"] {
        assert_eq!(
            report[key].as_u64().unwrap(),
            4 * report["trace"][key].as_u64().unwrap(),
            "{key}: 4x the ranks move 4x the bytes"
        );
    }
    // The checkpoint spike: every checkpoint phase, timed by its slowest rank.
    let ckpts: Vec<&serde_json::Value> = report["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .filter(|p| p["kind"] == "checkpoint")
        .collect();
    assert!(!ckpts.is_empty(), "no checkpoint phase in the report: {report}");
    for p in &ckpts {
        assert!(finite(&p["duration_s"], "checkpoint duration_s") > 0.0, "{p}");
        assert!(p["write_bytes"].as_u64().unwrap() > 0, "{p}");
        let slowest = p["slowest_rank"].as_u64().unwrap_or_else(|| panic!("slowest_rank missing: {p}"));
        assert!(slowest < 8, "{p}");
    }
    // GiB/s per rank.
    let per_rank = report["per_rank"].as_array().expect("per_rank");
    assert_eq!(per_rank.len(), 8);
    for r in per_rank {
        assert!(finite(&r["gib_s"], "per-rank gib_s") > 0.0, "{r}");
        assert!(finite(&r["stall_s"], "per-rank stall_s") >= 0.0, "{r}");
    }
    // How long a GPU would have waited on I/O.
    assert!(finite(&report["stall_s"], "stall_s") >= 0.0);
    let busy = finite(&report["gpu_busy"], "gpu_busy");
    assert!((0.0..=1.0).contains(&busy), "gpu_busy {busy}");
    eprintln!(
        "4x ranks: checkpoint {:.3} s (slowest rank {}), stall {:.3} s, GPU waiting {:.1}% of the time",
        finite(&ckpts[0]["duration_s"], "d"),
        ckpts[0]["slowest_rank"],
        finite(&report["stall_s"], "stall_s"),
        (1.0 - busy) * 100.0
    );
}
