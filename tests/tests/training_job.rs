//! A real PyTorch DDP training job (torchrun, gloo, DataLoader with forked
//! workers reading real files, torch.distributed.checkpoint saves) captured
//! by `iorepro-collect`, and the trace checked against what the job did.
//!
//! The job runs once per test binary; each test checks one property of that
//! capture. Capturing needs root and a kernel that loads the probes; where
//! that is missing, or torch is not installed, each test says why and returns.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use iorepro_format::Op;
use iorepro_tests::bins::{bin, run_json, run_ok, scratch};
use iorepro_tests::capture::{capture, probe_support};
use iorepro_tests::job::{files_under, make_dataset, torch_python, TrainJob};
use iorepro_tests::rows::{bytes_under, load, Row};

const FILES: usize = 64;
const TYPICAL_FILE: usize = 256 << 10;

struct Captured {
    job: TrainJob,
    trace: PathBuf,
    dataset_bytes: u64,
    status: std::process::ExitStatus,
    stderr: String,
    rows: Vec<Row>,
}

/// The capture shared by every test here, or `None` (with the reason
/// printed) when this machine cannot run it.
fn captured() -> Option<&'static Captured> {
    static CELL: OnceLock<Result<Captured, String>> = OnceLock::new();
    match CELL.get_or_init(run_capture) {
        Ok(c) => Some(c),
        Err(why) => {
            iorepro_tests::skip::cannot_run(why);
            None
        }
    }
}

fn run_capture() -> Result<Captured, String> {
    let root = scratch("training-job");
    probe_support(&root)?;
    let python = torch_python()?;
    let job = TrainJob::new(&root);
    let dataset_bytes = make_dataset(&job.data, FILES, TYPICAL_FILE);
    std::fs::create_dir_all(&job.ckpt).unwrap();
    let trace = root.join("trace");
    let started = Instant::now();
    let out = capture(&trace, &[&job.data, &job.ckpt], &job.command(&python));
    eprintln!(
        "captured the training job in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let rows = if trace.join("manifest.json").exists() {
        load(&trace)
    } else {
        Vec::new()
    };
    Ok(Captured {
        job,
        trace,
        dataset_bytes,
        status: out.status,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        rows,
    })
}

#[test]
fn the_job_succeeds_and_its_trace_is_valid() {
    let Some(c) = captured() else { return };
    assert!(
        c.status.success(),
        "job under the collector failed ({}):\n{}",
        c.status,
        c.stderr
    );
    run_ok(
        Command::new(bin("iorepro-trace"))
            .arg("validate")
            .arg(&c.trace),
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(c.trace.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["dropped_events"], 0,
        "events were lost: {manifest}"
    );
    assert_eq!(manifest["source"], "ebpf");
}

#[test]
fn phases_show_the_load_and_one_checkpoint_per_save() {
    let Some(c) = captured() else { return };
    assert!(c.status.success(), "job failed: {}", c.stderr);
    let saves = c.job.report()["checkpoints"].as_array().unwrap().len();
    assert_eq!(saves, 3, "the job is shaped to save three checkpoints");
    let v = run_json(
        Command::new(bin("iorepro-trace"))
            .arg("phases")
            .arg(&c.trace)
            .arg("--json"),
    );
    let phases = v["phases"].as_array().expect("phases list");
    let kinds: Vec<&str> = phases.iter().map(|p| p["kind"].as_str().unwrap()).collect();
    let checkpoints = kinds.iter().filter(|k| **k == "checkpoint").count();
    assert_eq!(
        checkpoints, saves,
        "checkpoint phases vs saves; phases: {kinds:?}"
    );
    let first_load = kinds.iter().position(|k| *k == "load");
    let first_ckpt = kinds.iter().position(|k| *k == "checkpoint");
    assert!(
        matches!((first_load, first_ckpt), (Some(l), Some(k)) if l < k),
        "a load phase must come before the first checkpoint; phases: {kinds:?}"
    );
    for p in phases.iter().filter(|p| p["kind"] == "checkpoint") {
        assert!(
            p["write_bytes"].as_u64().unwrap() > 0,
            "checkpoint without writes: {p}"
        );
    }
}

#[test]
fn loader_worker_io_is_attributed_to_the_ranks() {
    let Some(c) = captured() else { return };
    assert!(c.status.success(), "job failed: {}", c.stderr);
    let reads: Vec<&Row> = c
        .rows
        .iter()
        .filter(|r| r.op == Op::Read && r.under(&c.job.data))
        .collect();
    assert!(!reads.is_empty(), "no dataset reads captured");
    let unranked: Vec<_> = reads.iter().filter(|r| r.rank.is_none()).take(5).collect();
    assert!(
        unranked.is_empty(),
        "dataset reads without a rank, e.g. {unranked:?}"
    );
    // The rank processes write the checkpoints; the DataLoader workers (two
    // forked per rank) do all the dataset reading.
    let writers: std::collections::BTreeSet<i32> = c
        .rows
        .iter()
        .filter(|r| r.op == Op::Write && r.under(&c.job.ckpt))
        .map(|r| r.pid)
        .collect();
    for rank in 0..c.job.ranks as i32 {
        let readers: std::collections::BTreeSet<i32> = reads
            .iter()
            .filter(|r| r.rank == Some(rank))
            .map(|r| r.pid)
            .collect();
        assert_eq!(
            readers.len(),
            2,
            "rank {rank}: expected its 2 DataLoader workers to read, got pids {readers:?}"
        );
        assert!(
            readers.is_disjoint(&writers),
            "rank {rank}: readers {readers:?} should be workers, not the rank processes {writers:?}"
        );
    }
    let ranks: std::collections::BTreeSet<i32> = reads.iter().filter_map(|r| r.rank).collect();
    assert_eq!(
        ranks,
        (0..c.job.ranks as i32).collect(),
        "ranks seen on dataset reads"
    );
}

#[test]
fn checkpoint_bytes_written_equal_the_files_on_disk() {
    let Some(c) = captured() else { return };
    assert!(c.status.success(), "job failed: {}", c.stderr);
    let on_disk = files_under(&c.job.ckpt);
    assert!(!on_disk.is_empty(), "no checkpoint files written");
    let disk_bytes: u64 = on_disk.iter().map(|f| f.1).sum();
    let written = bytes_under(&c.rows, Op::Write, &c.job.ckpt);
    assert_eq!(
        written,
        disk_bytes,
        "bytes written under {} vs files on disk {on_disk:?}",
        c.job.ckpt.display()
    );
    let unranked = c
        .rows
        .iter()
        .filter(|r| r.op == Op::Write && r.under(&c.job.ckpt) && r.rank.is_none())
        .count();
    assert_eq!(unranked, 0, "checkpoint writes without a rank");
}

#[test]
fn dataset_bytes_read_equal_what_the_loader_must_read() {
    let Some(c) = captured() else { return };
    assert!(c.status.success(), "job failed: {}", c.stderr);
    let epochs = u64::from(c.job.epochs);
    let read = bytes_under(&c.rows, Op::Read, &c.job.data);
    assert_eq!(
        read,
        epochs * c.dataset_bytes,
        "every sample file read fully, once per epoch"
    );
    // File by file: each sample read fully once per epoch, by one rank.
    for (path, size) in files_under(&c.job.data) {
        let per_file: u64 = c
            .rows
            .iter()
            .filter(|r| r.op == Op::Read && r.path.as_deref() == Some(path.to_str().unwrap()))
            .map(Row::moved)
            .sum();
        assert_eq!(per_file, epochs * size, "{}", path.display());
    }
}
