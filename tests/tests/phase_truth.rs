//! Phases against the job's own record of itself. Each job writes when each
//! of its checkpoints and epochs began and ended (wall clock, ns), and is
//! captured twice: whole (no `--path-prefix`, its start-up and imports
//! included) and scoped to its data and checkpoints. In both, every true
//! checkpoint must be matched by exactly one checkpoint phase whose edges
//! lie within 100 ms or 5% of its length of the job's, no checkpoint
//! phase may stand where the job saved nothing, and no stretch of reading
//! may be cut in two (two reading phases of one kind with only idle time
//! between). One line per job and capture prints the matches.
//!
//! Jobs: `train_ddp.py` under torchrun (2 ranks, DataLoader workers, four
//! `torch.distributed.checkpoint` saves across ranks, each with a rank-0
//! `torch.save` of the model), `bench_like.py` (DLIO-like: one process, a
//! rank-0 checkpoint at the end of each epoch, fsynced) and `loader_job.py`
//! (fork-pool readers, a scratch file, a torch.save to a temporary name,
//! fsynced and renamed, after each epoch).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use iorepro_tests::bins::{bin, run_json, scratch, workspace_root};
use iorepro_tests::capture::{capture, probe_support};
use iorepro_tests::job::{make_dataset, torch_python, TrainJob};

/// A window of the job's own record: [start, end] in wall-clock Unix ns.
type Window = (i64, i64);

/// The slack on each edge: 100 ms or 5% of the checkpoint, whichever is more.
fn tolerance_ns(w: Window) -> i64 {
    (100_000_000i64).max((w.1 - w.0) / 20)
}

fn windows(report: &serde_json::Value, key: &str) -> Vec<Window> {
    report[key]
        .as_array()
        .unwrap_or_else(|| panic!("the job's report has no {key}: {report}"))
        .iter()
        .map(|w| (w[0].as_i64().unwrap(), w[1].as_i64().unwrap()))
        .collect()
}

/// The trace's phases, in order.
fn phases(trace: &Path) -> Vec<serde_json::Value> {
    let v = run_json(
        Command::new(bin("iorepro-trace"))
            .arg("phases")
            .arg(trace)
            .arg("--json"),
    );
    v["phases"].as_array().unwrap().clone()
}

/// The windows of the `phases` of `kind`.
fn windows_of(phases: &[serde_json::Value], kind: &str) -> Vec<Window> {
    phases
        .iter()
        .filter(|p| p["kind"] == kind)
        .map(|p| {
            (
                p["start_unix_ns"].as_i64().unwrap(),
                p["end_unix_ns"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn overlaps(a: Window, b: Window) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

/// Matches the trace's checkpoint phases with the job's checkpoints; prints
/// one line and returns what does not hold.
fn check(name: &str, trace: &Path, truth: &[Window]) -> Vec<String> {
    let all = phases(trace);
    let phases = windows_of(&all, "checkpoint");
    let mut wrong = Vec::new();
    let mut worst_edge_ms = 0.0f64;
    let mut matched = 0;
    for (i, &t) in truth.iter().enumerate() {
        let tol = tolerance_ns(t);
        let near: Vec<Window> = phases.iter().copied().filter(|&p| overlaps(p, t)).collect();
        let [p] = near[..] else {
            wrong.push(format!(
                "{name}: checkpoint {i} ({:.0} ms) is {} checkpoint phases",
                (t.1 - t.0) as f64 / 1e6,
                near.len()
            ));
            continue;
        };
        let edge = (p.0 - t.0).abs().max((p.1 - t.1).abs());
        worst_edge_ms = worst_edge_ms.max(edge as f64 / 1e6);
        if edge > tol {
            wrong.push(format!(
                "{name}: checkpoint {i}: phase edges {:+.1} / {:+.1} ms from the job's (tolerance {:.0} ms)",
                (p.0 - t.0) as f64 / 1e6,
                (p.1 - t.1) as f64 / 1e6,
                tol as f64 / 1e6
            ));
            continue;
        }
        matched += 1;
    }
    let extra: Vec<&Window> = phases
        .iter()
        .filter(|&&p| {
            !truth
                .iter()
                .any(|&t| overlaps(p, (t.0 - tolerance_ns(t), t.1 + tolerance_ns(t))))
        })
        .collect();
    for p in &extra {
        wrong.push(format!(
            "{name}: a checkpoint phase of {:.0} ms where the job saved nothing",
            (p.1 - p.0) as f64 / 1e6
        ));
    }
    // The data part is not split: two reading phases of one kind with only
    // idle time between them would be one stretch of reading cut in two.
    let kinds: Vec<&str> = all
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .filter(|&k| k != "idle")
        .collect();
    let splits = kinds
        .windows(2)
        .filter(|w| w[0] == w[1] && (w[0] == "read" || w[0] == "load"))
        .count();
    if splits > 0 {
        wrong.push(format!(
            "{name}: {splits} reading phase(s) split in two: {kinds:?}"
        ));
    }
    eprintln!(
        "phase truth: {name}: {matched} of {} checkpoints matched by one phase each, worst edge {worst_edge_ms:.1} ms; {} checkpoint phases in all, {} without a checkpoint; {splits} reading phases split",
        truth.len(),
        phases.len(),
        extra.len()
    );
    wrong
}

/// Captures `command` whole and scoped to `prefixes`; checks both captures'
/// phases against the job's record of each run, which `truth` reads (from
/// the run's output or the files it left).
fn whole_and_scoped(
    root: &Path,
    name: &str,
    prefixes: &[&Path],
    command: &[String],
    truth: &dyn Fn(&Output) -> Vec<Window>,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for (capture_kind, scope) in [("whole", &[][..]), ("scoped", prefixes)] {
        let trace = root.join(format!("{name}-{capture_kind}"));
        let out = capture(&trace, scope, command);
        assert!(
            out.status.success(),
            "{name} failed under the collector: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let truth = truth(&out);
        assert!(!truth.is_empty(), "{name} saved nothing");
        wrong.extend(check(&format!("{name} ({capture_kind})"), &trace, &truth));
    }
    wrong
}

/// The checkpoints of a job's JSON report (`checkpoint_times_ns`), which is
/// then removed for the next run to write its own.
fn report_checkpoints(report: &Path) -> Vec<Window> {
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(report).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", report.display()));
    std::fs::remove_file(report).unwrap();
    windows(&record, "checkpoint_times_ns")
}

/// The checkpoints of `loader_job.py`'s `MARK checkpointN start|end SECONDS`
/// lines.
fn marked_checkpoints(out: &Output) -> Vec<Window> {
    let mut starts = Vec::new();
    let mut windows = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let ["MARK", what, edge, secs] = f[..] else {
            continue;
        };
        if !what.starts_with("checkpoint") {
            continue;
        }
        let ns = (secs.parse::<f64>().unwrap() * 1e9) as i64;
        match edge {
            "start" => starts.push(ns),
            _ => windows.push((starts.pop().expect("a start before its end"), ns)),
        }
    }
    windows
}

#[test]
fn each_checkpoint_is_one_phase_on_whole_and_scoped_captures() {
    let root = scratch("phase-truth");
    if let Err(why) = probe_support(&root) {
        return iorepro_tests::skip::cannot_run(why);
    }
    let python = match torch_python() {
        Ok(p) => p,
        Err(why) => return iorepro_tests::skip::cannot_run(why),
    };
    let mut wrong = Vec::new();

    // The DDP job: 2 epochs of 8 steps per rank, a save every 4 steps (two
    // within an epoch, two at an epoch's end).
    let mut job = TrainJob::new(&root);
    job.compute_s = 0.05;
    job.ckpt_every = 4;
    job.rank0_save = true;
    make_dataset(&job.data, 32, 128 << 10);
    std::fs::create_dir_all(&job.ckpt).unwrap();
    let report = job.report.clone();
    wrong.extend(whole_and_scoped(
        &root,
        "train_ddp",
        &[&job.data, &job.ckpt],
        &job.command(&python),
        &|_| report_checkpoints(&report),
    ));

    // The DLIO-like benchmark: 3 epochs of 32 samples, 20 ms of compute
    // each, a 32 MiB checkpoint after each epoch.
    let ckpt: PathBuf = root.join("bench-ckpt");
    std::fs::create_dir_all(&ckpt).unwrap();
    let report = root.join("bench-report.json");
    let command: Vec<String> = vec![
        python.display().to_string(),
        workspace_root()
            .join("tests/jobs/bench_like.py")
            .display()
            .to_string(),
        "--data".into(),
        job.data.display().to_string(),
        "--ckpt".into(),
        ckpt.display().to_string(),
        "--ckpt-mib".into(),
        "32".into(),
        "--compute-s".into(),
        "0.02".into(),
        "--report".into(),
        report.display().to_string(),
    ];
    wrong.extend(whole_and_scoped(
        &root,
        "bench_like",
        &[&job.data, &ckpt],
        &command,
        &|_| report_checkpoints(&report),
    ));

    // The loader job: fork-pool workers read every file each epoch, a
    // scratch file comes and goes, a torch.save after each epoch to a
    // temporary name, fsynced and renamed.
    let loader = root.join("loader");
    for d in ["ckpt", "scratch"] {
        std::fs::create_dir_all(loader.join(d)).unwrap();
    }
    let arg = |p: PathBuf| p.display().to_string();
    let command = vec![
        python.display().to_string(),
        arg(workspace_root().join("tests/jobs/loader_job.py")),
        "--data".into(),
        arg(job.data.clone()),
        "--ckpt".into(),
        arg(loader.join("ckpt")),
        "--scratch".into(),
        arg(loader.join("scratch")),
    ];
    wrong.extend(whole_and_scoped(
        &root,
        "loader_job",
        &[&job.data, &loader.join("ckpt"), &loader.join("scratch")],
        &command,
        &marked_checkpoints,
    ));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
