//! `--cache`: what the page cache spares the storage in the plan's what-if.
//! A job captured reading its dataset three times (its pages dropped before
//! the first pass only, a save after each pass) says, through its rows'
//! `storage_bytes`, that its first epoch came from storage and the others
//! from memory. Planned at twice its ranks on slow storage, `--cache none`
//! takes every epoch's reads to the storage, `cold` only the first's, and
//! `as-traced` each epoch's traced share; the epochs' times follow. A trace
//! that does not say (a bundled sample, captured before the columns) plans
//! with `none` alone, and the others say why.

mod common;

use std::path::Path;

use common::*;
use iorepro_tests::capture::{can_capture, capture};
use iorepro_tests::samples::{sample, TORCH_DDP_SHARDS};
use serde_json::Value;

const JOB: &str = r#"
import os, sys, time
data, out = sys.argv[1], sys.argv[2]
files = sorted(os.path.join(data, f) for f in os.listdir(data))
os.sync()  # dirty pages are not dropped
for f in files:
    fd = os.open(f, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
for epoch in range(3):
    for f in files:
        with open(f, "rb") as fh:
            while fh.read(1 << 20):
                time.sleep(0.004)
    with open(os.path.join(out, f"ckpt-{epoch}.pt"), "wb") as fh:
        fh.write(b"\0" * (4 << 20))
        fh.flush()
        os.fsync(fh.fileno())
"#;

const FILES: usize = 8;
const FILE_BYTES: usize = 4 << 20;

/// The plan's epochs at 2 ranks on 32 MiB/s with `--cache MODE`.
fn planned(trace: &Path, mode: &str) -> Vec<Value> {
    let out = replay()
        .arg(trace)
        .args([
            "--plan-only",
            "--ranks",
            "2",
            "--bandwidth",
            "32MiB/s",
            "--json",
        ])
        .args(["--cache", mode])
        .output()
        .unwrap();
    let report = json_ok(&out);
    report["epochs_at_bandwidth"]
        .as_array()
        .unwrap_or_else(|| panic!("no epochs: {report}"))
        .clone()
}

#[test]
fn each_cache_mode_sends_its_share_of_the_reads_to_the_storage() {
    let scratch = iorepro_tests::bins::scratch("cache_plan");
    if !can_capture(&scratch) {
        return;
    }
    let (data, out) = (scratch.join("data"), scratch.join("out"));
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    for i in 0..FILES {
        let bytes: Vec<u8> = (0..FILE_BYTES).map(|b| (b * 31 + i) as u8).collect();
        std::fs::write(data.join(format!("shard-{i:02}.bin")), bytes).unwrap();
    }
    let script = scratch.join("job.py");
    std::fs::write(&script, JOB).unwrap();
    let trace = scratch.join("trace");
    let job = [
        "python3",
        script.to_str().unwrap(),
        data.to_str().unwrap(),
        out.to_str().unwrap(),
    ]
    .map(String::from);
    let o = capture(&trace, &[&data, &out], &job);
    assert!(o.status.success(), "{o:?}");

    let stored = |epochs: &[Value]| -> Vec<u64> {
        epochs.iter().map(|e| u(&e["storage_read_bytes"])).collect()
    };
    let none = planned(&trace, "none");
    let cold = planned(&trace, "cold");
    let traced = planned(&trace, "as-traced");
    eprintln!(
        "storage bytes per epoch: none {:?}, cold {:?}, as-traced {:?}",
        stored(&none),
        stored(&cold),
        stored(&traced)
    );
    assert_eq!(none.len(), 3, "three epochs: {none:?}");
    assert_eq!(cold.len(), 3);
    assert_eq!(traced.len(), 3);
    let read: Vec<u64> = none.iter().map(|e| u(&e["read_bytes"])).collect();
    assert_eq!(stored(&none), read, "--cache none: every read");
    // The first epoch came from storage: cold and as-traced agree there.
    for plan in [&cold, &traced] {
        let first = stored(plan)[0] as f64;
        assert!(
            first >= 0.9 * read[0] as f64,
            "first epoch {first} of {}",
            read[0]
        );
        for (e, (&s, &r)) in stored(plan).iter().zip(&read).enumerate().skip(1) {
            assert!(
                s <= r / 10,
                "epoch {e}: {s} of {r} bytes from storage; memory served it"
            );
        }
    }
    // Memory-served epochs take their compute, not the storage's time.
    let secs = |plan: &[Value], e: usize| plan[e]["seconds"].as_f64().unwrap();
    assert!(secs(&cold, 2) < secs(&none, 2), "{cold:?} / {none:?}");

    // A replay that reads everything from storage (--evict-reads) says it
    // asked the storage for more than the traced job did.
    let target = scratch.join("target");
    let report = replay_ok(
        &trace,
        &target,
        &[
            "--ranks",
            "2",
            "--timing",
            "afap",
            "--evict-reads",
            "--json",
        ],
    );
    let line = report["verdict"]["reads_from"].as_str().unwrap_or_default();
    eprintln!("the replay's reads came from: {line}");
    assert!(
        line.contains("the replay asks the storage for more than the job did"),
        "{line}"
    );
}

#[test]
fn a_trace_that_does_not_say_plans_with_cache_none_only() {
    let trace = sample(TORCH_DDP_SHARDS);
    for mode in ["cold", "as-traced"] {
        let out = replay()
            .arg(&trace)
            .args(["--plan-only", "--ranks", "4", "--cache", mode])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{mode}: {stderr}");
        assert!(
            stderr.contains("this trace does not say it"),
            "{mode}: {stderr}"
        );
    }
    let out = replay()
        .arg(&trace)
        .args(["--plan-only", "--ranks", "4", "--cache", "none"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}
