//! Phase detection finds what a workload was built to have: exactly K
//! checkpoint spikes, one load burst at the start, steady reading between —
//! also with a log writer adding small writes all along, and on a real job
//! captured with strace.

mod analysis_util;

use std::path::Path;

use analysis_util::*;
use iorepro_format::{EventRow, Op, Source, TraceReader, TraceWriter, WriterOptions};

fn phases(trace: &Path) -> serde_json::Value {
    json(&["phases", trace.to_str().unwrap(), "--json"])
}

#[test]
fn finds_exactly_k_checkpoints() {
    let tmp = tempfile::tempdir().unwrap();
    for (ranks, k, every) in [(4, 1, 10), (4, 3, 12), (8, 5, 6), (2, 2, 40)] {
        let trace = synth(
            tmp.path(),
            &format!("k{k}r{ranks}"),
            &workload(ranks, k, every, "sequential"),
        );
        let p = phases(&trace);
        assert_eq!(
            count_kind(&p, "checkpoint"),
            k as usize,
            "ranks {ranks}, K {k}: {p:#}"
        );
        assert_eq!(count_kind(&p, "load"), 1, "one load burst: {p:#}");
        let list = p["phases"].as_array().unwrap();
        assert_eq!(list[0]["kind"], "load", "{p:#}");
        // Every checkpoint involves all ranks writing together.
        for c in list.iter().filter(|c| c["kind"] == "checkpoint") {
            assert_eq!(c["max_writers"], ranks, "{c}");
            assert_eq!(
                c["write_bytes"].as_u64().unwrap(),
                ranks as u64 * (64 << 20)
            );
        }
    }
}

/// Copies a trace, adding what a real job has between checkpoints: a logger
/// appending a line every 20 ms and a metrics file flushed now and then.
fn with_log_noise(src: &Path, dst: &Path) {
    let reader = TraceReader::open(src).unwrap();
    let (start, end) = (
        reader.manifest().start_unix_ns,
        reader.manifest().end_unix_ns,
    );
    let mut w = TraceWriter::create(dst, WriterOptions::new(Source::Synth)).unwrap();
    for b in reader.batches().unwrap() {
        w.write_batch(&b.unwrap()).unwrap();
    }
    let mut t = start;
    let mut off = 0i64;
    let mut n = 0;
    while t < end {
        let size = if n % 50 == 0 { 256 << 10 } else { 200 };
        w.push(&EventRow {
            ts_ns: t,
            dur_ns: 2_000,
            host: "node0",
            pid: 1000,
            tid: 1001,
            rank: Some(0),
            comm: "python",
            op: Op::Write,
            path: Some("/logs/train.log"),
            fd: Some(3),
            offset: Some(off),
            size: Some(size),
            ret: size,
            flags: None,
            calls: 1,
            span_ns: None,
            path2: None,
            via: None,
            exchange: None,
            from_storage: None,
        })
        .unwrap();
        off += size;
        t += 20_000_000;
        n += 1;
    }
    w.finish().unwrap();
}

#[test]
fn log_writes_between_checkpoints_are_not_checkpoints() {
    let tmp = tempfile::tempdir().unwrap();
    let clean = synth(tmp.path(), "clean", &workload(4, 3, 12, "sequential"));
    let noisy = tmp.path().join("noisy");
    with_log_noise(&clean, &noisy);
    let p = phases(&noisy);
    assert_eq!(count_kind(&p, "checkpoint"), 3, "{p:#}");
    assert_eq!(count_kind(&p, "load"), 1, "{p:#}");
}

#[test]
fn no_checkpoint_no_spike() {
    let tmp = tempfile::tempdir().unwrap();
    let toml = workload(4, 1, 10, "random").replace("[checkpoint]", "[unused]");
    let toml: String = toml.split("[unused]").next().unwrap().to_string();
    let trace = synth(tmp.path(), "nock", &toml);
    let noisy = tmp.path().join("noisy");
    with_log_noise(&trace, &noisy);
    let p = phases(&noisy);
    assert_eq!(count_kind(&p, "checkpoint"), 0, "{p:#}");
    assert!(count_kind(&p, "read") >= 1, "{p:#}");
}

/// A small training-like Python job: loads "weights", reads a dataset in
/// steps with compute in between, logs every step, and saves K checkpoints
/// (write + fsync), then idles. Captured with strace and imported.
const JOB: &str = r#"
import os, sys, time
d = sys.argv[1]; k = int(sys.argv[2])
blob = os.urandom(1 << 20)
with open(f"{d}/weights.bin", "wb") as f:
    for _ in range(48): f.write(blob)
with open(f"{d}/data.bin", "wb") as f:
    for _ in range(8): f.write(blob)
time.sleep(1.5)
with open(f"{d}/weights.bin", "rb") as f:
    while f.read(4 << 20): pass
log = open(f"{d}/train.log", "a")
for ck in range(k):
    for step in range(12):
        with open(f"{d}/data.bin", "rb") as f:
            f.seek((step % 8) << 20)
            f.read(1 << 20)
        log.write(f"step {step} loss 0.1\n"); log.flush()
        time.sleep(0.04)
    with open(f"{d}/ckpt-{ck}.pt", "wb") as f:
        for _ in range(32): f.write(blob)
        f.flush(); os.fsync(f.fileno())
for step in range(6):
    with open(f"{d}/data.bin", "rb") as f:
        f.read(1 << 20)
    time.sleep(0.04)
"#;

#[test]
fn finds_checkpoints_in_a_captured_job() {
    if std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("strace is not installed: cannot capture a job here; skipping");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("job");
    std::fs::create_dir(&data).unwrap();
    let log = tmp.path().join("strace.txt");
    let k = 3;
    let st = std::process::Command::new("strace")
        .args(["-f", "-ttt", "-T", "-y", "-e", "trace=%file,%desc", "-o"])
        .arg(&log)
        .args(["python3", "-c", JOB, data.to_str().unwrap(), &k.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let trace = tmp.path().join("captured");
    let out = trace_cmd()
        .args([
            "import",
            "--strace",
            log.to_str().unwrap(),
            "-o",
            trace.to_str().unwrap(),
            "--rank",
            "0",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = json(&["summary", trace.to_str().unwrap(), "--json"]);
    // The job wrote 48 + 8 MiB of inputs and K checkpoints of 32 MiB, plus its log.
    let w = s["write_bytes"].as_u64().unwrap();
    assert!(
        w >= (56 + 32 * k) << 20 && w < (57 + 32 * k) << 20,
        "write bytes {w}"
    );
    let p = phases(&trace);
    // The dataset files written at the start are one more write burst.
    assert_eq!(count_kind(&p, "checkpoint"), k as usize + 1, "{p:#}");
    // Python's start-up (imports before the job's first data call) is one
    // metadata phase. (The one `load` this test used to find was that
    // start-up's library reads; the weights read after the pause is found
    // as `read`.)
    assert_eq!(p["phases"][0]["kind"], "metadata", "{p:#}");
    let weights = p["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|ph| ph["read_bytes"].as_u64().unwrap() >= 48 << 20);
    assert!(
        weights.is_some_and(|ph| ph["kind"] == "read" || ph["kind"] == "load"),
        "{p:#}"
    );
    assert!(
        count_kind(&p, "idle") >= 1,
        "the 1.5 s pause is idle: {p:#}"
    );
}

fn sample(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples")
        .join(name)
}

fn kinds(p: &serde_json::Value) -> Vec<&str> {
    p["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect()
}

/// The bundled captures have the phases their NOTE.md describes: every
/// checkpoint found (all of its bytes, both ranks), the load found whatever
/// the batch size.
#[test]
fn bundled_captures_have_the_phases_their_notes_describe() {
    let p = phases(&sample("torch-ddp-dcp"));
    assert_eq!(
        kinds(&p),
        [
            "load",
            "read",
            "checkpoint",
            "idle",
            "read",
            "checkpoint",
            "read",
            "idle",
            "checkpoint"
        ],
        "{p:#}"
    );
    for c in p["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "checkpoint")
    {
        // Each save writes 15,829,000 bytes (three saves: 47,487,000).
        assert_eq!(c["write_bytes"], 15_829_000, "{c}");
        assert_eq!(c["max_writers"], 2, "{c}");
    }
    // The loader's read-ahead: 32 files, about 11 MiB, in the first 0.25 s.
    let load = &p["phases"][0];
    assert!(load["end_s"].as_f64().unwrap() < 0.25, "{load}");
    assert!(load["read_bytes"].as_u64().unwrap() > 10 << 20, "{load}");

    // Restored from a checkpoint: the restore and the first batches are the load.
    let p = phases(&sample("torch-ddp-dcp-resume"));
    assert_eq!(kinds(&p), ["load", "read", "checkpoint"], "{p:#}");
    assert!(
        p["phases"][0]["read_bytes"].as_u64().unwrap() > 10_842_958,
        "{p:#}"
    );
    assert_eq!(p["phases"][2]["write_bytes"], 15_829_000);

    // Batches of 4: each epoch read ahead at once, then compute.
    let p = phases(&sample("torch-ddp-dcp-batch4"));
    assert_eq!(kinds(&p), ["load", "idle", "read", "checkpoint"], "{p:#}");
    assert_eq!(
        p["phases"][0]["read_bytes"].as_u64(),
        p["phases"][2]["read_bytes"].as_u64()
    );
    assert_eq!(p["phases"][3]["write_bytes"], 15_828_999);
}

/// One call of [`save_after_a_lookup`]'s job: when, what, on which path,
/// at which offset, its result and its open flags.
type Call = (i64, Op, &'static str, Option<i64>, i64, Option<i32>);

/// A job that reads, then saves the way PyTorch Lightning does: it looks up
/// the checkpoint's path (not there yet), serialises its state in memory
/// for a while, then writes the file in one go.
fn save_after_a_lookup(dir: &Path) -> std::path::PathBuf {
    const S: i64 = 1_000_000_000;
    const MS: i64 = S / 1000;
    let t0 = 1_700_000_000 * S;
    let mut calls: Vec<Call> = Vec::new();
    let mut read = |from: i64, to: i64| {
        calls.push((
            from,
            Op::Open,
            "/data/train.bin",
            None,
            5,
            Some(libc::O_RDONLY),
        ));
        let (mut t, mut off) = (from + MS, 0);
        while t < to {
            calls.push((t, Op::Read, "/data/train.bin", Some(off), 1 << 20, None));
            (t, off) = (t + 10 * MS, off + (1 << 20));
        }
        calls.push((to, Op::Close, "/data/train.bin", None, 0, None));
    };
    read(t0, t0 + 2 * S);
    read(t0 + 2700 * MS, t0 + 4700 * MS);
    // The lookup at 2.1 s, the file made at 2.5 s and written in 0.1 s.
    let ckpt = "/ckpt/model.pt";
    calls.push((
        t0 + 2100 * MS,
        Op::Stat,
        ckpt,
        None,
        -libc::ENOENT as i64,
        None,
    ));
    let create = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
    calls.push((t0 + 2500 * MS, Op::Open, ckpt, None, 5, Some(create)));
    for k in 0..8 {
        calls.push((
            t0 + 2500 * MS + k * 12 * MS,
            Op::Write,
            ckpt,
            Some(k << 23),
            8 << 20,
            None,
        ));
    }
    calls.push((t0 + 2600 * MS, Op::Close, ckpt, None, 0, None));
    calls.sort_by_key(|c| c.0);

    let out = dir.join("lookup-save");
    let mut w = TraceWriter::create(&out, WriterOptions::new(Source::Synth)).unwrap();
    for (ts_ns, op, path, offset, ret, flags) in calls {
        w.push(&EventRow {
            ts_ns,
            dur_ns: 100_000,
            host: "node0",
            pid: 1000,
            tid: 1000,
            rank: Some(0),
            comm: "python",
            op,
            path: Some(path),
            fd: if op == Op::Stat { None } else { Some(5) },
            offset,
            size: offset.map(|_| ret),
            ret,
            flags,
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
    out
}

#[test]
fn a_save_begins_where_the_job_looked_up_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let p = phases(&save_after_a_lookup(tmp.path()));
    let list = p["phases"].as_array().unwrap();
    let saves: Vec<&serde_json::Value> =
        list.iter().filter(|c| c["kind"] == "checkpoint").collect();
    assert_eq!(saves.len(), 1, "{p:#}");
    let start = saves[0]["start_s"].as_f64().unwrap();
    let end = saves[0]["end_s"].as_f64().unwrap();
    // From the lookup (2.1 s after the first call) to the last write's end.
    assert!((start - 2.1).abs() < 0.005, "{p:#}");
    assert!((2.58..2.7).contains(&end), "{p:#}");
    // What came before it ends there; the reading is whole.
    let before = list
        .iter()
        .rev()
        .find(|c| c["end_s"].as_f64().unwrap() <= start + 1e-9)
        .unwrap();
    assert!(
        (before["end_s"].as_f64().unwrap() - start).abs() < 1e-9,
        "{p:#}"
    );
    let read: u64 = list.iter().map(|c| c["read_bytes"].as_u64().unwrap()).sum();
    assert_eq!(read, 400 << 20, "{p:#}");
}
