//! `summary --json` against DuckDB computing the same totals from the same
//! Parquet segments: events, bytes and counts per op, bytes per rank, the
//! request-size histogram and the 1 s peak bandwidth.

mod analysis_util;

use analysis_util::*;

const DUCKDB_TOTALS: &str = r#"
import duckdb, json, sys
glob = sys.argv[1] + "/*.parquet"
con = duckdb.connect()
con.execute(f"create view t as select * from read_parquet('{glob}')")
q = lambda s: con.execute(s).fetchall()
out = {"events": q("select count(*) from t")[0][0]}
out["ops"] = {op: {"count": c, "bytes": int(b)} for op, c, b in q(
    "select op, count(*), coalesce(sum(case when op in ('read','write') and ret > 0 then ret else 0 end), 0) from t group by op")}
out["per_rank"] = {str(r): [int(rb), int(wb)] for r, rb, wb in q(
    "select rank, sum(case when op='read' and ret>0 then ret else 0 end), sum(case when op='write' and ret>0 then ret else 0 end) from t where rank is not null group by rank")}
out["hist"] = {}
for op, b, c in q("select op, case when size = 0 then 0 else pow(2, floor(log2(size)))::bigint end as b, count(*) from t where op in ('read','write') and size is not null group by op, b"):
    out["hist"].setdefault(op, {})[str(b)] = c
t0 = q("select min(epoch_ns(ts)) from t")[0][0]
for op in ("read", "write"):
    out["peak_" + op] = q(f"select coalesce(max(s), 0) from (select sum(ret) s from t where op='{op}' and ret > 0 group by (epoch_ns(ts) - {t0}) // 1000000000)")[0][0]
out["files"] = q("select count(distinct path) from t")[0][0]
print(json.dumps(out))
"#;

fn check_against_duckdb(pattern: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), "t", &workload(4, 2, 12, pattern));
    let ours = json(&["summary", trace.to_str().unwrap(), "--json"]);
    let duck = python_json(DUCKDB_TOTALS, &[trace.to_str().unwrap()]);

    assert_eq!(ours["events"], duck["events"]);
    assert_eq!(ours["files"], duck["files"]);
    assert_eq!(ours["ops"], duck["ops"], "op counts and bytes");
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
    assert_eq!(
        serde_json::Value::Object(ranks),
        duck["per_rank"],
        "bytes per rank"
    );
    assert_eq!(ours["size_histogram"], duck["hist"], "size histogram");
    let gib = (1u64 << 30) as f64;
    for op in ["read", "write"] {
        let theirs = duck[format!("peak_{op}")].as_f64().unwrap() / gib;
        let mine = ours[format!("peak_{op}_gib_s")].as_f64().unwrap();
        assert!(
            (mine - theirs).abs() < 1e-9,
            "{op} 1 s peak: ours {mine}, DuckDB {theirs}"
        );
        assert!(mine > 0.0);
    }
    let rb = ours["ops"]["read"]["bytes"].as_u64().unwrap();
    assert_eq!(ours["read_bytes"].as_u64().unwrap(), rb);
    assert_eq!(ours["write_bytes"], ours["ops"]["write"]["bytes"]);
    // Phases account for every byte.
    let phase_bytes: u64 = ours["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["read_bytes"].as_u64().unwrap() + p["write_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(phase_bytes, rb + ours["write_bytes"].as_u64().unwrap());
}

#[test]
fn summary_equals_duckdb_sequential() {
    check_against_duckdb("sequential");
}

#[test]
fn summary_equals_duckdb_random() {
    check_against_duckdb("random");
}

#[test]
fn access_pattern_tells_sequential_from_random() {
    let tmp = tempfile::tempdir().unwrap();
    let seq = json(&[
        "summary",
        synth(tmp.path(), "s", &workload(2, 1, 10, "sequential"))
            .to_str()
            .unwrap(),
        "--json",
    ]);
    let rnd = json(&[
        "summary",
        synth(tmp.path(), "r", &workload(2, 1, 10, "random"))
            .to_str()
            .unwrap(),
        "--json",
    ]);
    let share = |v: &serde_json::Value| v["access"]["read_sequential_share"].as_f64().unwrap();
    assert!(share(&seq) > 0.95, "sequential workload: {}", share(&seq));
    assert!(share(&rnd) < 0.3, "random workload: {}", share(&rnd));
    // Checkpoints are written front to back.
    assert!(seq["access"]["write_sequential_share"].as_f64().unwrap() > 0.99);
}

#[test]
fn summary_table_is_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), "t", &workload(2, 1, 10, "sequential"));
    let out = trace_cmd()
        .args(["summary", trace.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "peak read",
        "read sizes",
        "checkpoint",
        "rank",
        "/data/train/shard-",
    ] {
        assert!(text.contains(needle), "table lacks `{needle}`:\n{text}");
    }
}

/// A job started without a launcher has no rank in any row: the summary
/// says so, with the processes that stand for ranks there, and prints no
/// empty table of ranks.
#[test]
fn a_trace_without_ranks_says_so_and_counts_its_processes() {
    use iorepro_format::{EventRow, Op, Source, TraceWriter, WriterOptions};
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t");
    let mut w = TraceWriter::create(&trace, WriterOptions::new(Source::Synth)).unwrap();
    // Three processes: pids 10 and 11 on one host, pid 10 again on another.
    for (i, (host, pid)) in [("a", 10), ("a", 11), ("b", 10), ("a", 10)]
        .into_iter()
        .enumerate()
    {
        let i = i as i64;
        w.push(&EventRow {
            dur_ns: 10,
            pid,
            tid: pid,
            path: Some("/d/a"),
            fd: Some(3),
            offset: Some(i * 10),
            size: Some(10),
            ret: 10,
            ..EventRow::single(1_000 + i, host, "python", Op::Read)
        })
        .unwrap();
    }
    w.finish().unwrap();

    let out = trace_cmd()
        .args(["summary", trace.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("ranks none (no launcher rank variables; 3 processes)"),
        "{text}"
    );
    assert!(!text.contains("ranks 0"), "{text}");
    assert!(
        !text.lines().any(|l| l.starts_with("rank ")),
        "an empty table of ranks:\n{text}"
    );
    let v = json(&["summary", trace.to_str().unwrap(), "--json"]);
    assert_eq!(v["processes"], 3);
    assert_eq!(v["ranks"], serde_json::json!([]));

    // With ranks, the count and the table, and no `processes`.
    let ranked = synth(tmp.path(), "r", &workload(2, 1, 10, "sequential"));
    let v = json(&["summary", ranked.to_str().unwrap(), "--json"]);
    assert!(v.get("processes").is_none(), "{v}");
    let out = trace_cmd()
        .args(["summary", ranked.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ranks 2 "), "{text}");
}
