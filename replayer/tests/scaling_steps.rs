//! Scaling a trace, in time: at N the ranks that share a traced rank's
//! reads make their steps side by side, and each epoch begins where the
//! job's did (its loader's workers starting are its time, the job's
//! start-up before is not).

mod common;

use common::*;

/// Ranks sharing a traced rank's reads make their steps side by side, as
/// the job's ranks at N each make a step at once. Two traced ranks read a
/// sample (1 MiB) every 200 ms for an epoch over 8 files, rank 0 saves
/// while rank 1 waits, and they read another epoch. At 4 ranks, each
/// pair sharing a traced rank reads its first samples after the save
/// together: before, the second of each pair came one traced step (100 ms
/// at the doubled pace) after the first, a wait counted as its compute;
/// and the ranks that did not save sat out the traced save's 100 ms, where
/// the writer, on faster storage, was done in a few. The run's first
/// samples, too, are read together: before, a sharer whose first visit
/// came after the trace's first load phase began one step late, and
/// waited for it as the process's start-up, at the traced pace.
///
/// Each wrong answer is 100 ms or more late; the bound is half that, so a
/// rank started late on a busy machine (38 ms was seen with other tests'
/// replays beside it) is not taken for one.
#[test]
fn ranks_sharing_a_traced_rank_begin_their_steps_together() {
    use iorepro_format::Op;
    let tmp = tempfile::tempdir().unwrap();
    let ms = 1_000_000i64;
    let t0 = 1_000_000_000_000i64;
    // A traced step, and the bound on how late a rank may begin one.
    let step_every = 200 * ms;
    let bound_ms = 50.0;
    // (when, rank, call, path, descriptor, bytes)
    let mut calls: Vec<(i64, i32, Op, String, i32, i64)> = Vec::new();
    let epoch = |start: i64, flip: bool, calls: &mut Vec<_>| {
        for step in 0..4i64 {
            for rank in 0..2i32 {
                let file = if flip { 1 - rank } else { rank } as i64 * 4 + step;
                let path = format!("/data/sample-{file}.bin");
                let at = start + step * step_every + rank as i64 * 200_000;
                calls.push((at, rank, Op::Open, path.clone(), 10, 0));
                calls.push((at + 300_000, rank, Op::Read, path.clone(), 10, 1 << 20));
                calls.push((at + 600_000, rank, Op::Close, path, 10, 0));
            }
        }
    };
    epoch(0, false, &mut calls);
    // Rank 0 saves 4 MiB in 100 ms after the epoch's last step, its
    // writes back to back; rank 1 waits.
    let ckpt = "/ckpt/model.pt".to_string();
    let save_at = 4 * step_every;
    calls.push((save_at, 0, Op::Open, ckpt.clone(), 11, 0));
    for k in 0..4 {
        let at = save_at + 200_000 + k * 25 * ms;
        calls.push((at, 0, Op::Write, ckpt.clone(), 11, 1 << 20));
    }
    calls.push((save_at + 100 * ms + 400_000, 0, Op::Close, ckpt, 11, 0));
    epoch(save_at + 101 * ms, true, &mut calls);
    calls.sort_by_key(|c| c.0);
    let rows: Vec<TimedRow> = calls
        .iter()
        .map(|(at, rank, op, path, fd, bytes)| {
            let data = matches!(op, Op::Read | Op::Write);
            // The traced storage took 25 ms a save's write.
            let took = if *op == Op::Write { 25 * ms } else { 100_000 };
            let flags = if path.ends_with(".pt") {
                O_WRITE_CREATE
            } else {
                0
            };
            let offset = data.then_some(0);
            let open_flags = (*op == Op::Open).then_some(flags);
            (
                t0 + at,
                took,
                (*rank, *op, path.as_str(), *fd, offset, *bytes, open_flags),
            )
        })
        .collect();
    let trace = write_timed_rows(tmp.path(), &rows, "");

    let target = tmp.path().join("target");
    let rec = tmp.path().join("rec");
    let recording = ["--record-ops", rec.to_str().unwrap()];
    let args = [
        &recording[..],
        &["--ranks", "4", "--timing", "original", "--json"],
    ]
    .concat();
    let r = replay_ok(&trace, &target, &args);
    assert_eq!(
        r["training"]["checkpoints"].as_array().unwrap().len(),
        1,
        "{r}"
    );
    // The save's end and each rank's first read after it, in the replay's
    // own record.
    let mut rows = Vec::new();
    let reader = iorepro_format::TraceReader::open(&rec).unwrap();
    for ev in reader.events().unwrap() {
        let ev = ev.unwrap();
        for (i, op) in ev.ops().iter().enumerate() {
            rows.push((ev.ts().value(i), ev.rank().value(i), *op));
        }
    }
    let saved = rows
        .iter()
        .filter(|r| r.2 == Op::Write)
        .map(|r| r.0)
        .max()
        .unwrap();
    let mut first = std::collections::BTreeMap::new();
    for &(ts, rank, op) in &rows {
        if op == Op::Read && ts > saved {
            first.entry(rank).or_insert(ts);
        }
    }
    assert_eq!(first.len(), 4, "{first:?}");
    let late = |ts: i64| (ts - saved) as f64 / 1e6;
    let (lo, hi) = (first.values().min().unwrap(), first.values().max().unwrap());
    assert!(
        late(*hi) - late(*lo) < bound_ms && late(*hi) < bound_ms,
        "first reads after the save, ms after its last write: {:?}",
        first.values().map(|&t| late(t)).collect::<Vec<_>>()
    );
    // And the run's first reads: the trace's first step is a load phase of
    // its own (a pause follows it), the epoch's read phase the rest.
    let begun = rows.iter().map(|r| r.0).min().unwrap();
    let mut opening = std::collections::BTreeMap::new();
    for &(ts, rank, op) in &rows {
        if op == Op::Read {
            opening.entry(rank).or_insert(ts);
        }
    }
    let since = |ts: i64| (ts - begun) as f64 / 1e6;
    assert!(
        opening.values().all(|&t| since(t) < bound_ms),
        "first reads of the run, ms after its first call: {:?}",
        opening.values().map(|&t| since(t)).collect::<Vec<_>>()
    );
}

/// One call of a test job: (pid, when after the start, call, path,
/// descriptor, bytes).
type JobCall = (i32, i64, iorepro_format::Op, String, i32, i64);

/// The rows of `calls` from `t0`, rank 0, each 0.1 ms long: a `.pt` file is
/// opened to write, others to read.
fn process_rows(calls: &[JobCall], t0: i64) -> Vec<(i32, TimedRow<'_>)> {
    use iorepro_format::Op;
    calls
        .iter()
        .map(|(pid, at, op, path, fd, bytes)| {
            let data = matches!(op, Op::Read | Op::Write);
            let flags = (*op == Op::Open).then_some(if path.ends_with(".pt") {
                O_WRITE_CREATE
            } else {
                0
            });
            let row = (0, *op, path.as_str(), *fd, data.then_some(0), *bytes, flags);
            (*pid, (t0 + at, 100_000, row))
        })
        .collect()
}

/// A job's epoch holds its loader's workers starting: a DataLoader forks
/// them when the epoch's loop begins, and each makes calls of its own
/// before its first sample. The job's start-up before (the interpreter,
/// imports, the process group) is not the first epoch's. Here the main
/// process starts up for 300 ms (reading its code, with no pause that would
/// make it a phase of its own), and each epoch's worker makes its first
/// call 100 ms before its first sample: the first epoch holds that 100 ms
/// (it was left out with the start-up before), the second too.
#[test]
fn a_loader_worker_starting_is_its_epochs_time_and_the_start_up_before_is_not() {
    use iorepro_format::Op;
    let tmp = tempfile::tempdir().unwrap();
    let ms = 1_000_000i64;
    let t0 = 1_000_000_000_000i64;
    let (main, code, ckpt) = (100, "/venv/lib/site.py", "/ckpt/model.pt");
    // (pid, when, call, path, descriptor, bytes)
    let mut calls: Vec<JobCall> = Vec::new();
    for k in 0..60 {
        calls.push((main, k * 5 * ms, Op::Open, code.into(), 3, 0));
        calls.push((main, k * 5 * ms + ms, Op::Read, code.into(), 3, 4096));
        calls.push((main, k * 5 * ms + 2 * ms, Op::Close, code.into(), 3, 0));
    }
    let epoch = |start: i64, worker: i32, first_file: i64, calls: &mut Vec<_>| {
        let first = format!("/data/sample-{first_file}.bin");
        calls.push((worker, start, Op::Stat, first, -1, 0));
        for step in 0..4 {
            let path = format!("/data/sample-{}.bin", first_file + step);
            let at = start + (step + 1) * 100 * ms;
            calls.push((worker, at, Op::Open, path.clone(), 10, 0));
            calls.push((worker, at + ms, Op::Read, path.clone(), 10, 1 << 20));
            calls.push((worker, at + 2 * ms, Op::Close, path, 10, 0));
        }
    };
    let save = |start: i64, calls: &mut Vec<_>| {
        calls.push((main, start, Op::Open, ckpt.to_string(), 11, 0));
        for k in 0..4 {
            let at = start + ms + k * 10 * ms;
            calls.push((main, at, Op::Write, ckpt.to_string(), 11, 1 << 20));
        }
        calls.push((main, start + 42 * ms, Op::Close, ckpt.to_string(), 11, 0));
    };
    epoch(300 * ms, 200, 0, &mut calls);
    save(800 * ms, &mut calls);
    epoch(900 * ms, 201, 4, &mut calls);
    save(1_400 * ms, &mut calls);
    calls.sort_by_key(|c| c.1);
    let rows = process_rows(&calls, t0);
    let trace = write_process_rows(tmp.path(), &rows, "");
    let target = tmp.path().join("target");
    let r = replay_ok(&trace, &target, &["--timing", "original", "--json"]);
    let epochs: Vec<f64> = r["training"]["epochs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["duration_s"].as_f64().unwrap())
        .collect();
    assert_eq!(epochs.len(), 2, "{}", r["training"]);
    // Each epoch: the worker's 100 ms start, then 4 steps to the save (the
    // second's follows the first save's 58 ms after it). Without the
    // worker's start the first would be 0.4 s; with the start-up, 0.8 s.
    assert!(
        (0.47..0.7).contains(&epochs[0]),
        "first epoch {} s: {}",
        epochs[0],
        r["training"]
    );
    assert!(
        (0.47..0.75).contains(&epochs[1]),
        "second epoch {} s: {}",
        epochs[1],
        r["training"]
    );
}

#[test]
fn a_loader_worker_forked_before_its_first_call_begins_the_first_epoch_at_its_fork() {
    use iorepro_format::processes::ProcessStart;
    use iorepro_format::{Manifest, Op};
    let tmp = tempfile::tempdir().unwrap();
    let ms = 1_000_000i64;
    let t0 = 1_000_000_000_000i64;
    let (main, worker, code, ckpt) = (100, 200, "/venv/lib/site.py", "/ckpt/model.pt");
    // (pid, when, call, path, descriptor, bytes)
    let mut calls: Vec<JobCall> = Vec::new();
    // 300 ms of the main process's start-up; its worker is forked at 50 ms
    // and opens its first sample at 300 ms (a persistent DataLoader
    // worker's first call is its first read).
    for k in 0..60 {
        calls.push((main, k * 5 * ms, Op::Open, code.into(), 3, 0));
        calls.push((main, k * 5 * ms + ms, Op::Read, code.into(), 3, 4096));
        calls.push((main, k * 5 * ms + 2 * ms, Op::Close, code.into(), 3, 0));
    }
    for step in 0..4 {
        let path = format!("/data/sample-{step}.bin");
        let at = 300 * ms + step * 100 * ms;
        calls.push((worker, at, Op::Open, path.clone(), 10, 0));
        calls.push((worker, at + ms, Op::Read, path.clone(), 10, 1 << 20));
        calls.push((worker, at + 2 * ms, Op::Close, path, 10, 0));
    }
    calls.push((main, 700 * ms, Op::Open, ckpt.to_string(), 11, 0));
    for k in 0..4 {
        calls.push((
            main,
            701 * ms + k * 10 * ms,
            Op::Write,
            ckpt.into(),
            11,
            1 << 20,
        ));
    }
    calls.push((main, 742 * ms, Op::Close, ckpt.to_string(), 11, 0));
    calls.sort_by_key(|c| c.1);
    let rows = process_rows(&calls, t0);
    let first_epoch = |forked: Option<i64>| {
        let dir = tempfile::tempdir_in(tmp.path()).unwrap();
        let trace = write_process_rows(dir.path(), &rows, "");
        let mut m = Manifest::load(&trace).unwrap();
        m.process_starts = forked
            .map(|at| ProcessStart {
                host: None,
                pid: worker,
                parent: main,
                forked_unix_ns: t0 + at,
            })
            .into_iter()
            .collect();
        m.store(&trace).unwrap();
        let r = replay_ok(
            &trace,
            &dir.path().join("target"),
            &["--timing", "original", "--json"],
        );
        r["training"]["epochs"][0]["duration_s"].as_f64().unwrap()
    };
    // From the worker's first call to the save: 0.4 s; from its fork, 0.65 s.
    // A replay running behind its schedule on a busy machine forks late and
    // catches up by the save, so the bounds lean low.
    let from_fork = first_epoch(Some(50 * ms));
    eprintln!("first epoch from the fork {from_fork} s");
    assert!(
        (0.56..0.75).contains(&from_fork),
        "first epoch {from_fork} s"
    );
    let from_first_call = first_epoch(None);
    eprintln!("first epoch from the first call {from_first_call} s");
    assert!(
        (0.37..0.5).contains(&from_first_call),
        "first epoch {from_first_call} s"
    );
}
