//! Metadata and io_uring replayed, with the collector as the witness: a
//! Python job that stats, lists, creates directories, renames checkpoints
//! into place, links and probes for missing files is captured, replayed at
//! four times its ranks, and the replay itself is captured. Beneath the
//! target the replay must make exactly four times each of the job's calls,
//! failing where the job's failed; nowhere else may it touch the job's
//! paths. A fio job on io_uring replays as io_uring requests.
//!
//! Capturing needs root and a kernel that loads the probes; where that is
//! missing each test says why and returns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use iorepro_format::Op;
use iorepro_tests::bins::{bin, run_json, run_ok, scratch, workspace_root};
use iorepro_tests::capture::{can_capture, capture};
use iorepro_tests::rows::{load, Row};

/// The calls a metadata server serves (stat, open, mkdir, rename...).
fn metadata_ops() -> impl Iterator<Item = Op> {
    Op::ALL.into_iter().filter(|op| op.is_metadata())
}

/// (op, failed) of the metadata calls on `dir` and paths under it, counted;
/// with `strictly`, not on `dir` itself (a replay checks its target for its
/// own sake).
fn tally(rows: &[Row], dir: &Path, strictly: bool) -> BTreeMap<(Op, bool), u64> {
    let mut m = BTreeMap::new();
    for r in rows.iter().filter(|r| r.op.is_metadata()) {
        let judged = if r.op == Op::Symlink {
            r.path2.as_deref()
        } else {
            r.path.as_deref()
        };
        if judged
            .is_some_and(|p| Path::new(p).starts_with(dir) && !(strictly && Path::new(p) == dir))
        {
            *m.entry((r.op, r.ret < 0)).or_insert(0) += 1;
        }
    }
    m
}

fn replay(trace: &Path, target: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![
        bin("iorepro-replay").display().to_string(),
        trace.display().to_string(),
        "--target".into(),
        target.display().to_string(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    // Four clones of the one traced process, each making every call it made
    // (the metadata load times four), rather than four ranks sharing its work.
    v.extend(["--data", "replicate", "--checkpoint", "replicate"].map(String::from));
    v
}

/// Captures `command` (paths under `under`), asserting it succeeded.
fn captured(trace: &Path, under: &Path, command: &[String]) -> Vec<Row> {
    let out = capture(trace, &[under], command);
    assert!(
        out.status.success(),
        "capturing {command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    load(trace)
}

#[test]
fn four_times_the_ranks_make_four_times_each_metadata_call_beneath_the_target() {
    let root = scratch("metadata-replay");
    if !can_capture(&root) {
        return;
    }
    let job = root.join("job");
    std::fs::create_dir_all(&job).unwrap();
    let script = workspace_root().join("tests/jobs/metadata_storm.py");
    let trace = root.join("trace");
    let job_rows = captured(
        &trace,
        &job,
        &[
            "python3".into(),
            script.display().to_string(),
            job.display().to_string(),
        ],
    );
    let want = tally(&job_rows, &job, false);
    for op in [Op::Stat, Op::Mkdir, Op::Rename, Op::Getdents, Op::Symlink] {
        assert!(
            want.keys().any(|k| k.0 == op),
            "the job made no {op} call: {want:?}"
        );
    }
    assert!(
        want.keys().any(|k| k.1),
        "the job's probes for missing files failed: {want:?}"
    );

    // The analysis counts the same calls a metadata server serves, and
    // calls a job made of them a metadata phase.
    let summary = run_json(Command::new(bin("iorepro-trace")).args([
        "summary".as_ref(),
        "--json".as_ref(),
        trace.as_os_str(),
    ]));
    let namespace_calls: u64 = want
        .iter()
        .filter(|(k, _)| k.0.is_metadata())
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        summary["metadata_calls"].as_u64(),
        Some(namespace_calls),
        "{summary}"
    );
    assert!(summary["metadata_calls_per_s"].as_f64().unwrap() > 0.0);
    let kinds: Vec<&str> = summary["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"metadata"), "phases: {kinds:?}");

    let target = root.join("target");
    // Prepared apart, so the capture below holds the replay's calls alone.
    run_ok(Command::new(bin("iorepro-replay")).args([
        trace.as_os_str(),
        "--target".as_ref(),
        target.as_os_str(),
        "--ranks".as_ref(),
        "4".as_ref(),
        "--prepare".as_ref(),
        "only".as_ref(),
        "--data".as_ref(),
        "replicate".as_ref(),
        "--checkpoint".as_ref(),
        "replicate".as_ref(),
    ]));
    let replay_trace = root.join("replay-trace");
    let cmd = replay(
        &trace,
        &target,
        &["--ranks", "4", "--prepare", "skip", "--json"],
    );
    // Everything the replay process did, wherever: the job's paths must not
    // appear outside the target.
    let out = capture(&replay_trace, &[], &cmd);
    assert!(
        out.status.success(),
        "the replay failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replay_rows = load(&replay_trace);
    let got = tally(&replay_rows, &target, true);
    let four: BTreeMap<(Op, bool), u64> = want.iter().map(|(k, n)| (*k, 4 * n)).collect();
    assert_eq!(
        got, four,
        "beneath the target, (op, failed) counts must be 4x the job's"
    );
    let escaped: Vec<&Row> = replay_rows
        .iter()
        .filter(|r| {
            r.under(&job)
                || r.path2
                    .as_deref()
                    .is_some_and(|p| p.starts_with(job.to_str().unwrap()))
        })
        .collect();
    assert!(
        escaped.is_empty(),
        "the replay reached the job's own paths: {escaped:#?}"
    );

    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the replay printed no report ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(report["errors"].as_array().unwrap().len(), 0, "{report}");
    assert_eq!(report["results_differed"], 0, "{report}");
    let mut metadata = 0;
    for op in metadata_ops() {
        let traced: u64 = want.iter().filter(|(k, _)| k.0 == op).map(|(_, n)| n).sum();
        let failed: u64 = want
            .iter()
            .filter(|(k, _)| k.0 == op && k.1)
            .map(|(_, n)| n)
            .sum();
        let o = &report["ops"][op.as_str()];
        assert_eq!(o["count"].as_u64().unwrap_or(0), 4 * traced, "{op}: {o}");
        assert_eq!(o["failed"].as_u64().unwrap_or(0), 4 * failed, "{op}: {o}");
        if traced > 0 {
            assert!(o["lat_us"]["p50"].as_f64().unwrap() > 0.0, "{op}: {o}");
        }
        metadata += 4 * traced;
    }
    assert_eq!(
        report["metadata_ops"].as_u64().unwrap(),
        metadata,
        "{report}"
    );
    assert!(report["metadata_ops_per_s"].as_f64().unwrap() > 0.0);

    // A second replay on the same target meets the same name space: what
    // the first one created is cleared by preparing, so nothing differs.
    let again = run_json(
        Command::new(bin("iorepro-replay")).args(
            replay(&trace, &target, &["--ranks", "4", "--json"])
                .iter()
                .skip(1),
        ),
    );
    assert_eq!(again["results_differed"], 0, "{again}");
    assert!(again["prepare"]["paths_cleared"].as_u64().unwrap() > 0);
}

#[test]
fn io_uring_requests_replay_as_io_uring_requests() {
    let root = scratch("uring-replay");
    if !can_capture(&root) {
        return;
    }
    let data: PathBuf = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let fio_job = format!(
        "[uring]\nioengine=io_uring\ndirectory={}\nfilename=f\nsize=4m\nbs=16k\n\
         rw=randrw\nrwmixread=50\niodepth=1\nfsync=8\nrandrepeat=1\n",
        data.display()
    );
    let job_file = root.join("job.fio");
    std::fs::write(&job_file, fio_job).unwrap();
    // The file exists before the capture, as a dataset would.
    run_ok(Command::new("fio").arg(&job_file).arg("--create_only=1"));
    let trace = root.join("trace");
    let rows = captured(
        &trace,
        &data,
        &["fio".into(), job_file.display().to_string()],
    );
    let ring = |rows: &[Row], dir: &Path, op: Op| {
        rows.iter()
            .filter(|r| r.op == op && r.io_uring && r.under(dir))
            .count()
    };
    let (reads, writes) = (ring(&rows, &data, Op::Read), ring(&rows, &data, Op::Write));
    assert!(
        reads > 0 && writes > 0,
        "fio made io_uring reads and writes"
    );

    let target = root.join("target");
    run_ok(
        Command::new(bin("iorepro-replay")).args(
            replay(&trace, &target, &["--prepare", "only"])
                .iter()
                .skip(1),
        ),
    );
    let replay_trace = root.join("replay-trace");
    let replayed = captured(
        &replay_trace,
        &target,
        &replay(&trace, &target, &["--prepare", "skip", "--json"]),
    );
    assert_eq!(ring(&replayed, &target, Op::Read), reads);
    assert_eq!(ring(&replayed, &target, Op::Write), writes);
    let syscalls = replayed
        .iter()
        .filter(|r| matches!(r.op, Op::Read | Op::Write) && !r.io_uring)
        .count();
    assert_eq!(syscalls, 0, "no data call of the replay was a syscall");
}
