//! Time at N: a trace of the DLIO-like benchmark at 2 processes, replayed
//! at 4 ranks with `--timing original`, against the benchmark run at 4
//! processes on the same storage, as it is and throttled below what 4
//! processes ask for, reads and writes, on a device of its own
//! (`tests/jobs/time_fidelity.py` runs both sides
//! and the plan's prediction; `cargo xtask bench --only time-fidelity`
//! prints the same figures). The replay must take the job at 4's time, not
//! the job at 2's, and answer "stalled" where the job at 4 stalls.
//!
//! The bounds here are looser than the figures the bench gives on a quiet
//! machine (span within 1-5 %, epochs within 2-9 %): CI runs other test
//! binaries' builds and this one's sleeps beside them.
//!
//! The job at 4 runs twice on each storage, and at 4 the replay is judged
//! by how far it lies outside the range of those two runs: the job's own
//! epochs differ by up to 20 % from one run to the next here (its saves on
//! the storage as it is by a factor of 5), a variation no replay could be
//! asked to predict.
//!
//! With `--batch global` the benchmark holds its global batch (8 samples a
//! step, a save every 2 steps), and the replay at 4 must make every save
//! the job at 4 makes.

use std::sync::Mutex;

use iorepro_tests::bins::{job_driver, scratch};
use iorepro_tests::skip::cannot_run;
use iorepro_tests::timing::{judge_twice, Missed};
use serde_json::Value;

/// The storages the driver may run, in its document's keys.
const STORAGES: [&str; 3] = ["same_scale", "fast", "throttled"];

/// How far a 64 MiB save on the throttled storage, replayed or planned, may
/// lie beyond the job's two runs. Its write calls copy it into the page
/// cache before the fsync, in 0.03 s or 0.25-0.33 s on this VM from one
/// save to the next (a page its host took back faults at its next use),
/// and the trace, the job at 4 and the replay each draw their own; the
/// write rate's share is 0.80 s, so 0.3 s of copy either side moves a save
/// by up to 35 % (runs on a 2-core VM missed 25 % and 10 %; docs/TIMING.md states the limit).
const THROTTLED_SAVE_BOUND: f64 = 0.35;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn list(v: &Value) -> Vec<f64> {
    v.as_array()
        .map_or(Vec::new(), |a| a.iter().map(f).collect())
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The driver's JSON document, or `None` where this machine cannot run it
/// (said through [`cannot_run`]). The document is left in the scratch
/// folder (`result.json`, kept when the test fails) and summed up on
/// stderr a line a storage, so that a failure's message is not lost below
/// a long document in a log that shows only part of it.
fn drive(name: &str, args: &[&str]) -> Option<Value> {
    // One at a time: each times jobs and replays against the same disk.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch(name);
    let out = job_driver("time_fidelity.py")
        .arg("--scratch")
        .arg(&dir)
        .args(args)
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(3) {
        cannot_run(stderr.trim());
        return None;
    }
    assert!(out.status.success(), "time_fidelity.py failed:\n{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let kept = dir.join("result.json");
    std::fs::write(&kept, &out.stdout).unwrap_or_else(|e| panic!("{}: {e}", kept.display()));
    for storage in STORAGES {
        let s = &r[storage];
        if !s.is_null() {
            eprintln!(
                "{storage}: job span {:.2} s, epochs {:?}, saves {:?}; replay span {:.2} s, epochs {:?}, saves {:?}; judged errors {}",
                f(&s["job"]["span_s"]),
                list(&s["job"]["epochs_s"]),
                list(&s["job"]["checkpoints_s"]),
                f(&s["replay"]["span_s"]),
                list(&s["replay"]["epochs_s"]),
                list(&s["replay"]["checkpoints_s"]),
                judged(s)
            );
        }
    }
    eprintln!("the whole document: {}", kept.display());
    // A replay's errors are no matter of the machine's load: asserted at
    // once, never run again.
    for storage in STORAGES {
        if let Some(errors) = r.get(storage).map(|s| &s["replay"]["errors"]) {
            assert!(
                errors.as_array().is_some_and(|a| a.is_empty()),
                "{storage}: the replay's errors {errors}"
            );
        }
    }
    Some(r)
}

/// The replay made every save the job made, on each storage the driver
/// ran, and the job `job_saves` where given: what the plan decides from
/// the trace, not the machine's load, so asserted at once.
fn assert_every_save_replayed(r: &Value, job_saves: Option<usize>) {
    for storage in STORAGES {
        let Some(s) = r.get(storage) else {
            continue;
        };
        let saves = |side: &str| list(&s[side]["checkpoints_s"]).len();
        if let Some(n) = job_saves {
            assert_eq!(saves("job"), n, "{storage}: the job's saves");
        }
        assert_eq!(saves("replay"), saves("job"), "{storage}: {}", s["errors"]);
    }
}

/// The replay's errors to judge on one storage: beyond the job's own two
/// runs where it ran twice (at N), else against its one run (same scale).
fn judged(side: &Value) -> &Value {
    match side.get("errors_beyond_job") {
        Some(e) => e,
        None => &side["errors"],
    }
}

#[test]
fn a_replay_at_twice_the_ranks_takes_the_jobs_time_there_fast_and_throttled() {
    judge_twice(
        || drive("time-fidelity", &["--job-again"]),
        |r| {
            let mut m = Missed::default();
            for storage in STORAGES {
                let s = &r[storage];
                let e = judged(s);
                // As it is, the span holds three 64 MiB saves, whose buffered writes take
                // 0.04 s or 0.25 s here from one run to the next (the job's own
                // and the replay's alike): up to 0.6 s of a 3.5 to 6.5 s span.
                m.unless(f(&e["span"]).abs() <= 0.20, || {
                    format!("{storage}: span error {}", e["span"])
                });
                for (i, err) in list(&e["epochs"]).iter().enumerate() {
                    m.unless(err.abs() <= 0.15, || {
                        format!("{storage}: epoch {} error {err}", i + 1)
                    });
                }
                for (i, pts) in list(&e["au_points"]).iter().enumerate() {
                    m.unless(pts.abs() <= 10.0, || {
                        format!("{storage}: epoch {} AU off by {pts} points", i + 1)
                    });
                }
            }
            // The answer a user came for: fed on the storage as it is, stalled on
            // the throttled one, as the job at 4 was.
            let au = |storage: &str, side: &str| mean(&list(&r[storage][side]["au_percent"]));
            for side in ["job", "replay"] {
                m.unless(au("fast", side) >= 85.0, || {
                    format!(
                        "fast: the {side}'s AU {:.1} % (fed: 85 % or more)",
                        au("fast", side)
                    )
                });
                m.unless(au("throttled", side) < 80.0, || {
                    format!(
                        "throttled: the {side}'s AU {:.1} % (stalled: under 80 %)",
                        au("throttled", side)
                    )
                });
            }
            let stall = f(&r["throttled"]["replay"]["stall_s"]);
            m.unless(stall > 0.5, || {
                format!("throttled: the replay's stall {stall} s (over 0.5 s)")
            });
            // Saves written at a known rate take their bytes' time, the job's and
            // the replay's alike (within 4 % beyond the job's runs on a quiet
            // machine; on the storage as it is they vary too much to judge).
            let throttled = judged(&r["throttled"]);
            for (i, err) in list(&throttled["checkpoints"]).iter().enumerate() {
                m.unless(err.abs() <= THROTTLED_SAVE_BOUND, || {
                    format!("throttled: save {} error {err}", i + 1)
                });
            }
            // The plan, told the throttle's rates, foresees the same: each
            // epoch within 10 % beyond the job's runs (0-4.8 % on a quiet
            // machine), each save as the replay's, carrying the traced run's
            // copy into the page cache where the job at 4 has its own.
            for (i, err) in list(&throttled["plan_epochs"]).iter().enumerate() {
                m.unless(err.abs() <= 0.10, || {
                    format!("the plan's epoch {} error {err}", i + 1)
                });
            }
            let planned = list(&throttled["plan_checkpoints"]);
            let made = list(&r["throttled"]["job"]["checkpoints_s"]).len();
            assert_eq!(planned.len(), made, "the plan's saves against the job's");
            for (i, err) in planned.iter().enumerate() {
                m.unless(err.abs() <= THROTTLED_SAVE_BOUND, || {
                    format!("the plan's save {} error {err}", i + 1)
                });
            }
            m
        },
    );
}

/// A job that holds its global batch fixed makes the same steps and saves
/// at any size: at 4 each rank reads half of what a traced rank read a
/// step. `--batch global` replays every traced save, in the job at 4's time.
#[test]
fn with_the_global_batch_held_every_save_is_made_at_twice_the_ranks() {
    let args = ["--batch", "global", "--epochs", "2", "--job-again"];
    judge_twice(
        || drive("time-fidelity-global", &args).inspect(|r| assert_every_save_replayed(r, Some(4))),
        |r| {
            let mut m = Missed::default();
            for storage in STORAGES {
                let s = &r[storage];
                // Loose: four fsync'd saves of 64 MiB vary from 0.04 to 0.4 s
                // each here, run to run; the job at 2 takes 80 % longer than at 4.
                let span = &judged(s)["span"];
                m.unless(f(span).abs() <= 0.25, || {
                    format!("{storage}: span error {span}")
                });
            }
            let meetings = &r["meetings"];
            m.unless(meetings["verdict"] == "meet", || {
                format!("the plan's meetings: {meetings} (the ranks meet at each save)")
            });
            let au = |storage: &str| mean(&list(&r[storage]["replay"]["au_percent"]));
            m.unless(au("fast") >= 85.0, || {
                format!(
                    "fast: the replay's AU {:.1} % (fed: 85 % or more)",
                    au("fast")
                )
            });
            m.unless(au("throttled") < 75.0, || {
                format!(
                    "throttled: the replay's AU {:.1} % (stalled: under 75 %)",
                    au("throttled")
                )
            });
            m
        },
    );
}

/// A job whose rank 0 saves while the others read on (no barrier around
/// the save, as a save in the background) is replayed without meetings at
/// its saves: the trace shows the readers going on, and a replay that made
/// them wait would add every save's time to a bandwidth-bound run (it took
/// 31 % longer than the job at 4 on the throttled storage, beyond the
/// job's own two runs, before the plan told the two kinds of job apart).
#[test]
fn a_job_whose_ranks_read_on_through_its_saves_is_replayed_without_meeting_there() {
    let args = [
        "--batch",
        "global",
        "--epochs",
        "2",
        "--no-meet",
        "--job-again",
        "--storage",
        "same_scale",
        "--storage",
        "throttled",
    ];
    judge_twice(
        || drive("time-fidelity-read-on", &args).inspect(|r| assert_every_save_replayed(r, None)),
        |r| {
            let mut m = Missed::default();
            let meetings = &r["meetings"];
            m.unless(
                meetings["verdict"] == "read_on" && list(&meetings["not_met"]).len() == 4,
                || format!("the plan's meetings: {meetings} (4 saves the ranks read on through)"),
            );
            for storage in ["same_scale", "throttled"] {
                let s = &r[storage];
                let span = &judged(s)["span"];
                m.unless(f(span).abs() <= 0.15, || {
                    format!("{storage}: span error {span}")
                });
            }
            m
        },
    );
}
