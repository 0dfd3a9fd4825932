//! `compare` reports zero error for a trace against itself, and the right
//! signed relative errors for a trace whose checkpoints moved more bytes.

mod analysis_util;

use analysis_util::*;

#[test]
fn trace_against_itself_is_zero_error() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), "t", &workload(4, 3, 12, "sequential"));
    let t = trace.to_str().unwrap();
    let c = json(&["compare", t, t, "--json"]);
    for key in ["duration_error", "read_bytes_error", "write_bytes_error"] {
        assert_eq!(c[key].as_f64(), Some(0.0), "{key}: {c:#}");
    }
    let phases = c["phases"].as_array().unwrap();
    assert!(phases.len() >= 8, "load, reads and 3 checkpoints: {c:#}");
    for p in phases {
        assert_eq!(p["duration_error"].as_f64(), Some(0.0), "{p}");
        assert_eq!(p["gib_s_error"].as_f64(), Some(0.0), "{p}");
    }
    assert_eq!(c["unmatched_b_phases"], 0);
}

#[test]
fn bigger_checkpoints_show_as_write_error() {
    let tmp = tempfile::tempdir().unwrap();
    let a = synth(tmp.path(), "a", &workload(4, 2, 12, "sequential"));
    let b = synth(
        tmp.path(),
        "b",
        &workload(4, 2, 12, "sequential")
            .replace("bytes_per_rank = \"64MiB\"", "bytes_per_rank = \"96MiB\""),
    );
    let c = json(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        (c["write_bytes_error"].as_f64().unwrap() - 0.5).abs() < 1e-12,
        "{c:#}"
    );
    assert_eq!(c["read_bytes_error"].as_f64(), Some(0.0));
    assert!(
        c["duration_error"].as_f64().unwrap() > 0.0,
        "B writes longer: {c:#}"
    );
    let ckpts: Vec<&serde_json::Value> = c["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "checkpoint")
        .collect();
    assert_eq!(ckpts.len(), 2);
    for p in ckpts {
        assert!(
            (p["write_bytes_error"].as_f64().unwrap() - 0.5).abs() < 1e-12,
            "{p}"
        );
        assert!(p["duration_error"].as_f64().unwrap() > 0.2, "{p}");
    }
    // The other way round the error is negative: (A - B) / B.
    let r = json(&[
        "compare",
        b.to_str().unwrap(),
        a.to_str().unwrap(),
        "--json",
    ]);
    assert!((r["write_bytes_error"].as_f64().unwrap() + 1.0 / 3.0).abs() < 1e-12);
}

#[test]
fn different_rank_counts_are_compared_per_rank_too() {
    let tmp = tempfile::tempdir().unwrap();
    let one = synth(tmp.path(), "one", &workload(1, 2, 12, "sequential"));
    let four = synth(tmp.path(), "four", &workload(4, 2, 12, "sequential"));
    let (a, b) = (one.to_str().unwrap(), four.to_str().unwrap());
    let c = json(&["compare", a, b, "--json"]);
    assert_eq!(
        (c["a_ranks"].as_u64(), c["b_ranks"].as_u64()),
        (Some(1), Some(4))
    );
    // Four ranks that each do what the one did: 4x in all, the same per rank.
    assert!(
        (c["write_bytes_error"].as_f64().unwrap() - 3.0).abs() < 1e-9,
        "{c:#}"
    );
    assert!(
        c["per_rank_write_bytes_error"].as_f64().unwrap().abs() < 1e-9,
        "{c:#}"
    );
    assert!(
        c["per_rank_read_bytes_error"].as_f64().unwrap().abs() < 1e-9,
        "{c:#}"
    );
    let text =
        String::from_utf8(trace_cmd().args(["compare", a, b]).output().unwrap().stdout).unwrap();
    assert!(text.contains("ranks 1 -> 4: per rank"), "{text}");
    // The same rank count: no per-rank figures.
    let same = json(&["compare", a, a, "--json"]);
    assert!(same.get("per_rank_write_bytes_error").is_none(), "{same:#}");
}
