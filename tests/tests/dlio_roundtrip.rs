//! A DLIO workload told from a trace, checked by running it: DLIO 2.0.0's
//! own run at 2 processes (npz files, a PyTorch loader with 2 workers, a
//! rank-0 checkpoint at each epoch's end) is captured, `iorepro-trace export
//! --dlio` tells its workload, and the settings must be the ones it ran
//! (equal, or within 5 %). Then DLIO runs what was told, and that run must
//! read the dataset's bytes and write the checkpoints' within 1 % of the
//! first, with as many saves, and take its epochs within 10 % of the
//! first's (each within 20 %), by DLIO's own record of both
//! (`per_epoch_stats.json`); where this machine's speed drifted between
//! the two, the pair runs again back to back and that pair is judged.
//!
//! The step time in a trace holds DLIO's own time per step besides its
//! `computation_time` (its barrier and bookkeeping): the first run of the
//! told workload measures it (its traced step less the computation it was
//! told), and the workload is told again with `--step-overhead` that much,
//! as a user of another machine would calibrate it. The figures are printed.
//!
//! Last, the captured run is replayed at 2 ranks into MLPerf Storage's
//! results tree (`--mlperf-results`), which must hold what DLIO's own run
//! wrote where `mlpstorage` reads it: `summary.json`'s keys and kinds,
//! `per_epoch_stats.json`'s epochs, blocks and saves, and the workload
//! under `dlio_config/config.yaml`, read with DLIO's own YAML parser.

use std::path::Path;
use std::process::Command;

use iorepro_format::{Op, TraceReader};
use iorepro_tests::bins::{bin, run_json, scratch};
use iorepro_tests::capture::{can_capture, capture};
use iorepro_tests::dlio::{epoch_durations, Dlio};
use serde_json::Value;

const PROCESSES: u32 = 2;
const FILES: u64 = 64;
const RECORD: u64 = 256 << 10;
const BATCH: u64 = 2;
const WORKERS: u64 = 2;
const EPOCHS: u64 = 3;
const COMPUTE_S: f64 = 0.05;
const MODEL: u64 = 4 << 20;

/// The workload DLIO runs first, as MLPerf Storage's are written.
fn workload(data: &Path, ckpt: &Path) -> String {
    format!(
        "model: ran\nframework: pytorch\n\nworkflow:\n  generate_data: False\n  train: True\n  \
         checkpoint: True\n\ndataset:\n  data_folder: {}\n  format: npz\n  num_files_train: \
         {FILES}\n  num_samples_per_file: 1\n  record_length: {RECORD}\n\nreader:\n  \
         data_loader: pytorch\n  batch_size: {BATCH}\n  read_threads: {WORKERS}\n  \
         file_shuffle: seed\n  sample_shuffle: seed\n\ntrain:\n  epochs: {EPOCHS}\n  \
         computation_time: {COMPUTE_S}\n\ncheckpoint:\n  checkpoint_folder: {}\n  \
         epochs_between_checkpoints: 1\n  model_size: {MODEL}\n\nmetric:\n  au: 0.90\n",
        data.display(),
        ckpt.display()
    )
}

/// `iorepro-trace export --dlio` of `trace` into `conf`, as workload
/// `name`: the settings, by key.
fn export(trace: &Path, conf: &Path, name: &str, overhead_s: f64) -> serde_json::Value {
    let w = run_json(
        Command::new(bin("iorepro-trace"))
            .args(["export", "--dlio"])
            .arg(conf)
            .args(["--name", name, "--json", "--step-overhead"])
            .arg(overhead_s.to_string())
            .arg(trace),
    );
    let mut by_key = serde_json::Map::new();
    for f in w["fields"].as_array().unwrap() {
        by_key.insert(f["key"].as_str().unwrap().to_string(), f["value"].clone());
    }
    serde_json::Value::Object(by_key)
}

/// Bytes read from the dataset and written to the checkpoints, in a trace.
fn bytes(trace: &Path, data: &Path, ckpt: &Path) -> (u64, u64) {
    let reader = TraceReader::open(trace).unwrap();
    let (data, ckpt) = (data.to_str().unwrap(), ckpt.to_str().unwrap());
    let (mut read, mut written) = (0, 0);
    for batch in reader.events().unwrap() {
        let ev = batch.unwrap();
        for i in 0..ev.len() {
            let (Some(p), ret) = (ev.path_at(i), ev.ret().value(i).max(0) as u64) else {
                continue;
            };
            match ev.op(i) {
                Op::Read if p.starts_with(data) => read += ret,
                Op::Write if p.starts_with(ckpt) => written += ret,
                _ => {}
            }
        }
    }
    (read, written)
}

/// Runs DLIO's workload `name` in `conf` under the collector into `trace`,
/// its own record into `out`.
fn run_captured(dlio: &Dlio, conf: &Path, name: &str, trace: &Path, out: &Path, dirs: [&Path; 2]) {
    let argv = dlio.command(PROCESSES, conf, name, out, &[]);
    let o = capture(trace, &dirs, &argv);
    assert!(
        o.status.success(),
        "DLIO under the collector failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The told run's epochs against the first's: their sum within 10 %, each
/// within 20 % (an epoch is about a second on 2 cores, where one epoch of
/// the same run varies by 0.1 s from run to run).
fn epochs_alike(ran: &[f64], told: &[f64]) -> Result<(), String> {
    let (t1, t3) = (ran.iter().sum::<f64>(), told.iter().sum::<f64>());
    if off(t3, t1) > 0.10 {
        return Err(format!("epochs {t1} s ran, {t3} s told"));
    }
    for (i, (a, b)) in ran.iter().zip(told).enumerate() {
        if off(*b, *a) > 0.20 {
            return Err(format!("epoch {}: {a} s ran, {b} s told", i + 1));
        }
    }
    Ok(())
}

fn off(got: f64, want: f64) -> f64 {
    (got - want).abs() / want
}

#[test]
fn dlio_own_run_comes_back_and_what_was_told_runs_like_it() {
    let s = scratch("dlio_roundtrip");
    if !can_capture(&s) {
        return;
    }
    let Some(dlio) = Dlio::find() else { return };
    let (data, ckpt) = (s.join("data"), s.join("ckpt"));
    let conf = dlio.prepare(PROCESSES, &s, "ran", &workload(&data, &ckpt));
    // Once uncaptured first, so that every run compared writes its saves
    // over the last run's files: a first write into memory the machine
    // has not used yet costs more on a VM that returns free pages to its
    // host (0.13 s against 0.03 s for these saves), which is no setting's.
    let argv = dlio.command(PROCESSES, &conf, "ran", &s.join("out-warm"), &[]);
    iorepro_tests::bins::run_ok(Command::new(&argv[0]).args(&argv[1..]));

    // DLIO's own run, captured, and what the trace tells of it.
    let (traced, out1) = (s.join("traced"), s.join("out-ran"));
    run_captured(&dlio, &conf, "ran", &traced, &out1, [&data, &ckpt]);
    let told = s.join("told");
    let w = export(&traced, &told, "told", 0.0);
    eprintln!("told: {}", serde_json::to_string(&w).unwrap());
    for (key, want) in [
        ("dataset.num_files_train", FILES),
        ("reader.batch_size", BATCH),
        ("reader.read_threads", WORKERS),
        ("train.epochs", EPOCHS),
        ("checkpoint.checkpoint_after_epoch", 1),
        ("checkpoint.epochs_between_checkpoints", 1),
        ("checkpoint.model_size", MODEL),
        // DLIO's default: one layer file a save.
        ("checkpoint.num_layers", 1),
    ] {
        assert_eq!(w[key].as_u64(), Some(want), "{key}");
    }
    for (key, want) in [
        ("dataset.format", "npz"),
        ("dataset.data_folder", data.to_str().unwrap()),
        ("checkpoint.checkpoint_folder", ckpt.to_str().unwrap()),
        ("checkpoint.type", "rank_zero"),
        ("reader.file_shuffle", "seed"),
    ] {
        assert_eq!(w[key].as_str(), Some(want), "{key}");
    }
    let record = w["dataset.record_length"].as_u64().unwrap();
    assert!(
        off(record as f64, RECORD as f64) <= 0.05,
        "record_length {record}"
    );
    let told_step = w["train.computation_time"].as_f64().unwrap();

    // DLIO's own time a step on this machine: a run of what was told, its
    // traced step less the computation it was told.
    let (trace2, out2) = (s.join("run-told"), s.join("out-told"));
    run_captured(&dlio, &told, "told", &trace2, &out2, [&data, &ckpt]);
    let again = export(&trace2, &s.join("told-again"), "again", 0.0);
    let overhead = (again["train.computation_time"].as_f64().unwrap() - told_step).max(0.0);
    let w = export(&traced, &told, "told", overhead);
    let compute = w["train.computation_time"].as_f64().unwrap();
    eprintln!(
        "computation_time: {told_step} s told uncalibrated, DLIO's own time a step {overhead:.4} \
         s, {compute} s told calibrated, {COMPUTE_S} s ran ({:.1} % off)",
        100.0 * off(compute, COMPUTE_S)
    );
    assert!(
        off(compute, COMPUTE_S) <= 0.05,
        "computation_time {compute}"
    );

    // What was told, run: the same bytes, saves and epoch times.
    let (trace3, out3) = (s.join("run-calibrated"), s.join("out-calibrated"));
    run_captured(&dlio, &told, "told", &trace3, &out3, [&data, &ckpt]);
    let (r1, w1) = bytes(&traced, &data, &ckpt);
    let (r3, w3) = bytes(&trace3, &data, &ckpt);
    let (e1, e3) = (epoch_durations(&out1), epoch_durations(&out3));
    eprintln!(
        "dataset bytes {r1} -> {r3}, checkpoint bytes {w1} -> {w3}, epochs {e1:?} s -> {e3:?} s"
    );
    assert!(
        off(r3 as f64, r1 as f64) <= 0.01,
        "dataset bytes {r1} -> {r3}"
    );
    assert!(
        off(w3 as f64, w1 as f64) <= 0.01,
        "checkpoint bytes {w1} -> {w3}"
    );
    assert_eq!(e1.len(), EPOCHS as usize);
    assert_eq!(e3.len(), e1.len());
    // This machine's speed drifts by up to half within an hour, so two
    // runs minutes apart can differ by more than any setting: where the
    // first pair is off, the pair runs once more back to back and that
    // pair is judged.
    if let Err(why) = epochs_alike(&e1, &e3) {
        eprintln!("{why}: both run again, back to back");
        // A workload's name is its file's in `conf`, and names its outputs.
        let again = |conf: &Path, name: &str| {
            let out = s.join(format!("out-{name}-rerun"));
            let trace = s.join(format!("{name}-rerun"));
            run_captured(&dlio, conf, name, &trace, &out, [&data, &ckpt]);
            epoch_durations(&out)
        };
        let (e1, e3) = (again(&conf, "ran"), again(&told, "told"));
        eprintln!("epochs {e1:?} s -> {e3:?} s");
        epochs_alike(&e1, &e3).unwrap_or_else(|why| panic!("{why}"));
    }

    // The captured run replayed into MLPerf Storage's results tree.
    let results = s.join("mlperf-results");
    iorepro_tests::bins::run_ok(
        Command::new(bin("iorepro-replay"))
            .arg(&traced)
            .arg("--target")
            .arg(s.join("replay-target"))
            .args(["--ranks", "2", "--timing", "original"])
            .arg("--mlperf-results")
            .arg(&results)
            .args(["--mlperf-model", "unet3d_like"]),
    );
    let run = only_run(&results.join("training/unet3d_like/run"));
    mlperf_run_holds_what_dlio_writes(&dlio, &run, &out1);
}

/// The one run directory under `dir`.
fn only_run(dir: &Path) -> std::path::PathBuf {
    let runs: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.into_iter().next().unwrap()
}

fn json_of(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A JSON value's kind, to hold a key's value against DLIO's.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// The replay's run `ours` against DLIO's own run directory `theirs`.
fn mlperf_run_holds_what_dlio_writes(dlio: &Dlio, ours: &Path, theirs: &Path) {
    // summary.json: what MLPerf Storage's report generator reads of a run
    // (its shape, the hosts, when, the metrics), of the kind DLIO writes.
    let (a, b) = (
        json_of(&ours.join("summary.json")),
        json_of(&theirs.join("summary.json")),
    );
    for key in [
        "num_accelerators",
        "num_hosts",
        "hostname",
        "host_memory_GB",
        "host_cpu_count",
        "start",
        "end",
        "epochs",
        "num_files_train",
        "num_samples_per_file",
        "metric",
    ] {
        assert_eq!(
            kind(&a[key]),
            kind(&b[key]),
            "summary.json {key}: {} vs DLIO's {}",
            a[key],
            b[key]
        );
    }
    for (key, theirs) in b["metric"].as_object().unwrap() {
        assert_eq!(
            kind(&a["metric"][key]),
            kind(theirs),
            "metric {key}: {}",
            a["metric"]
        );
    }
    assert_eq!(a["num_accelerators"], 2);
    assert_eq!(a["epochs"], b["epochs"]);
    assert_eq!(a["num_files_train"], b["num_files_train"]);
    let aus = a["metric"]["train_au_percentage"].as_array().unwrap();
    assert_eq!(aus.len(), EPOCHS as usize, "{}", a["metric"]);
    assert!(
        aus.iter()
            .all(|au| (0.0..=100.0).contains(&au.as_f64().unwrap())),
        "{aus:?}"
    );
    assert!(
        a["metric"]["train_throughput_mean_samples_per_second"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    eprintln!(
        "mlperf results: AU {} (DLIO's own run {}), {} samples/s (DLIO's {})",
        a["metric"]["train_au_mean_percentage"],
        b["metric"]["train_au_mean_percentage"],
        a["metric"]["train_throughput_mean_samples_per_second"],
        b["metric"]["train_throughput_mean_samples_per_second"]
    );

    // per_epoch_stats.json: the same epochs, each with its block and save.
    let (a, b) = (
        json_of(&ours.join("per_epoch_stats.json")),
        json_of(&theirs.join("per_epoch_stats.json")),
    );
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(keys(&a), keys(&b), "epochs");
    for (epoch, theirs) in b.as_object().unwrap() {
        let ours = &a[epoch];
        let mut want = keys(theirs);
        want.sort();
        let mut got = keys(ours);
        got.sort();
        assert_eq!(got, want, "epoch {epoch}: {ours}");
        for part in ["start", "end", "duration"] {
            assert_eq!(
                kind(&ours[part]),
                kind(&theirs[part]),
                "epoch {epoch} {part}"
            );
            assert_eq!(kind(&ours["block1"][part]), kind(&theirs["block1"][part]));
        }
        // DLIO's stamps, to the microsecond.
        let stamp = ours["start"].as_str().unwrap();
        assert_eq!(
            stamp.len(),
            theirs["start"].as_str().unwrap().len(),
            "{stamp}"
        );
    }

    // The workload, read as DLIO and mlpstorage read it (PyYAML).
    let read = |path: &Path| -> Value {
        let out = Command::new(dlio.python())
            .args([
                "-c",
                "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
            ])
            .arg(path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (a, b) = (
        read(&ours.join("dlio_config/config.yaml")),
        read(&theirs.join("dlio_config/config.yaml")),
    );
    let (a, b) = (&a["workload"], &b["workload"]);
    assert_eq!(a["model"]["name"], "unet3d_like", "{a}");
    for key in ["generate_data", "train", "checkpoint"] {
        assert_eq!(a["workflow"][key], b["workflow"][key], "workflow.{key}");
    }
    for (section, key) in [
        ("dataset", "num_files_train"),
        ("dataset", "format"),
        ("reader", "batch_size"),
        ("reader", "read_threads"),
        ("train", "epochs"),
        ("checkpoint", "model_size"),
    ] {
        assert_eq!(a[section][key], b[section][key], "{section}.{key}");
    }
    assert!(ours.read_dir().unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with("_metadata.json")));
}
