//! DuckDB reads our segments directly and agrees with `summary --json` on
//! events, bytes per op and bytes per rank.

use assert_cmd::Command;
use iorepro_tests::python::require_python;

#[test]
fn duckdb_agrees_with_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t");
    let workload = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/example.toml");
    Command::cargo_bin("iorepro-trace")
        .unwrap()
        .args([
            "synth",
            workload,
            "-o",
            trace.to_str().unwrap(),
            "--segment-events",
            "3000",
        ])
        .assert()
        .success();
    let out = Command::cargo_bin("iorepro-trace")
        .unwrap()
        .args(["summary", "--json", trace.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let script = format!(
        r#"
import duckdb, json
glob = "{}/*.parquet"
q = lambda s: duckdb.sql(s.replace("@T@", "read_parquet('" + glob + "')")).fetchall()
ops = {{op: {{"count": c, "bytes": int(b)}} for op, c, b in
       q("SELECT op, count(*), coalesce(sum(CASE WHEN op IN ('read','write') AND ret > 0 THEN ret ELSE 0 END), 0) FROM @T@ GROUP BY op")}}
ranks = {{str(r): int(b) for r, b in q("SELECT rank, sum(ret) FROM @T@ WHERE op = 'read' AND ret > 0 GROUP BY rank")}}
print(json.dumps(dict(events=q("SELECT count(*) FROM @T@")[0][0], ops=ops, read_by_rank=ranks,
                      segments=q("SELECT count(DISTINCT filename) FROM read_parquet('" + glob + "', filename=true)")[0][0])))
"#,
        trace.display()
    );
    let Some(text) = require_python(&script, &["duckdb"]) else {
        return;
    };
    let duck: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(
        duck["segments"].as_u64().unwrap() > 1,
        "the trace spans several segments"
    );
    assert_eq!(duck["events"], summary["events"]);
    assert_eq!(duck["ops"], summary["ops"]);
    // Every rank reads the same amount in this workload; DuckDB sees each rank's share.
    let per_rank = duck["read_by_rank"].as_object().unwrap();
    assert_eq!(per_rank.len(), summary["ranks"].as_array().unwrap().len());
    let total: u64 = per_rank.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(total, summary["read_bytes"].as_u64().unwrap());
    if let Some(ranks) = summary.get("per_rank").and_then(|v| v.as_array()) {
        for r in ranks {
            let key = r["rank"].to_string();
            assert_eq!(per_rank[&key], r["read_bytes"], "rank {key}");
        }
    }
}
