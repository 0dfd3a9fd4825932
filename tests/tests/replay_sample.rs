//! Replaying the bundled capture of the DDP training job: fidelity at the
//! original scale (`--timing original --record-ops`, then `compare`) and the
//! report of the same trace replayed at 4x the ranks.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use iorepro_tests::bins::{bin, run_json, scratch};
use iorepro_tests::samples::{sample, ALL, TORCH_DDP};

fn finite(v: &serde_json::Value, what: &str) -> f64 {
    let x = v
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: not a number: {v}"));
    assert!(x.is_finite(), "{what}: {x}");
    x
}

/// The sample replayed once at its original timing, with what the replay did
/// recorded, and `compare` of the two.
struct Fidelity {
    ops: PathBuf,
    cmp: serde_json::Value,
}

fn fidelity() -> &'static Fidelity {
    static CELL: OnceLock<Fidelity> = OnceLock::new();
    CELL.get_or_init(|| {
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
        assert!(
            report["errors"].as_array().is_some_and(|e| e.is_empty()),
            "replay errors: {report}"
        );
        let cmp = run_json(
            Command::new(bin("iorepro-trace"))
                .arg("compare")
                .arg(&trace)
                .arg(&ops)
                .arg("--json"),
        );
        Fidelity { ops, cmp }
    })
}

fn checkpoints_in(trace: &Path) -> usize {
    let v = run_json(
        Command::new(bin("iorepro-trace"))
            .arg("phases")
            .arg(trace)
            .arg("--json"),
    );
    v["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .filter(|p| p["kind"] == "checkpoint")
        .count()
}

#[test]
fn replay_at_original_timing_reproduces_the_capture() {
    let f = fidelity();
    let cmp = &f.cmp;
    let duration = finite(&cmp["duration_error"], "duration_error");
    // The replay moves exactly the captured bytes...
    assert_eq!(
        finite(&cmp["read_bytes_error"], "read_bytes_error"),
        0.0,
        "{cmp}"
    );
    assert_eq!(
        finite(&cmp["write_bytes_error"], "write_bytes_error"),
        0.0,
        "{cmp}"
    );
    // ...and reproduces each checkpoint spike.
    assert_eq!(
        checkpoints_in(&f.ops),
        checkpoints_in(&sample(TORCH_DDP)),
        "checkpoint spikes in the replay"
    );
    let phases = cmp["phases"].as_array().expect("phases");
    let mut line = format!("duration error {:+.2}%", duration * 100.0);
    // Relative errors are defined where the capture's value is not zero (an
    // idle phase moves no bytes, so its bandwidth error is null).
    for p in phases.iter().filter(|p| !p["b_index"].is_null()) {
        let kind = p["kind"].as_str().unwrap();
        if p["a_duration_s"].as_f64() != Some(0.0) {
            finite(
                &p["duration_error"],
                &format!("{kind} duration_error in {p}"),
            );
        }
        if p["a_gib_s"].as_f64() != Some(0.0) {
            let e = finite(&p["gib_s_error"], &format!("{kind} gib_s_error in {p}"));
            line += &format!(", {kind} GiB/s {:+.1}%", e * 100.0);
        }
    }
    eprintln!("fidelity: {line}");
}

#[test]
fn compare_matches_every_checkpoint_of_the_capture_to_one_of_the_replay() {
    let f = fidelity();
    let b = run_json(
        Command::new(bin("iorepro-trace"))
            .arg("phases")
            .arg(&f.ops)
            .arg("--json"),
    );
    let b_phases = b["phases"].as_array().expect("phases");
    let mut matched = Vec::new();
    for p in f.cmp["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .filter(|p| p["kind"] == "checkpoint")
    {
        let j = p["b_index"]
            .as_u64()
            .unwrap_or_else(|| panic!("checkpoint phase of the capture unmatched: {p}"));
        assert_eq!(b_phases[j as usize]["kind"], "checkpoint", "{p}");
        matched.push(j);
    }
    // The k-th checkpoint of the capture is the k-th of the replay.
    let b_ckpts: Vec<u64> = (0..b_phases.len() as u64)
        .filter(|&j| b_phases[j as usize]["kind"] == "checkpoint")
        .collect();
    assert_eq!(matched, b_ckpts, "{}", f.cmp);
}

#[test]
fn replay_at_twice_the_ranks_reports_the_checkpoint_spike() {
    let trace = sample(TORCH_DDP);
    let root = scratch("scale-2x");
    let report = run_json(
        Command::new(bin("iorepro-replay"))
            .arg(&trace)
            .arg("--target")
            .arg(root.join("target"))
            // The job itself, run at 4, held each rank's batch.
            .args(["--ranks", "4", "--batch", "per-rank"])
            .args(["--timing", "original", "--json"]),
    );
    assert!(
        report["errors"].as_array().is_some_and(|e| e.is_empty()),
        "replay errors: {report}"
    );
    let source_ranks = report["trace"]["ranks"].as_u64().expect("trace.ranks");
    assert_eq!(source_ranks, 2, "the sample is a 2-rank job");
    assert_eq!(report["ranks"], 4);
    // The ranks share the job's reads out. The job saves every 10 of its 32
    // steps per rank; at twice the ranks it makes 16 steps and saves once
    // (as the job itself did, run at 4), with the state's bytes once.
    assert_eq!(report["read_bytes"], report["trace"]["read_bytes"]);
    assert_eq!(
        3 * report["write_bytes"].as_u64().unwrap(),
        report["trace"]["write_bytes"].as_u64().unwrap()
    );
    // The checkpoint spike: every checkpoint phase, timed by its slowest rank.
    let ckpts: Vec<&serde_json::Value> = report["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .filter(|p| p["kind"] == "checkpoint" && p["write_bytes"] != 0)
        .collect();
    assert_eq!(ckpts.len(), 1, "{report}");
    assert!(
        !ckpts.is_empty(),
        "no checkpoint phase in the report: {report}"
    );
    for p in &ckpts {
        assert!(
            finite(&p["duration_s"], "checkpoint duration_s") > 0.0,
            "{p}"
        );
        assert!(p["write_bytes"].as_u64().unwrap() > 0, "{p}");
        let slowest = p["slowest_rank"]
            .as_u64()
            .unwrap_or_else(|| panic!("slowest_rank missing: {p}"));
        assert!(slowest < 4, "{p}");
    }
    // GiB/s per rank.
    let per_rank = report["per_rank"].as_array().expect("per_rank");
    assert_eq!(per_rank.len(), 4);
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

/// One phase detector: the phases the replay meets at are the phases
/// `iorepro-trace phases` reports, for every bundled capture, but that the
/// replay begins a save where the job first named what it saves, which may
/// be before its first write (see `phases::begin_saves_where_named`): the
/// phase before a save may end earlier, never later, and every other
/// boundary is the same.
#[test]
fn the_replay_meets_at_the_phases_the_analysis_finds() {
    for name in ALL {
        let trace = sample(name);
        let analysis = run_json(
            Command::new(bin("iorepro-trace"))
                .arg("phases")
                .arg(&trace)
                .arg("--json"),
        );
        let report = run_json(
            Command::new(bin("iorepro-replay"))
                .arg(&trace)
                .arg("--target")
                .arg(scratch(&format!("phases-{name}")).join("target"))
                .args(["--timing", "afap", "--phases", "checkpoint", "--json"]),
        );
        let ours = analysis["phases"].as_array().expect("phases");
        let replayed = report["phases"].as_array().expect("phases");
        let kinds = |v: &[serde_json::Value]| -> Vec<String> {
            v.iter()
                .map(|p| p["kind"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(kinds(ours), kinds(replayed), "{name}");
        let (mut ends_ours, mut ends_replayed) = (0.0, 0.0);
        for (i, (a, r)) in ours.iter().zip(replayed).enumerate() {
            ends_ours += finite(&a["end_s"], "end_s") - finite(&a["start_s"], "start_s");
            ends_replayed += finite(&r["trace_duration_s"], "trace_duration_s");
            let before_a_save = ours.get(i + 1).is_some_and(|n| n["kind"] == "checkpoint");
            if before_a_save {
                assert!(ends_replayed <= ends_ours + 1e-6, "{name}: {a} vs {r}");
            } else {
                assert!(
                    (ends_ours - ends_replayed).abs() < 1e-6,
                    "{name}: {a} vs {r}"
                );
            }
        }
    }
}

#[test]
fn mlperf_output_counts_the_epochs_and_one_checkpoints_size() {
    // The sample is 2 epochs over 64 files with 3 DCP checkpoints of
    // 15.8 MB (see its NOTE.md), replayed here at 4 ranks.
    let trace = sample(TORCH_DDP);
    let root = scratch("mlperf-epochs");
    let s = run_json(
        Command::new(bin("iorepro-replay"))
            .arg(&trace)
            .arg("--target")
            .arg(root.join("target"))
            .args(["--ranks", "4", "--output-format", "mlperf"]),
    );
    assert_eq!(s["epochs"], 2, "{s}");
    let size_gb = finite(&s["metric"]["checkpoint_size_GB"], "checkpoint_size_GB");
    let one = size_gb * (1u64 << 30) as f64;
    assert!(
        (15.0e6..16.5e6).contains(&one),
        "one checkpoint's bytes, not every rank's: {one}"
    );
}

/// What one rank of a replay in one process may hold, at most: its thread,
/// its buffers, its latency histograms and its share of the plan.
const MEMORY_PER_RANK_KIB: u64 = 512;

#[test]
fn four_thousand_ranks_replay_in_one_process_within_half_a_mib_each() {
    let trace = sample(TORCH_DDP);
    let root = scratch("ranks-4096");
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(bin("iorepro-replay"))
        .arg(&trace)
        .arg("--target")
        .arg(root.join("target"))
        .args(["--ranks", "4096", "--timing", "afap", "--json"])
        .output()
        .expect("/usr/bin/time (package time; `cargo xtask setup`)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ranks"], 4096);
    assert!(
        report["errors"].as_array().is_some_and(|e| e.is_empty()),
        "replay errors: {}",
        report["errors"]
    );
    assert_eq!(report["rendezvous"]["mechanism"], "threads");
    // The ranks share the job's reads out.
    assert_eq!(report["read_bytes"], report["trace"]["read_bytes"]);
    let peak_kib: u64 = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
        .and_then(|v| v.trim().parse().ok())
        .expect("peak memory in /usr/bin/time's output");
    eprintln!(
        "4096 ranks in one process: peak {} MiB, {} KiB a rank; barrier release p50 {} ms",
        peak_kib / 1024,
        peak_kib / 4096,
        report["rendezvous"]["barrier_release_ms"]["p50"]
    );
    assert!(
        peak_kib <= 4096 * MEMORY_PER_RANK_KIB,
        "peak {peak_kib} KiB: more than {MEMORY_PER_RANK_KIB} KiB a rank"
    );
}
