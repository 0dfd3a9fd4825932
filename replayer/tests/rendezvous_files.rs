//! Processes of a launcher without MPI (torchrun's variables here) meet
//! through files: on the target by default, which the run says once, and
//! off it with `--rendezvous-dir`. Polling is O(N): a rank other than 0
//! looks only at its own arrival, the release file and the abort note, never
//! at the other ranks' files.

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use common::*;

/// Starts rank `rank` of `world` the way torchrun would.
fn torchrun_rank(
    prefix: &[&str],
    trace: &Path,
    target: &Path,
    rank: u32,
    world: u32,
    args: &[&str],
) -> Child {
    let bin = replay_bin();
    let (program, pre) = match prefix.split_first() {
        Some((p, rest)) => (p.to_string(), rest.to_vec()),
        None => (bin.display().to_string(), Vec::new()),
    };
    let mut cmd = Command::new(program);
    cmd.args(pre);
    if !prefix.is_empty() {
        cmd.arg(&bin);
    }
    cmd.arg(trace)
        .arg("--target")
        .arg(target)
        .args(["--json", "--timeout", "60s"])
        .args(args)
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("TORCHELASTIC_RUN_ID", "files-test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(children: Vec<Child>) -> Vec<Output> {
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

#[test]
fn on_the_target_the_run_says_so_once_and_cleans_up() {
    let (_tmp, trace, target) = synth_with_target(TWO_RANKS);
    let outs = finish(
        (0..3)
            .map(|r| torchrun_rank(&[], &trace, &target, r, 3, &[]))
            .collect(),
    );
    let report = json_ok(&outs[0]);
    assert_eq!(report["ranks"], 3);
    assert_eq!(report["rendezvous"]["mechanism"], "files");
    assert!(report["rendezvous"]["dir"]
        .as_str()
        .unwrap()
        .ends_with(".iorepro-rendezvous/files-test"));
    let note = "on the storage under test";
    let err0 = String::from_utf8_lossy(&outs[0].stderr);
    assert_eq!(err0.matches(note).count(), 1, "{err0}");
    for o in &outs[1..] {
        assert!(o.status.success());
        assert!(o.stdout.is_empty(), "only rank 0 prints the report");
        assert!(!String::from_utf8_lossy(&o.stderr).contains(note));
    }
    let files = listing(&target);
    assert!(
        !files.iter().any(|f| f.starts_with(".iorepro-rendezvous")),
        "{files:?}"
    );
}

#[test]
fn a_rank_other_than_0_polls_only_the_release_and_the_abort_note() {
    let strace_ok = Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !strace_ok {
        iorepro_tests::skip::cannot_run("strace is not installed (cargo xtask setup installs it)");
        return;
    }
    let (tmp, trace, target) = synth_with_target(TWO_RANKS);
    let meet = tmp.path().join("meet");
    let log = tmp.path().join("rank2.strace");
    let strace = [
        "strace",
        "-f",
        "-qq",
        "-e",
        "trace=openat2,getdents64",
        "-o",
        log.to_str().unwrap(),
    ];
    let args = ["--rendezvous-dir", meet.to_str().unwrap()];
    let children = (0..4)
        .map(|r| {
            let prefix: &[&str] = if r == 2 { &strace } else { &[] };
            torchrun_rank(prefix, &trace, &target, r, 4, &args)
        })
        .collect();
    let outs = finish(children);
    let report = json_ok(&outs[0]);
    assert_eq!(report["rendezvous"]["barriers"], 5);
    let calls = std::fs::read_to_string(&log).unwrap();
    // What rank 2 opened in the job's rendezvous directory (openat2 paths
    // are relative to the directory the replayer opened, `meet`).
    let touched: Vec<&str> = calls
        .lines()
        .filter_map(|l| l.split('"').nth(1)?.strip_prefix("files-test/"))
        .collect();
    assert!(!touched.is_empty(), "rank 2 met the others: {calls}");
    for p in &touched {
        let own_or_shared = p.contains("/r2.")
            || p.ends_with(".go")
            || *p == "abort"
            || *p == "alive.r0"
            || p.ends_with("r2.json")
            || p.ends_with(".tmp")
            || *p == "reports"
            || p.starts_with("b") && !p.contains('/');
        assert!(own_or_shared, "rank 2 looked at {p}: {touched:?}");
    }
    assert!(
        !calls.contains("getdents64"),
        "rank 2 never lists the directory"
    );
}
