//! `--output-format`: our JSON, fio's JSON layout (checked key by key
//! against what the installed fio prints) and MLPerf Storage's summary keys,
//! each parsed back with the figures of the same replay.

mod common;

use std::collections::BTreeSet;
use std::process::Command;

use common::*;
use serde_json::Value;

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

/// What fio itself prints for a small job, or `None` where fio is missing.
fn real_fio(dir: &std::path::Path) -> Option<Value> {
    let out = Command::new("fio")
        .args([
            "--output-format=json",
            "--name=probe",
            "--size=1m",
            "--bs=64k",
            "--rw=randrw",
            "--ioengine=psync",
            "--fsync=4",
        ])
        .arg(format!("--filename={}", dir.join("probe").display()))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

#[test]
fn fio_layout_matches_fio_and_the_replay() {
    let (tmp, trace, target) = synth_with_target(TWO_RANKS);
    let ours = replay_ok(&trace, &target, &["--json", "--prepare", "auto"]);
    let out = replay_into(&trace, &target, &["--output-format", "fio"]);
    assert!(out.status.success());
    let fio: Value = serde_json::from_slice(&out.stdout).unwrap();
    let job = &fio["jobs"][0];
    assert_eq!(fio["jobs"].as_array().unwrap().len(), 1);
    // The same replay, the same bytes and op counts.
    assert_eq!(job["read"]["io_bytes"], ours["read_bytes"]);
    assert_eq!(job["write"]["io_bytes"], ours["write_bytes"]);
    assert_eq!(job["read"]["total_ios"], ours["ops"]["read"]["count"]);
    assert_eq!(job["sync"]["total_ios"], ours["ops"]["fsync"]["count"]);
    let bw = job["read"]["bw_bytes"].as_u64().unwrap();
    assert!(bw > 0);
    assert_eq!(
        job["read"]["bw"].as_u64().unwrap(),
        (bw as f64 / 1024.0).round() as u64
    );
    assert!(job["write"]["iops"].as_f64().unwrap() > 0.0);
    let p = &job["read"]["clat_ns"]["percentile"];
    let (p50, p99) = (
        p["50.000000"].as_u64().unwrap(),
        p["99.000000"].as_u64().unwrap(),
    );
    assert!(0 < p50 && p50 <= p99, "{p}");
    let shares: f64 = ["latency_ns", "latency_us", "latency_ms"]
        .iter()
        .flat_map(|k| job[*k].as_object().unwrap().values())
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert!(
        (shares - 100.0).abs() < 0.01,
        "latency buckets sum to {shares}"
    );

    // Every key we print is one fio prints, at the same place.
    let Some(real) = real_fio(tmp.path()) else {
        return iorepro_tests::skip::cannot_run(
            "the comparison with fio itself: fio is not installed",
        );
    };
    let rj = &real["jobs"][0];
    let missing = |ours: &Value, theirs: &Value, at: &str| {
        let extra: Vec<String> = keys(ours).difference(&keys(theirs)).cloned().collect();
        assert!(extra.is_empty(), "{at}: keys fio does not print: {extra:?}");
    };
    missing(&fio, &real, "top level");
    missing(job, rj, "jobs[0]");
    for dir in ["read", "write", "trim"] {
        missing(&job[dir], &rj[dir], dir);
        for lat in ["clat_ns", "lat_ns", "slat_ns"] {
            missing(&job[dir][lat], &rj[dir][lat], &format!("{dir}.{lat}"));
        }
    }
    missing(&job["sync"], &rj["sync"], "sync");
    for b in ["latency_ns", "latency_us", "latency_ms"] {
        assert_eq!(keys(&job[b]), keys(&rj[b]), "{b}");
    }
    assert_eq!(
        keys(&job["read"]["clat_ns"]["percentile"]),
        keys(&rj["read"]["clat_ns"]["percentile"]),
        "fio's percentiles"
    );
}

#[test]
fn mlperf_summary_keys() {
    let (_tmp, trace, target) = synth_with_target(TWO_RANKS);
    let out = replay_into(
        &trace,
        &target,
        &[
            "--ranks",
            "4",
            "--timing",
            "original",
            "--output-format",
            "mlperf",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["num_accelerators"], 4);
    assert_eq!(s["num_hosts"], 1);
    let m = &s["metric"];
    // One AU per epoch (the reading between checkpoints: the synthetic
    // job reads, saves, reads, saves).
    let per_epoch: Vec<f64> = m["train_au_percentage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(per_epoch.len(), 2, "{m}");
    // 20 ms of compute per step against a few ms of I/O on this machine.
    assert!(
        per_epoch.iter().all(|au| *au > 0.0 && *au <= 100.0),
        "{per_epoch:?}"
    );
    let au = m["train_au_mean_percentage"].as_f64().unwrap();
    let mean = per_epoch.iter().sum::<f64>() / 2.0;
    assert!((au - mean).abs() < 1e-9, "{au} vs {per_epoch:?}");
    let samples = m["train_throughput_samples_per_second"].as_array().unwrap();
    assert_eq!(samples.len(), 2);
    assert!(samples.iter().all(|v| v.as_f64().unwrap() > 0.0), "{m}");
    let expected = if au >= 90.0 { "success" } else { "fail" };
    assert_eq!(m["train_au_meet_expectation"], expected);
    let ckpt = m["save_checkpoint_io_mean_GB_per_second"].as_f64().unwrap();
    let size = m["checkpoint_size_GB"].as_f64().unwrap();
    let dur = m["save_checkpoint_duration_mean_seconds"].as_f64().unwrap();
    // Two checkpoints of 2 MiB per traced rank, 2 traced ranks: 4 MiB
    // each, however many ranks write it at N.
    assert!((size - 4.0 / 1024.0).abs() < 1e-9, "{size}");
    assert!(ckpt > 0.0 && dur > 0.0);
    assert!(m["train_io_mean_MB_per_second"].as_f64().unwrap() > 0.0);

    // Without compute time there is no utilisation to report.
    let afap = replay_into(&trace, &target, &["--output-format", "mlperf"]);
    let s: Value = serde_json::from_slice(&afap.stdout).unwrap();
    assert!(s["metric"].get("train_au_percentage").is_none());
}

#[test]
fn mlperf_results_tree_holds_the_run_where_mlpstorage_looks_for_it() {
    let (tmp, trace, target) = synth_with_target(TWO_RANKS);
    let results = tmp.path().join("results");
    let out = replay_into(
        &trace,
        &target,
        &[
            "--ranks",
            "4",
            "--timing",
            "original",
            "--mlperf-results",
            results.to_str().unwrap(),
            "--mlperf-model",
            "synth_job",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Vec<_> = std::fs::read_dir(results.join("training/synth_job/run"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    let read = |name: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(run.join(name)).unwrap()).unwrap()
    };
    let summary = read("summary.json");
    assert_eq!(summary["num_accelerators"], 4);
    assert_eq!(summary["host_memory_GB"].as_array().map(Vec::len), Some(1));
    assert!(summary["start"].as_str().unwrap() < summary["end"].as_str().unwrap());
    // One AU and one epoch of per_epoch_stats.json per epoch of the replay.
    let aus = summary["metric"]["train_au_percentage"]
        .as_array()
        .unwrap()
        .len();
    let epochs = read("per_epoch_stats.json");
    assert_eq!(keys(&epochs).len(), aus, "{epochs}");
    for e in epochs.as_object().unwrap().values() {
        assert!(e["block1"]["duration"].is_string(), "{e}");
        assert!(e["start"].as_str().unwrap() <= e["end"].as_str().unwrap());
    }
    let config = std::fs::read_to_string(run.join("dlio_config/config.yaml")).unwrap();
    assert!(
        config.starts_with("workload:\n  model:\n    name: synth_job\n"),
        "{config}"
    );
    let marker = std::fs::read_dir(run)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with("_metadata.json")
        })
        .count();
    assert_eq!(marker, 1);
    assert!(std::fs::read_to_string(run.join("dlio.log"))
        .unwrap()
        .contains("ranks"));

    // A plan replays nothing to write.
    let plan = replay_into(
        &trace,
        &target,
        &["--plan-only", "--mlperf-results", results.to_str().unwrap()],
    );
    assert_eq!(plan.status.code(), Some(2));
}

#[test]
fn json_and_output_format_json_agree_and_contradictions_are_refused() {
    let (_tmp, trace, target) = synth_with_target(TWO_RANKS);
    let a = replay_ok(&trace, &target, &["--json"]);
    let b = replay_ok(&trace, &target, &["--output-format", "json"]);
    assert_eq!(keys(&a), keys(&b));
    assert_eq!(a["read_bytes"], b["read_bytes"]);
    let bad = replay_into(&trace, &target, &["--json", "--output-format", "fio"]);
    assert_eq!(bad.status.code(), Some(2));
}
