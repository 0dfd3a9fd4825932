//! Shared by the analysis tests: synthetic traces with a known shape, the
//! `iorepro-trace` binary, and Python (DuckDB, XML) as an independent judge.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;

/// A DLIO-like workload: `ranks` ranks, an initial load, `checkpoints`
/// checkpoint bursts spaced `every` steps apart.
pub fn workload(ranks: u32, checkpoints: u32, every: u32, pattern: &str) -> String {
    format!(
        r#"
name = "test"
ranks = {ranks}
host = "node0"
seed = 7

[load]
bytes_per_rank = "96MiB"
read_size = "4MiB"

[dataset]
files = 16
file_size = "32MiB"
read_size = "512KiB"
pattern = "{pattern}"
loader_workers = 2

[training]
steps = {steps}
compute_time = "30ms"
reads_per_step = 6

[checkpoint]
every = {every}
bytes_per_rank = "64MiB"
write_size = "4MiB"
"#,
        steps = checkpoints * every + every / 2,
    )
}

pub fn trace_cmd() -> Command {
    Command::cargo_bin("iorepro-trace").expect("iorepro-trace binary")
}

/// Writes a synthetic trace for `toml` into `dir/name` and returns its path.
pub fn synth(dir: &Path, name: &str, toml: &str) -> PathBuf {
    let wl = dir.join(format!("{name}.toml"));
    std::fs::write(&wl, toml).unwrap();
    let out = dir.join(name);
    let st = trace_cmd()
        .args([
            "synth",
            wl.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--segment-events",
            "5000",
        ])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "synth failed: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    out
}

/// Runs `iorepro-trace ARGS` and parses its stdout as JSON.
pub fn json(args: &[&str]) -> serde_json::Value {
    let out = trace_cmd().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "iorepro-trace {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// Runs a Python snippet and parses what it prints as JSON.
pub fn python_json(code: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new("python3")
        .arg("-c")
        .arg(code)
        .args(args)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("python printed JSON")
}

pub fn count_kind(v: &serde_json::Value, kind: &str) -> usize {
    v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == kind)
        .count()
}
