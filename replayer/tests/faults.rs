//! Faults in the middle of a replay end it within a bounded time with an
//! error that names the cause: one rank's process killed under mpirun (the
//! run ends within 5 s), a rank that dies where no launcher aborts the
//! others, and the target directory removed or unmounted under a running
//! replay.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Two ranks, 100 steps of 50 ms compute: about 5 s under `--timing original`,
/// long enough to break something in the middle.
const SLOW: &str = r#"
name = "slow"
ranks = 2
seed = 7
[dataset]
dir = "/data/train"
files = 2
file_size = "1MiB"
read_size = "64KiB"
[training]
steps = 100
compute_time = "50ms"
reads_per_step = 1
[checkpoint]
every = 50
bytes_per_rank = "256KiB"
write_size = "64KiB"
dir = "/checkpoints"
"#;

/// Started in its own process group, so a hung run can be killed whole.
fn spawn_group(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap()
}

/// Waits at most `limit` for `child`; on a hang, kills its process group and fails.
fn wait_bounded(child: Child, limit: Duration, what: &str) -> (Output, Duration) {
    let start = Instant::now();
    let pgid = child.id() as i32;
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    while !waiter.is_finished() {
        if start.elapsed() > limit {
            // SAFETY: kills the process group this test started.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let out = waiter.join().unwrap();
            panic!(
                "{what} hung for {limit:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (waiter.join().unwrap(), start.elapsed())
}

/// Polls until `path` exists (the run reached a known point), at most 60 s.
fn wait_for(what: &str, found: impl Fn() -> bool) {
    let start = Instant::now();
    while !found() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never saw {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `rank` has arrived at the start barrier (barrier 0) of any job
/// meeting in the rendezvous directory `meet`.
fn arrived_at_start(meet: &Path, rank: u32) -> bool {
    let prefix = format!("r{rank}.");
    std::fs::read_dir(meet)
        .map(|jobs| {
            jobs.flatten().any(|job| {
                std::fs::read_dir(job.path().join("b0")).is_ok_and(|rd| {
                    rd.flatten()
                        .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                })
            })
        })
        .unwrap_or(false)
}

/// Pid of the process started by `parent` whose environment says `var=value`.
fn child_with_env(parent: u32, var: &str, value: &str) -> Option<i32> {
    let want = format!("{var}={value}");
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Field 4 (after the parenthesised command) is the parent pid.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(parent) {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if env.split(|&b| b == 0).any(|kv| kv == want.as_bytes()) {
            return Some(pid);
        }
    }
    None
}

#[test]
fn a_rank_killed_under_mpirun_ends_the_run() {
    if !have_mpirun() {
        return;
    }
    let (_tmp, trace, target) = synth_with_target(SLOW);
    let child = spawn_group(
        Command::new("mpirun")
            .args(["--allow-run-as-root", "--oversubscribe", "-np", "4"])
            .arg(replay_bin())
            .arg(&trace)
            .arg("--target")
            .arg(&target)
            .args(["--timing", "original", "--json", "--timeout", "120s"])
            // A copy of the data per replica, so rank 3 prepares the last of it.
            .args(["--data", "replicate"]),
    );
    let mpirun = child.id();
    // The data is prepared (the last of it by rank 3): the ranks are replaying.
    wait_for("the prepared data", || {
        target
            .join("data/rep-0001/data/train/shard-00001.bin")
            .exists()
    });
    std::thread::sleep(Duration::from_millis(1000));
    let victim = child_with_env(mpirun, "OMPI_COMM_WORLD_RANK", "2").expect("rank 2's process");
    // SAFETY: a process of the run this test started.
    unsafe { libc::kill(victim, libc::SIGKILL) };
    let (out, took) = wait_bounded(child, Duration::from_secs(60), "mpirun");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("rank 2"), "the lost rank is named: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        took < Duration::from_secs(5),
        "ended {took:?} after the kill"
    );
}

#[test]
fn a_rank_that_dies_where_no_launcher_aborts_is_named() {
    // Three processes started the way a launcher would, but nothing kills the
    // others when one dies (torchrun with no restarts left, a hand-made
    // launcher); they meet through files.
    let (tmp, trace, target) = synth_with_target(SLOW);
    let meet = tmp.path().join("meet");
    let ranks: Vec<Child> = (0..3)
        .map(|r| {
            spawn_group(
                Command::new(replay_bin())
                    .arg(&trace)
                    .arg("--target")
                    .arg(&target)
                    .args(["--timing", "original", "--json", "--timeout", "120s"])
                    .args(["--run-id", "no-abort", "--rendezvous-dir"])
                    .arg(&meet)
                    .env("RANK", r.to_string())
                    .env("WORLD_SIZE", "3"),
            )
        })
        .collect();
    wait_for("the start barrier", || {
        (0..3).all(|r| arrived_at_start(&meet, r))
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut ranks = ranks.into_iter();
    let (r0, r1, mut r2) = (
        ranks.next().unwrap(),
        ranks.next().unwrap(),
        ranks.next().unwrap(),
    );
    r2.kill().unwrap();
    r2.wait().unwrap();
    let (out1, _) = wait_bounded(r1, Duration::from_secs(60), "rank 1");
    let (out0, took) = wait_bounded(r0, Duration::from_secs(60), "rank 0");
    // Long before the 120 s timeout: the dead process is noticed, not waited for.
    assert!(took < Duration::from_secs(20), "{took:?}");
    let err0 = String::from_utf8_lossy(&out0.stderr);
    assert_eq!(out0.status.code(), Some(1), "{err0}");
    assert!(
        err0.lines()
            .any(|l| l.starts_with("Error:") && l.contains("rank 2 (pid")),
        "rank 0 names the lost rank: {err0}"
    );
    assert!(!err0.contains("panicked"), "{err0}");
    // Rank 0 still prints the report of what the others did.
    let r = json(&out0);
    assert_eq!(r["per_rank"].as_array().unwrap().len(), 2);
    assert!(!String::from_utf8_lossy(&out1.stderr).contains("panicked"));
}

fn replay_in_background(trace: &Path, target: &Path) -> Child {
    spawn_group(
        Command::new(replay_bin())
            .arg(trace)
            .arg("--target")
            .arg(target)
            .args(["--ranks", "2", "--timing", "original", "--json"]),
    )
}

/// Waits until preparing is done and the ranks are replaying.
fn wait_until_replaying(target: &Path) {
    wait_for("the prepared data", || {
        target
            .join("data/rep-0000/data/train/shard-00001.bin")
            .exists()
    });
    std::thread::sleep(Duration::from_millis(700));
}

fn assert_vanished(out: &Output, took: Duration, why: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.lines().any(|l| l.starts_with("Error: target")
            && l.contains("vanished during the replay")
            && l.contains(why)),
        "{err}"
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
    let r = json(out);
    assert!(!r["errors"].as_array().unwrap().is_empty());
}

#[test]
fn the_target_removed_mid_replay_is_a_clear_error() {
    let (_tmp, trace, target) = synth_with_target(SLOW);
    let child = replay_in_background(&trace, &target);
    wait_until_replaying(&target);
    std::fs::remove_dir_all(&target).unwrap();
    let (out, took) = wait_bounded(child, Duration::from_secs(60), "the replay");
    assert_vanished(&out, took, "its directory was removed");
}

/// Detaches a mount when dropped, so a failed assert leaves nothing mounted.
struct LazyUnmount(PathBuf);

impl Drop for LazyUnmount {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .stderr(Stdio::null())
            .status();
    }
}

#[test]
fn the_target_unmounted_mid_replay_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), SLOW);
    let target = tmp.path().join("mnt");
    std::fs::create_dir_all(&target).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64m", "tmpfs"])
        .arg(&target)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        iorepro_tests::skip::cannot_run("cannot mount a tmpfs here (this test needs root)");
        return;
    }
    let _unmount_on_failure = LazyUnmount(target.clone());
    let child = replay_in_background(&trace, &target);
    wait_until_replaying(&target);
    // A lazy unmount fails no call of the running replay: its files stay
    // open on the detached mount. Only the replayer's own check can see it.
    let ok = Command::new("umount")
        .arg("-l")
        .arg(&target)
        .status()
        .unwrap();
    assert!(ok.success());
    let (out, took) = wait_bounded(child, Duration::from_secs(60), "the replay");
    assert_vanished(&out, took, "unmounted or replaced");
}
