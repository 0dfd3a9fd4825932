//! `iorepro-trace filter`: the rows kept, counted against DuckDB on the same
//! segments, for each criterion alone and together, on a synthetic trace
//! and on a bundled real capture; every output validates and reads back.

mod analysis_util;

use std::path::{Path, PathBuf};

use analysis_util::*;

/// Rows of the trace at argv[1] matching the SQL condition argv[2].
const DUCKDB_COUNT: &str = r#"
import duckdb, json, sys
con = duckdb.connect()
con.execute(f"create view t as select * from read_parquet('{sys.argv[1]}/*.parquet')")
t0 = con.execute("select min(epoch_ns(ts)) from t").fetchall()[0][0]
cond = sys.argv[2].replace("T0", str(t0))
print(json.dumps(con.execute(f"select count(*) from t where {cond}").fetchall()[0][0]))
"#;

fn duck_count(trace: &Path, cond: &str) -> u64 {
    python_json(DUCKDB_COUNT, &[trace.to_str().unwrap(), cond])
        .as_u64()
        .unwrap()
}

/// Filters `trace` with `args` into a new directory; checks the output
/// validates, reads back in summary, files and phases, and says where it
/// came from. Returns the output and its row count.
fn filter(trace: &Path, out: &Path, args: &[&str]) -> (PathBuf, u64) {
    let mut all = vec![
        "filter",
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--json",
    ];
    all.extend_from_slice(args);
    let r = json(&all);
    let kept = r["events"].as_u64().unwrap();
    let v = json(&["validate", out.to_str().unwrap(), "--json"]);
    assert_eq!(v["events"].as_u64(), Some(kept), "validate: {v}");
    let s = json(&["summary", out.to_str().unwrap(), "--json"]);
    assert_eq!(s["events"].as_u64(), Some(kept));
    json(&["files", out.to_str().unwrap(), "--json"]);
    json(&["phases", out.to_str().unwrap(), "--json"]);
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let src: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(trace.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(m["events"].as_u64(), Some(kept));
    assert_eq!(m["source"], src["source"], "source kept");
    assert_eq!(m["command"], src["command"], "the job's command kept");
    assert_eq!(m["dropped_events"], src["dropped_events"]);
    assert_eq!(m["mounts"], src["mounts"], "mount table kept");
    assert_eq!(
        m["filtered_from"]["events"].as_u64(),
        src["events"].as_u64(),
        "filtered_from notes the source"
    );
    (out.to_path_buf(), kept)
}

#[test]
fn each_criterion_on_a_synthetic_trace_matches_duckdb() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), "t", &workload(3, 2, 10, "random"));
    let o = |n: &str| tmp.path().join(n);
    let total = duck_count(&trace, "true");

    let cases: &[(&str, &[&str], &str)] = &[
        (
            "role",
            &["--role", "checkpoint"],
            "path like '/checkpoints/%'",
        ),
        (
            "roles",
            &["--roles", "dataset,checkpoint", "--exclude", "/models"],
            "path like '/checkpoints/%' or path like '/data/%'",
        ),
        ("rank", &["--rank", "1", "--rank", "2"], "rank in (1, 2)"),
        (
            "prefix",
            &[
                "--include",
                "/data/train",
                "--exclude",
                "/data/train/shard-00001.bin",
            ],
            "path like '/data/train/%' and path <> '/data/train/shard-00001.bin'",
        ),
        (
            "window",
            &["--from", "200ms", "--to", "0.6s"],
            "epoch_ns(ts) >= T0 + 200000000 and epoch_ns(ts) < T0 + 600000000",
        ),
        (
            "together",
            &[
                "--role",
                "dataset",
                "--include",
                "/checkpoints/step-000010",
                "--rank",
                "0",
                "--from",
                "100ms",
            ],
            "rank = 0 and epoch_ns(ts) >= T0 + 100000000 and (path like '/data/%' \
             or path like '/models/%' or path like '/checkpoints/step-000010/%')",
        ),
    ];
    for (name, args, cond) in cases {
        let want = duck_count(&trace, cond);
        assert!(
            want > 0 && want < total,
            "{name}: the case must cut something ({want} of {total})"
        );
        let (out, kept) = filter(&trace, &o(name), args);
        assert_eq!(kept, want, "{name}: rows kept vs DuckDB");
        assert_eq!(duck_count(&out, "true"), want, "{name}: rows in the output");
    }
    // Every path in the role cut has that role.
    let f = json(&["files", o("role").to_str().unwrap(), "--json"]);
    for file in f["files"].as_array().unwrap() {
        assert!(file["path"].as_str().unwrap().starts_with("/checkpoints"));
    }
}

#[test]
fn a_real_capture_cut_to_one_ranks_dataset_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/torch-ddp-dcp");
    let files = json(&["files", sample.to_str().unwrap(), "--json"]);
    let dataset: Vec<String> = files["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["role"] == "dataset")
        .map(|f| format!("'{}'", f["path"].as_str().unwrap()))
        .collect();
    assert!(!dataset.is_empty());
    let cond = format!("rank = 0 and path in ({})", dataset.join(","));
    let want = duck_count(&sample, &cond);
    let (out, kept) = filter(
        &sample,
        &tmp.path().join("cut"),
        &["--role", "dataset", "--rank", "0"],
    );
    assert_eq!(kept, want);
    assert!(kept > 0);
    let s = json(&["summary", out.to_str().unwrap(), "--json"]);
    assert_eq!(s["ranks"], serde_json::json!([0]));
    assert_eq!(s["write_bytes"].as_u64(), Some(0));
    // A window past the end keeps nothing, and the empty trace still validates.
    let (_, none) = filter(&sample, &tmp.path().join("none"), &["--from", "1h"]);
    assert_eq!(none, 0);
}

#[test]
fn bad_filters_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/torch-ddp-dcp");
    for (args, says) in [
        (vec!["--role", "weights"], "not a role"),
        (vec!["--from", "2s", "--to", "1s"], "later than --from"),
        (vec!["--to", "soon"], "not a duration"),
    ] {
        let out = trace_cmd()
            .arg("filter")
            .arg(&sample)
            .arg("-o")
            .arg(tmp.path().join("x"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
