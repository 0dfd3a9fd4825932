use super::*;
use crate::activity::Caller;
use crate::activity::Named;
use iorepro_format::schema::Op;

const MS: i64 = 1_000_000;
// Sizes in rows are signed (the `ret` column).
const MIB: i64 = iorepro_format::units::MIB_BYTES as i64;

fn kinds(p: &[Phase]) -> Vec<&'static str> {
    p.iter().map(|p| p.kind.as_str()).collect()
}

fn activity(calls: &[(i64, i64, Op, i64, i32)]) -> Activity {
    let mut a = Activity::default();
    for &(ts, dur, op, ret, rank) in calls {
        let caller = Caller {
            rank: Some(rank),
            pid: 1,
        };
        a.observe(ts, dur, op, ret, caller);
    }
    a.finish();
    a
}

fn detect_calls(calls: &[(i64, i64, Op, i64, i32)]) -> Vec<Phase> {
    detect(&activity(calls))
}

/// A job of `steps` steps of `per_step` bytes every `step` ns, with a
/// burst of `burst` bytes first and a checkpoint every `every` steps.
fn job(
    burst: i64,
    per_step: i64,
    steps: i64,
    step: i64,
    every: i64,
) -> Vec<(i64, i64, Op, i64, i32)> {
    let mut c = Vec::new();
    let mut t = 0;
    for _ in 0..burst / MIB {
        c.push((t, MS / 4, Op::Read, MIB, 0));
        t += MS / 2;
    }
    for s in 1..=steps {
        t += step;
        c.push((t, MS / 4, Op::Read, per_step, 0));
        if s % every == 0 {
            for r in 0..2 {
                for k in 0..4 {
                    c.push((t + MS + k * MS / 2, MS / 4, Op::Write, 2 * MIB, r));
                }
            }
            c.push((t + 4 * MS, 10 * MS, Op::Fsync, 0, 0));
            t += 20 * MS;
        }
    }
    c.sort_by_key(|c| c.0);
    c
}

#[test]
fn finds_load_steady_reading_and_each_checkpoint() {
    let p = detect_calls(&job(32 * MIB, MIB, 12, 30 * MS, 4));
    assert_eq!(
        kinds(&p),
        [
            "load",
            "read",
            "checkpoint",
            "read",
            "checkpoint",
            "read",
            "checkpoint"
        ]
    );
    for c in p.iter().filter(|p| p.kind == PhaseKind::Checkpoint) {
        assert_eq!(c.write_bytes, 16 * MIB as u64);
        assert_eq!(c.max_writers, 2);
        // From the first write (1 ms into the step) to the fsync's end (14 ms).
        assert_eq!(c.end_unix_ns - c.start_unix_ns, 13 * MS, "{c:?}");
    }
    assert_eq!(p[0].read_bytes, 32 * MIB as u64, "{:?}", p[0]);
    for w in p.windows(2) {
        assert_eq!(w[0].end_unix_ns, w[1].start_unix_ns);
    }
}

#[test]
fn a_job_reading_at_one_pace_loads_its_first_batch() {
    let p = detect_calls(&job(0, 2 * MIB, 40, 20 * MS, 10));
    assert_eq!(kinds(&p)[..2], ["load", "read"]);
    assert_eq!(p[0].read_bytes, 2 * MIB as u64);
    assert_eq!(
        p.iter().filter(|p| p.kind == PhaseKind::Checkpoint).count(),
        4
    );
}

#[test]
fn an_epoch_read_ahead_then_compute_is_load_then_idle() {
    // The loader reads a whole epoch ahead at once, the job computes for
    // over a second, then the next epoch is read as the steps need it.
    let mut c = Vec::new();
    for i in 0..40 {
        c.push((i * 2 * MS, MS, Op::Read, MIB / 2, 0));
    }
    for i in 0..40 {
        c.push((1_500 * MS + i * 25 * MS, MS, Op::Read, MIB / 2, 0));
    }
    let p = detect_calls(&c);
    assert_eq!(kinds(&p), ["load", "idle", "read"]);
    assert_eq!(p[0].read_bytes, 20 * MIB as u64);
}

#[test]
fn a_walk_of_the_dataset_before_loading_is_metadata() {
    // 2,000 stats and listings over 200 ms (a dataset walk), then the
    // job loads and reads; a job reading small files (open, stat, read
    // 256 KiB, close each) stays a read phase.
    let mut c = Vec::new();
    for i in 0..2_000 {
        let op = if i % 10 == 0 { Op::Getdents } else { Op::Stat };
        c.push((i * MS / 10, 20_000, op, 0, 0));
    }
    let t = 300 * MS;
    for i in 0..200 {
        let at = t + i * 5 * MS;
        c.push((at, 10_000, Op::Open, 3, 0));
        c.push((at + 20_000, 10_000, Op::Stat, 0, 0));
        c.push((at + 40_000, 100_000, Op::Read, MIB / 4, 0));
        c.push((at + 150_000, 10_000, Op::Close, 0, 0));
    }
    let p = detect_calls(&c);
    assert_eq!(kinds(&p)[0], "metadata", "{p:?}");
    assert!(
        p[1..].iter().all(|p| p.kind != PhaseKind::Metadata),
        "{p:?}"
    );
    assert_eq!(p[0].metadata_calls, 2_000);
    assert_eq!(p[0].read_bytes, 0);
    let rate = p[0].metadata_calls_per_s();
    assert!((9_000.0..=10_100.0).contains(&rate), "{rate}");
}

#[test]
fn small_writes_are_not_checkpoints() {
    let mut c = vec![(0, MS, Op::Read, MIB, 0)];
    for i in 1..100 {
        c.push((i * 20 * MS, MS, Op::Read, MIB, 0));
        c.push((i * 20 * MS + 5 * MS, 10_000, Op::Write, 4096, 0));
    }
    let p = detect_calls(&c);
    assert!(p.iter().all(|p| p.kind != PhaseKind::Checkpoint), "{p:?}");
}

#[test]
fn two_saves_of_the_same_state_close_together_are_two_checkpoints() {
    // Two ranks save the same state twice, 180 ms apart (a few steps of
    // compute, nothing read between), each save's files closed at its end.
    let mut c = vec![(0, MS, Op::Read, 4 * MIB, 0)];
    for save in 0..2 {
        let t = 50 * MS + save * 180 * MS;
        for r in 0..2 {
            for k in 0..4 {
                c.push((t + k * MS, MS / 2, Op::Write, MIB, r));
            }
            c.push((t + 6 * MS, 10_000, Op::Close, 0, r));
        }
    }
    let p = detect_calls(&c);
    let n = p.iter().filter(|p| p.kind == PhaseKind::Checkpoint).count();
    assert_eq!(n, 2, "{:?}", kinds(&p));
}

#[test]
fn a_save_into_a_folder_of_its_own_begins_a_checkpoint() {
    // Two saves 300 ms apart, nothing read between: each makes its folder,
    // the two ranks write their shards (4 MiB each) and close them; 60 ms
    // later rank 0 writes the model (4 MiB) on its own. The second save's
    // shards are not "about as much again" as the whole first save, but
    // its folder begins it.
    let mut c = vec![(0, MS, Op::Read, 4 * MIB, 0)];
    for save in 0..2 {
        let t = 50 * MS + save * 300 * MS;
        for r in 0..2 {
            c.push((t + r as i64 * MS, 50_000, Op::Mkdir, 0, r));
            for k in 0..4 {
                c.push((t + 5 * MS + k * MS, MS / 2, Op::Write, MIB, r));
            }
            c.push((t + 10 * MS, 10_000, Op::Close, 0, r));
        }
        for k in 0..4 {
            c.push((t + 70 * MS + k * MS, MS / 2, Op::Write, MIB, 0));
        }
        c.push((t + 75 * MS, 10_000, Op::Close, 0, 0));
    }
    c.sort_by_key(|c| c.0);
    let p = detect_calls(&c);
    let saves: Vec<&Phase> = p
        .iter()
        .filter(|p| p.kind == PhaseKind::Checkpoint)
        .collect();
    assert_eq!(saves.len(), 2, "{:?}", kinds(&p));
    assert!(
        saves.iter().all(|s| s.write_bytes == 12 * MIB as u64),
        "{saves:?}"
    );
}

/// A save of 2 ranks: shards, a 12 ms fsync, then rank 0's model file;
/// `reader` reads a source file's 58 KB in that pause. Steps of 128 KiB
/// reads before and after.
fn save_with_a_read_in_its_pause(reader: Caller) -> Vec<Phase> {
    let mut a = Activity::default();
    let rank = |r: i32| Caller {
        rank: Some(r),
        pid: 10 + r,
    };
    for s in 0..8 {
        let t = s * 20 * MS + if s >= 4 { 200 * MS } else { 0 };
        for r in 0..2 {
            a.observe(t + r as i64 * MS, MS / 4, Op::Read, 128 << 10, rank(r));
        }
    }
    let t = 100 * MS;
    for k in 0..4 {
        for r in 0..2 {
            a.observe(t + k * MS, MS / 4, Op::Write, MIB, rank(r));
        }
    }
    a.observe(t + 5 * MS, 12 * MS, Op::Fsync, 0, rank(0));
    a.observe(t + 10 * MS, MS / 10, Op::Read, 58_000, reader);
    for k in 0..4 {
        a.observe(t + 18 * MS + k * MS, MS / 4, Op::Write, MIB, rank(0));
    }
    a.finish();
    detect(&a)
}

#[test]
fn a_launchers_read_in_a_saves_pause_does_not_split_it() {
    let launcher = Caller { rank: None, pid: 5 };
    let p = save_with_a_read_in_its_pause(launcher);
    let saves: Vec<&Phase> = p
        .iter()
        .filter(|p| p.kind == PhaseKind::Checkpoint)
        .collect();
    assert_eq!(saves.len(), 1, "{:?}", kinds(&p));
    assert_eq!(saves[0].write_bytes, 12 * MIB as u64);
    // A rank that reads there is the job reading again: two checkpoints,
    // as before.
    let p = save_with_a_read_in_its_pause(Caller {
        rank: Some(1),
        pid: 11,
    });
    let saves = p.iter().filter(|p| p.kind == PhaseKind::Checkpoint).count();
    assert_eq!(saves, 2, "{:?}", kinds(&p));
}

#[test]
fn a_model_then_its_optimizer_state_is_one_checkpoint() {
    // One writer, a pause between two files of different sizes.
    let mut c = vec![(0, MS, Op::Read, 4 * MIB, 0)];
    for k in 0..4 {
        c.push((50 * MS + k * MS, MS / 2, Op::Write, MIB, 0));
    }
    c.push((56 * MS, 10_000, Op::Close, 0, 0));
    for k in 0..8 {
        c.push((250 * MS + k * MS, MS / 2, Op::Write, MIB, 0));
    }
    c.push((260 * MS, 10_000, Op::Close, 0, 0));
    let p = detect_calls(&c);
    let n = p.iter().filter(|p| p.kind == PhaseKind::Checkpoint).count();
    assert_eq!(n, 1, "{:?}", kinds(&p));
}

#[test]
fn back_to_back_checkpoints_without_reading_are_split_by_idle() {
    // Two saves 100 ms apart with nothing read between: the short trace
    // of a replay test; each is found, the stretch between is idle.
    let mut c = vec![(0, MS, Op::Read, 4 * MIB, 0)];
    for save in 0..2 {
        let t = 50 * MS + save * 600 * MS;
        for k in 0..4 {
            c.push((t + k * MS, MS / 2, Op::Write, MIB, 0));
        }
    }
    let p = detect_calls(&c);
    assert_eq!(
        kinds(&p),
        ["load", "idle", "checkpoint", "idle", "checkpoint"]
    );
}

/// The index of the first checkpoint phase, which the detector began at
/// `first_write`.
fn first_save_at(p: &[Phase], first_write: i64) -> usize {
    let save = p
        .iter()
        .position(|p| p.kind == PhaseKind::Checkpoint)
        .expect("a checkpoint phase");
    assert_eq!(p[save].start_unix_ns, first_write);
    save
}

/// A save that looks up its checkpoint's path, serialises the state in
/// memory for 300 ms, then writes it in one call (Lightning's atomic save):
/// the checkpoint begins at the look-up; a name first seen before the last
/// reading (a resume probe at start-up) moves nothing.
#[test]
fn a_save_begins_where_its_path_is_first_named() {
    let mut c = Vec::new();
    let mut t = 0;
    for _ in 0..40 {
        c.push((t, MS, Op::Read, MIB, 0));
        t += 20 * MS;
    }
    let last_read_end = t - 20 * MS + MS;
    let named = t + 50 * MS;
    let first_write = named + 300 * MS;
    c.push((first_write, 60 * MS, Op::Write, 64 * MIB, 0));
    c.push((first_write + 60 * MS, 5 * MS, Op::Close, 0, 0));
    let mut later = first_write + 400 * MS;
    for _ in 0..40 {
        c.push((later, MS, Op::Read, MIB, 0));
        later += 20 * MS;
    }
    let a = activity(&c);
    let p = detect(&a);
    let save = first_save_at(&p, first_write);

    let by_loop = |ns| Named { ns, pid: 1 };
    let namings = [by_loop(5 * MS), by_loop(named)];
    let moved = crate::phases::begin_saves_where_named(p.clone(), a.reads.runs(), &namings);
    assert_eq!(moved[save].start_unix_ns, named);
    assert_eq!(moved[save - 1].end_unix_ns, named);
    let shift = (first_write - named) as f64 / 1e9;
    assert!((p[save].start_s - moved[save].start_s - shift).abs() < 1e-9);
    assert_eq!(moved[save].end_unix_ns, p[save].end_unix_ns);

    // Named only before the last reading: nothing moves.
    let early = last_read_end - 10 * MS;
    let kept = crate::phases::begin_saves_where_named(p.clone(), a.reads.runs(), &[by_loop(early)]);
    assert_eq!(kept[save].start_unix_ns, first_write);
}

/// A loop that stops short of its loader (a step budget, a save mid-epoch)
/// saves while its workers still read the batches they prefetched: their
/// reading is not the loop's, and the save begins where the loop named its
/// checkpoint all the same. Reading by the naming process itself holds it.
#[test]
fn a_workers_prefetch_does_not_hold_back_where_a_save_begins() {
    let (main, worker) = (1, 2);
    let mut a = Activity::default();
    let read = |a: &mut Activity, ts: i64, pid: i32| {
        let by = Caller { rank: None, pid };
        a.observe(ts, MS, Op::Read, MIB, by);
    };
    let mut t = 0;
    for _ in 0..40 {
        read(&mut a, t, worker);
        t += 20 * MS;
    }
    let named = t;
    let first_write = named + 300 * MS;
    // The worker reads on into the save, past its first write.
    for k in 0..20 {
        read(&mut a, named + 10 * MS + k * 20 * MS, worker);
    }
    let main_caller = Caller {
        rank: None,
        pid: main,
    };
    a.observe(first_write, 60 * MS, Op::Write, 64 * MIB, main_caller);
    a.observe(first_write + 60 * MS, 5 * MS, Op::Close, 0, main_caller);
    let mut later = first_write + 400 * MS;
    for _ in 0..40 {
        read(&mut a, later, worker);
        later += 20 * MS;
    }
    a.finish();
    let p = detect(&a);
    let save = first_save_at(&p, first_write);
    let by = |pid| [Named { ns: named, pid }];
    let moved = crate::phases::begin_saves_where_named(p.clone(), a.reads.runs(), &by(main));
    // The load phase ends at the naming; the idle stretch before the first
    // write, and the prefetch read in it, are the save's.
    let spans: Vec<(&str, i64, i64)> = moved
        .iter()
        .map(|p| (p.kind.as_str(), p.start_unix_ns, p.end_unix_ns))
        .collect();
    let end = p[save].end_unix_ns;
    assert_eq!(spans[..2], [("load", 0, named), ("checkpoint", named, end)]);
    assert_eq!(moved[1].write_bytes, p[save].write_bytes);
    assert!((moved[1].start_s - named as f64 / 1e9).abs() < 1e-9);
    // Named by the process that was still reading: nothing moves.
    let kept = crate::phases::begin_saves_where_named(p.clone(), a.reads.runs(), &by(worker));
    assert_eq!(kept[save].start_unix_ns, first_write);
}
