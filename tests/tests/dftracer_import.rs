//! DFTracer's record of a DLIO run against the collector's, of the same
//! run: DLIO 2.0.0 at 2 processes with its DFTracer profiler on
//! (`DFTRACER_ENABLE=1`, `DFTRACER_INIT=FUNCTION`, with the calls'
//! arguments: `DFTRACER_INC_METADATA=1`), under the collector. `iorepro-trace
//! import --dftracer` of DLIO's `.pfw` files must name the same dataset and
//! checkpoint files as the capture and give each the same bytes: every
//! dataset file's bytes per epoch (its first visit, its second, ...) and
//! every checkpoint file's bytes written.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use iorepro_format::{Op, TraceReader};
use iorepro_tests::bins::{bin, run_ok, scratch};
use iorepro_tests::capture::{can_capture, capture};
use iorepro_tests::dlio::Dlio;

const PROCESSES: u32 = 2;
const EPOCHS: usize = 2;

fn workload(data: &Path, ckpt: &Path) -> String {
    format!(
        "model: seen_twice\nframework: pytorch\n\nworkflow:\n  generate_data: False\n  \
         train: True\n  checkpoint: True\n\ndataset:\n  data_folder: {}\n  format: npz\n  \
         num_files_train: 16\n  num_samples_per_file: 1\n  record_length: 65536\n\nreader:\n  \
         data_loader: pytorch\n  batch_size: 2\n  read_threads: 1\n\ntrain:\n  epochs: \
         {EPOCHS}\n  computation_time: 0.01\n\ncheckpoint:\n  checkpoint_folder: {}\n  \
         epochs_between_checkpoints: 1\n  model_size: 1048576\n",
        data.display(),
        ckpt.display()
    )
}

/// What a trace read of each dataset file per visit (the bytes read from
/// its n-th open to its next), and wrote to each checkpoint file.
#[derive(Debug, PartialEq)]
struct Bytes {
    read: BTreeMap<(String, usize), u64>,
    written: BTreeMap<String, u64>,
}

fn bytes(trace: &Path, data: &Path, ckpt: &Path) -> Bytes {
    let reader = TraceReader::open(trace).unwrap();
    let mut rows = Vec::new();
    for batch in reader.events().unwrap() {
        let ev = batch.unwrap();
        for i in 0..ev.len() {
            if let Some(p) = ev.path_at(i) {
                rows.push((ev.ts().value(i), ev.op(i), p.to_string(), ev.ret().value(i)));
            }
        }
    }
    rows.sort_by_key(|r| r.0);
    let (mut read, mut written) = (BTreeMap::new(), BTreeMap::new());
    let mut visits: BTreeMap<String, usize> = BTreeMap::new();
    for (_, op, path, ret) in rows {
        match op {
            Op::Open if path.starts_with(data.to_str().unwrap()) => {
                *visits.entry(path).or_default() += 1;
            }
            Op::Read if path.starts_with(data.to_str().unwrap()) => {
                let visit = visits.get(&path).copied().unwrap_or(0);
                *read.entry((path, visit)).or_default() += ret.max(0) as u64;
            }
            Op::Write if path.starts_with(ckpt.to_str().unwrap()) => {
                *written.entry(path).or_default() += ret.max(0) as u64;
            }
            _ => {}
        }
    }
    Bytes { read, written }
}

#[test]
fn dftracer_and_the_collector_see_the_same_files_and_bytes_per_epoch() {
    let s = scratch("dftracer_import");
    if !can_capture(&s) {
        return;
    }
    let Some(dlio) = Dlio::find() else { return };
    let (data, ckpt) = (s.join("data"), s.join("ckpt"));
    let conf = dlio.prepare(PROCESSES, &s, "twice", &workload(&data, &ckpt));

    // DLIO with its DFTracer profiler on, under the collector.
    let out = s.join("out");
    let mut argv = dlio.command(PROCESSES, &conf, "twice", &out, &[]);
    let env = [
        "DFTRACER_ENABLE=1",
        "DFTRACER_INIT=FUNCTION",
        "DFTRACER_INC_METADATA=1",
    ];
    for (i, var) in env.iter().enumerate() {
        argv.insert(1 + 2 * i, "-x".into());
        argv.insert(2 + 2 * i, var.to_string());
    }
    let traced = s.join("captured");
    let o = capture(&traced, &[&data, &ckpt], &argv);
    assert!(
        o.status.success(),
        "DLIO under the collector failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let imported = s.join("imported");
    run_ok(
        Command::new(bin("iorepro-trace"))
            .args(["import", "--dftracer"])
            .arg(&out)
            .arg("--out")
            .arg(&imported),
    );

    let (a, b) = (bytes(&traced, &data, &ckpt), bytes(&imported, &data, &ckpt));
    let total = |m: &BTreeMap<(String, usize), u64>| m.values().sum::<u64>();
    eprintln!(
        "captured: {} dataset visits, {} B read, {} checkpoint files, {} B written; \
         DFTracer: {} visits, {} B, {} files, {} B",
        a.read.len(),
        total(&a.read),
        a.written.len(),
        a.written.values().sum::<u64>(),
        b.read.len(),
        total(&b.read),
        b.written.len(),
        b.written.values().sum::<u64>()
    );
    // 16 files, each visited once an epoch.
    assert_eq!(a.read.len(), 16 * EPOCHS, "{:?}", a.read.keys());
    assert!(a.read.keys().all(|(_, visit)| (1..=EPOCHS).contains(visit)));
    assert!(!a.written.is_empty());
    assert_eq!(b, a);

    // The imported trace names what DFTracer lacks.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(imported.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["imported_from"]["format"], "dftracer");
    assert!(manifest["imported_from"]["lacks"]
        .as_array()
        .is_some_and(|l| !l.is_empty()));
}
