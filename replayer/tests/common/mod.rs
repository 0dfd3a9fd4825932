//! Shared by the integration tests: synthetic traces and running the binary.

#![allow(dead_code)]

pub mod rgw;

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use iorepro_format::{Source, WriterOptions};
use iorepro_interchange::synth::Workload;

/// A JSON number as `u64` (0 when it is absent).
pub fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Two ranks: a load burst, 8 steps of reads with 20 ms compute, a
/// checkpoint every 4 steps.
pub const TWO_RANKS: &str = r#"
name = "two-ranks"
ranks = 2
seed = 7
[load]
bytes_per_rank = "2MiB"
read_size = "1MiB"
path = "/models/pretrained.bin"
[dataset]
dir = "/data/train"
files = 4
file_size = "4MiB"
read_size = "1MiB"
[training]
steps = 8
compute_time = "20ms"
reads_per_step = 2
[checkpoint]
every = 4
bytes_per_rank = "2MiB"
write_size = "1MiB"
dir = "/checkpoints"
"#;

pub fn synth(dir: &Path, workload: &str) -> PathBuf {
    let out = dir.join("trace");
    Workload::parse(workload)
        .unwrap()
        .write_trace(&out, WriterOptions::new(Source::Synth))
        .unwrap();
    out
}

/// A fresh directory holding the synthetic trace of `workload` at `trace`,
/// and the path `target` beside it (not created): (dir, trace, target).
pub fn synth_with_target(workload: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), workload);
    let target = tmp.path().join("target");
    (tmp, trace, target)
}

pub fn replay() -> Command {
    Command::cargo_bin("iorepro-replay").unwrap()
}

/// The `iorepro-replay` executable, for running it under a launcher
/// (mpirun, setpriv) rather than directly.
pub fn replay_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("iorepro-replay")
}

/// Whether Open MPI's `mpirun` can be run; says so where it cannot.
pub fn have_mpirun() -> bool {
    let ok = std::process::Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        iorepro_tests::skip::cannot_run("mpirun is not installed (apt install openmpi-bin)");
    }
    ok
}

/// Runs `iorepro-replay TRACE --target TARGET ARGS...` to completion.
pub fn replay_into(trace: &Path, target: &Path, args: &[&str]) -> Output {
    replay()
        .arg(trace)
        .arg("--target")
        .arg(target)
        .args(args)
        .output()
        .unwrap()
}

/// Replays `trace` into `target` with `args`, asserts it succeeded, and returns its JSON report.
pub fn replay_ok(trace: &Path, target: &Path, args: &[&str]) -> serde_json::Value {
    let out = replay_into(trace, target, args);
    json_ok(&out)
}

/// Asserts that a run succeeded (showing its stderr if not) and returns its JSON report.
pub fn json_ok(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(out)
}

pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON report ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Every file and directory under `dir`, relative, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(root: &Path, d: &Path, out: &mut Vec<String>) {
        if let Ok(rd) = std::fs::read_dir(d) {
            for e in rd.flatten() {
                let p = e.path();
                out.push(p.strip_prefix(root).unwrap().display().to_string());
                if e.file_type().unwrap().is_dir() {
                    walk(root, &p, out);
                }
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// One hand-written trace row: (rank, op, path, fd, offset, bytes, flags).
pub type Row<'a> = (
    i32,
    iorepro_format::Op,
    &'a str,
    i32,
    Option<i64>,
    i64,
    Option<i32>,
);

/// Writes rows 1 ms apart as a trace.
pub fn write_rows(dir: &Path, rows: &[Row<'_>]) -> PathBuf {
    write_rows_renaming(dir, rows, "")
}

/// [`write_rows`], its renames naming `renamed_to` as their new name.
pub fn write_rows_renaming(dir: &Path, rows: &[Row<'_>], renamed_to: &str) -> PathBuf {
    let timed: Vec<TimedRow> = rows
        .iter()
        .enumerate()
        .map(|(i, &row)| (1_000_000_000 + i as i64 * 1_000_000, 10_000, row))
        .collect();
    write_timed_rows(dir, &timed, renamed_to)
}

/// A row with its own time and duration (ns): (ts, dur, row).
pub type TimedRow<'a> = (i64, i64, Row<'a>);

/// A trace of `rows`, each at its own time (in `ts` order), in `dir/trace`;
/// renames name `renamed_to` as their new name.
pub fn write_timed_rows(dir: &Path, rows: &[TimedRow<'_>], renamed_to: &str) -> PathBuf {
    let made_by: Vec<(i32, TimedRow)> = rows.iter().map(|&r| (100 + r.2 .0, r)).collect();
    write_process_rows(dir, &made_by, renamed_to)
}

/// [`write_timed_rows`], each row made by the process it names: (pid, row).
pub fn write_process_rows(dir: &Path, rows: &[(i32, TimedRow<'_>)], renamed_to: &str) -> PathBuf {
    let out = dir.join("trace");
    let mut w =
        iorepro_format::TraceWriter::create(&out, WriterOptions::new(Source::Synth)).unwrap();
    for &(pid, (ts_ns, dur_ns, (rank, op, path, fd, offset, bytes, flags))) in rows {
        let data = matches!(op, iorepro_format::Op::Read | iorepro_format::Op::Write);
        w.push(&iorepro_format::EventRow {
            ts_ns,
            dur_ns,
            host: "h",
            pid,
            tid: pid,
            rank: Some(rank),
            comm: "python",
            op,
            path: Some(path),
            fd: Some(fd),
            offset,
            size: data.then_some(bytes),
            ret: if op == iorepro_format::Op::Open {
                fd as i64
            } else {
                bytes
            },
            flags,
            calls: 1,
            span_ns: None,
            path2: (op == iorepro_format::Op::Rename).then_some(renamed_to),
            via: None,
            exchange: None,
            from_storage: None,
        })
        .unwrap();
    }
    w.finish().unwrap();
    out
}

pub const O_WRITE_CREATE: i32 = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;

/// A checkpoint of `mib` MiB written by rank 0 to `/ckpt/model.pt`, in 1 MiB calls.
pub fn checkpoint_rows(mib: i64) -> Vec<Row<'static>> {
    use iorepro_format::Op;
    let path = "/ckpt/model.pt";
    let mut rows = vec![(0, Op::Open, path, 5, None, 0, Some(O_WRITE_CREATE))];
    for i in 0..mib {
        rows.push((0, Op::Write, path, 5, Some(i << 20), 1 << 20, None));
    }
    rows.push((0, Op::Close, path, 5, None, 0, None));
    rows
}

/// Rank 0 creating `path` on descriptor `fd` and writing `bytes` to it in
/// one call: a file written whole, as a small save is.
pub fn one_write(path: &str, fd: i32, bytes: i64) -> Vec<Row<'_>> {
    vec![
        (
            0,
            iorepro_format::Op::Open,
            path,
            fd,
            None,
            0,
            Some(O_WRITE_CREATE),
        ),
        (0, iorepro_format::Op::Write, path, fd, Some(0), bytes, None),
        (0, iorepro_format::Op::Close, path, fd, None, 0, None),
    ]
}

/// Asserts that what a replay recorded (`--record-ops`) compares with the
/// trace it replayed as a trace of the same bytes, read and written.
pub fn assert_records_the_same_bytes(trace: &Path, recorded: &Path) {
    let cmp = iorepro_tests::bins::run_json(
        std::process::Command::new(iorepro_tests::bins::bin("iorepro-trace"))
            .arg("compare")
            .arg(trace)
            .arg(recorded)
            .arg("--json"),
    );
    assert_eq!(cmp["read_bytes_error"], 0.0, "{cmp}");
    assert_eq!(cmp["write_bytes_error"], 0.0, "{cmp}");
}
