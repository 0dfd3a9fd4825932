//! Per-node captures side by side as hive partitions (`TRACE/host=NAME/`)
//! are one trace, without `merge`: every `iorepro-trace` subcommand reads
//! the directory, and DuckDB reads it with `hive_partitioning` and agrees
//! with `summary --json`.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use iorepro_tests::python::require_python;

/// One node of a two-node job: 3 ranks from `first_rank`, its own seed.
fn node_workload(host: &str, first_rank: u32, seed: u64) -> String {
    format!(
        r#"
name = "two-nodes"
ranks = 3
first_rank = {first_rank}
host = "{host}"
seed = {seed}
[load]
bytes_per_rank = "8MiB"
read_size = "1MiB"
[dataset]
files = 8
file_size = "4MiB"
read_size = "256KiB"
[training]
steps = 20
compute_time = "10ms"
reads_per_step = 4
[checkpoint]
every = 8
bytes_per_rank = "4MiB"
write_size = "1MiB"
"#
    )
}

fn trace_cmd() -> Command {
    Command::cargo_bin("iorepro-trace").unwrap()
}

fn run_ok(args: &[&str]) -> Vec<u8> {
    let out = trace_cmd().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "iorepro-trace {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_slice(&run_ok(args)).unwrap()
}

/// `dir/trace/host=node0` and `host=node1`, each synthesized on its own.
fn partitioned(dir: &Path) -> PathBuf {
    let trace = dir.join("trace");
    for (i, host) in ["node0", "node1"].iter().enumerate() {
        let wl = dir.join(format!("{host}.toml"));
        std::fs::write(&wl, node_workload(host, 3 * i as u32, 7 + i as u64)).unwrap();
        let part = trace.join(format!("host={host}"));
        run_ok(&[
            "synth",
            wl.to_str().unwrap(),
            "-o",
            part.to_str().unwrap(),
            "--segment-events",
            "700",
        ]);
    }
    trace
}

const DUCKDB_TOTALS: &str = r#"
import duckdb, json
t = "read_parquet('@DIR@/**/*.parquet', hive_partitioning = true)"
q = lambda s: duckdb.sql(s.replace("T", t, 1)).fetchall()
print(json.dumps({
    "events": q("select count(*) from T")[0][0],
    "ops": {op: {"count": c, "bytes": int(b)} for op, c, b in q(
        "select op, count(*), coalesce(sum(case when op in ('read','write') and ret > 0 then ret else 0 end), 0) from T group by op")},
    "per_rank": {str(r): [int(rb), int(wb)] for r, rb, wb in q(
        "select rank, sum(case when op='read' and ret>0 then ret else 0 end), sum(case when op='write' and ret>0 then ret else 0 end) from T group by rank")},
    "hosts": sorted(h for (h,) in q("select distinct host from T")),
    "files": q("select count(distinct path) from T")[0][0],
    "first_ns": q("select min(epoch_ns(ts)) from T")[0][0],
}))
"#;

#[test]
fn duckdb_reads_a_partitioned_trace_as_summary_does() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = partitioned(tmp.path());
    let ours = json(&["summary", trace.to_str().unwrap(), "--json"]);
    let script = DUCKDB_TOTALS.replace("@DIR@", trace.to_str().unwrap());
    let Some(text) = require_python(&script, &["duckdb"]) else {
        return;
    };
    let duck: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(ours["events"], duck["events"]);
    assert_eq!(ours["ops"], duck["ops"]);
    assert_eq!(ours["hosts"], duck["hosts"]);
    assert_eq!(ours["hosts"], serde_json::json!(["node0", "node1"]));
    assert_eq!(ours["files"], duck["files"]);
    let ranks: serde_json::Map<String, serde_json::Value> = ours["per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rank"].to_string(),
                serde_json::json!([r["read_bytes"], r["write_bytes"]]),
            )
        })
        .collect();
    assert_eq!(serde_json::Value::Object(ranks), duck["per_rank"]);
    assert_eq!(ours["ranks"], serde_json::json!([0, 1, 2, 3, 4, 5]));
    // Phases span both nodes: the first starts at the first call of either.
    let first = ours["phases"][0]["start_unix_ns"].as_i64().unwrap();
    assert_eq!(first, duck["first_ns"].as_i64().unwrap());
}

#[test]
fn every_subcommand_reads_a_partitioned_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = partitioned(tmp.path());
    let t = trace.to_str().unwrap();
    let summary = json(&["summary", t, "--json"]);
    let events = summary["events"].as_u64().unwrap();

    let v = json(&["validate", t, "--json"]);
    assert_eq!(v["events"].as_u64(), Some(events));
    assert!(v["segments"].as_u64().unwrap() >= 4, "{v}");
    let phases = json(&["phases", t, "--json"]);
    assert_eq!(phases["phases"], summary["phases"]);
    let checkpoints = phases["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "checkpoint")
        .count();
    assert_eq!(checkpoints, 2, "{phases:#}");
    let svg = tmp.path().join("t.svg");
    run_ok(&["plot", t, "-o", svg.to_str().unwrap()]);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let c = json(&["compare", t, t, "--json"]);
    assert_eq!(c["read_bytes_error"], 0.0);
    let iologs = tmp.path().join("iologs");
    let e = json(&[
        "export",
        t,
        "--fio-iolog",
        iologs.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        e["logs"].as_array().unwrap().len(),
        6,
        "one iolog per rank: {e}"
    );
    let perfetto = tmp.path().join("t.json");
    run_ok(&["export", t, "--perfetto", perfetto.to_str().unwrap()]);
    let merged = tmp.path().join("merged");
    run_ok(&["merge", t, "-o", merged.to_str().unwrap()]);
    let m = json(&["summary", merged.to_str().unwrap(), "--json"]);
    assert_eq!(m["events"].as_u64(), Some(events));
    assert_eq!(m["phases"], summary["phases"]);
    let r = json(&["validate", "--repair", t, "--json"]);
    assert_eq!(
        r.as_array().map(Vec::len),
        Some(2),
        "one repair per node: {r}"
    );
}
