//! Bad input gets a one-line error naming the file and the problem, exit
//! status 2, and no panic.

use std::path::Path;

use assert_cmd::Command;
use iorepro_format::{EventRow, Op, Source, TraceWriter, WriterOptions};
use iorepro_tests::python::require_python;

fn good_trace(dir: &Path) {
    let mut w = TraceWriter::create(dir, WriterOptions::new(Source::Synth)).unwrap();
    for i in 0..100 {
        w.push(&EventRow {
            ts_ns: 1_000 + i,
            dur_ns: 10,
            host: "h",
            pid: 1,
            tid: 1,
            rank: Some(0),
            comm: "python",
            op: Op::Read,
            path: Some("/d/a"),
            fd: Some(3),
            offset: Some(i * 10),
            size: Some(10),
            ret: 10,
            flags: None,
            calls: 1,
            span_ns: None,
            path2: None,
            via: None,
            exchange: None,
            from_storage: None,
        })
        .unwrap();
    }
    w.finish().unwrap();
}

/// Runs `iorepro-trace ARGS`, asserts exit 2 and one `Error:` line that
/// mentions `needle`; returns the line.
fn fails(args: &[&str], needle: &str) -> String {
    let out = Command::cargo_bin("iorepro-trace")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "args {args:?}: stderr {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line, got: {err}");
    assert!(err.starts_with("Error: "), "{err}");
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
    err
}

fn segment(dir: &Path) -> std::path::PathBuf {
    dir.join("seg-000000.parquet")
}

#[test]
fn missing_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("t");
    good_trace(&d);
    std::fs::remove_file(d.join("manifest.json")).unwrap();
    let p = d.to_str().unwrap();
    fails(&["summary", p], "no manifest.json");
    fails(&["validate", p], p);
}

#[test]
fn truncated_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("t");
    good_trace(&d);
    let seg = segment(&d);
    let bytes = std::fs::read(&seg).unwrap();
    std::fs::write(&seg, &bytes[..bytes.len() / 2]).unwrap();
    fails(&["summary", d.to_str().unwrap()], "seg-000000.parquet");
}

#[test]
fn corrupt_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("t");
    good_trace(&d);
    let seg = segment(&d);
    let mut bytes = std::fs::read(&seg).unwrap();
    // Garble the column data but keep the footer: decoding must fail cleanly.
    for b in bytes.iter_mut().skip(8).take(600) {
        *b ^= 0x5a;
    }
    std::fs::write(&seg, &bytes).unwrap();
    fails(&["summary", d.to_str().unwrap()], "seg-000000.parquet");
    let out = Command::cargo_bin("iorepro-trace")
        .unwrap()
        .args(["validate", d.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn newer_schema_version() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("t");
    good_trace(&d);
    let m = d.join("manifest.json");
    let text = std::fs::read_to_string(&m)
        .unwrap()
        .replace("\"schema_version\": 1", "\"schema_version\": 7");
    std::fs::write(&m, text).unwrap();
    fails(
        &["summary", d.to_str().unwrap()],
        "schema_version 7 is newer",
    );
}

#[test]
fn malformed_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("t");
    good_trace(&d);
    std::fs::write(d.join("manifest.json"), "{\"format\": \"iorepro-trace\",").unwrap();
    fails(&["summary", d.to_str().unwrap()], "manifest.json");
    // A segment name that escapes the trace directory is refused.
    let text = r#"{"format":"iorepro-trace","schema_version":1,"tool_version":"x","source":"synth","hosts":[],
      "start_unix_ns":0,"end_unix_ns":0,"events":0,"dropped_events":0,"segments":["../../etc/passwd.parquet"]}"#;
    std::fs::write(d.join("manifest.json"), text).unwrap();
    fails(
        &["summary", d.to_str().unwrap()],
        "not a .parquet file name inside",
    );
}

#[test]
fn missing_and_mistyped_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing.parquet");
    let mistyped = tmp.path().join("mistyped.parquet");
    let script = format!(
        r#"
import pyarrow as pa, pyarrow.parquet as pq
cols = dict(ts=pa.array([1, 2], pa.int64()), dur_ns=pa.array([1, 1]), host=pa.array(["h", "h"]),
            pid=pa.array([1, 1]), tid=pa.array([1, 1]), rank=pa.array([0, 0]), comm=pa.array(["c", "c"]),
            op=pa.array(["read", "read"]), path=pa.array(["/a", "/a"]), fd=pa.array([3, 3]),
            offset=pa.array([0, 1]), size=pa.array([1, 1]), ret=pa.array([1, 1]), flags=pa.array([0, 0]))
m = dict(cols); del m["ret"]
pq.write_table(pa.table(m), {missing:?})
t = dict(cols); t["offset"] = pa.array([0.5, 1.5])
pq.write_table(pa.table(t), {mistyped:?})
"#,
        missing = missing.to_str().unwrap(),
        mistyped = mistyped.to_str().unwrap()
    );
    if require_python(&script, &["pyarrow"]).is_none() {
        return;
    }
    fails(
        &["summary", missing.to_str().unwrap()],
        "column `ret`: missing",
    );
    fails(
        &["summary", mistyped.to_str().unwrap()],
        "column `offset`: has type Float64",
    );
}

#[test]
fn unreadable_workloads() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let cases = [
        ("syntax.toml", "ranks = [", "syntax.toml"),
        ("unit.toml", "ranks = 2\n[dataset]\nfiles = 1\nfile_size = \"3 parsecs\"\nread_size = \"1k\"\n[training]\nsteps = 1\ncompute_time = \"1ms\"\nreads_per_step = 1\n", "unknown size unit"),
        ("missing.toml", "ranks = 2\n", "missing field"),
        ("zero.toml", "ranks = 0\n[dataset]\nfiles = 1\nfile_size = \"1k\"\nread_size = \"1k\"\n[training]\nsteps = 1\ncompute_time = \"1ms\"\nreads_per_step = 1\n", "ranks must be positive"),
    ];
    for (name, text, needle) in cases {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).unwrap();
        fails(
            &["synth", p.to_str().unwrap(), "-o", out.to_str().unwrap()],
            needle,
        );
    }
    fails(
        &[
            "synth",
            tmp.path().join("absent.toml").to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        "absent.toml",
    );
}
