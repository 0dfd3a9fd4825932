//! Under Open MPI's mpirun each process is one rank. A build with the `mpi`
//! feature meets through MPI and creates nothing on the target but the
//! replay's data; 4 processes replaying a 2-rank trace move exactly twice
//! its bytes, and rank 0 alone prints the gathered report. A rank that never
//! arrives ends the job at the timeout, and an srun that starts MPI
//! singletons is refused. With `--rendezvous-dir` the ranks meet through
//! files off the target instead.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;

/// Bytes the trace reads and writes, from its rows.
fn trace_bytes(trace: &Path) -> (u64, u64) {
    let reader = iorepro_format::TraceReader::open(trace).unwrap();
    let (mut read, mut write) = (0u64, 0u64);
    for ev in reader.events().unwrap() {
        let ev = ev.unwrap();
        for (i, op) in ev.ops().iter().enumerate() {
            let n = ev.ret().value(i).max(0) as u64;
            if op.is_read_data() {
                read += n;
            } else if op.is_write_data() {
                write += n;
            }
        }
    }
    (read, write)
}

fn mpirun(np: u32, trace: &Path, target: &Path, args: &[&str]) -> Output {
    Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(np.to_string())
        .arg(replay_bin())
        .arg(trace)
        .arg("--target")
        .arg(target)
        .args(args)
        .output()
        .unwrap()
}

/// Everything under the target is the replay's own data: read copies under
/// `data/`, each rank's files under `ranks/`.
fn assert_only_replay_data(target: &Path) {
    let stray: Vec<String> = listing(target)
        .into_iter()
        .filter(|f| !(f.starts_with("data") || f.starts_with("ranks")))
        .collect();
    assert!(
        stray.is_empty(),
        "files on the target besides the replay's data: {stray:?}"
    );
}

/// Whether this build meets through MPI; says so where it does not.
fn built_with_mpi() -> bool {
    if !cfg!(feature = "mpi") {
        iorepro_tests::skip::cannot_run(
            "built without the `mpi` feature (cargo xtask test enables it; \
             or cargo test -p iorepro-replayer --features mpi)",
        );
    }
    cfg!(feature = "mpi")
}

#[test]
fn mpirun_four_processes_gather_one_report() {
    if !have_mpirun() {
        return;
    }
    let (_tmp, trace, target) = synth_with_target(TWO_RANKS);
    let (read, write) = trace_bytes(&trace);
    let out = mpirun(
        4,
        &trace,
        &target,
        &[
            "--data",
            "replicate",
            "--checkpoint",
            "replicate",
            "--json",
            "--timeout",
            "60s",
        ],
    );
    let r = json_ok(&out); // fails unless stdout is exactly one JSON document
    assert_eq!(r["ranks"], 4);
    assert_eq!(r["per_rank"].as_array().unwrap().len(), 4);
    assert_eq!(r["read_bytes"].as_u64().unwrap(), 2 * read);
    assert_eq!(r["write_bytes"].as_u64().unwrap(), 2 * write);
    assert_eq!(r["nodes"], 1);
    // Start, and the start and end of both checkpoints, on every rank.
    assert_eq!(r["rendezvous"]["barriers"], 5);
    assert!(r["checkpoint_skew_ms"]["max"].as_f64().unwrap() >= 0.0);
    let files = listing(&target);
    assert!(
        files.contains(&"data/rep-0001/data/train/shard-00000.bin".to_string()),
        "{files:?}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    if cfg!(feature = "mpi") {
        assert_eq!(r["rendezvous"]["mechanism"], "mpi");
        assert_only_replay_data(&target);
        assert!(!err.contains("note:"), "{err}");
    } else {
        assert_eq!(r["rendezvous"]["mechanism"], "files");
        // Said once, by rank 0, and cleaned up afterwards.
        assert_eq!(err.matches("on the storage under test").count(), 1, "{err}");
        assert_only_replay_data(&target);
    }
}

#[test]
fn a_failed_rank_stops_the_others_and_rank_0_reports_why() {
    if !have_mpirun() {
        return;
    }
    let (_tmp, trace, target) = synth_with_target(TWO_RANKS);
    let prepared = mpirun(4, &trace, &target, &["--prepare", "only"]);
    assert!(prepared.status.success());
    // Rank 2 cannot create its checkpoint directory: a file is in the way
    // (put there after preparing, which would have refused it at once).
    std::fs::remove_dir_all(target.join("ranks/rank-00002")).unwrap();
    std::fs::write(target.join("ranks/rank-00002"), b"in the way").unwrap();
    let start = Instant::now();
    let out = mpirun(
        4,
        &trace,
        &target,
        &["--json", "--timeout", "60s", "--prepare", "skip"],
    );
    assert!(start.elapsed() < Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The partial report, root cause first.
    let r = json(&out);
    assert_eq!(r["per_rank"].as_array().unwrap().len(), 4);
    let errors: Vec<&str> = r["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(
        errors[0].starts_with("rank 2:") && errors[0].contains("Not a directory"),
        "{errors:?}"
    );
    assert!(
        errors[1..]
            .iter()
            .all(|e| e.contains("stopped because another rank failed")),
        "{errors:?}"
    );
}

#[test]
fn a_rendezvous_dir_keeps_the_meeting_off_the_target() {
    if !have_mpirun() {
        return;
    }
    let (tmp, trace, target) = synth_with_target(TWO_RANKS);
    let (read, _) = trace_bytes(&trace);
    let meet = tmp.path().join("shared/meet");
    let out = mpirun(
        3,
        &trace,
        &target,
        &[
            "--data",
            "replicate",
            "--json",
            "--timeout",
            "60s",
            "--rendezvous-dir",
            meet.to_str().unwrap(),
        ],
    );
    let r = json_ok(&out);
    assert_eq!(r["rendezvous"]["mechanism"], "files");
    assert!(r["rendezvous"]["dir"]
        .as_str()
        .unwrap()
        .starts_with(meet.to_str().unwrap()));
    // Ranks 0, 1 and 2 replay source ranks 0, 1 and 0: 3/2 of the reads.
    assert_eq!(2 * r["read_bytes"].as_u64().unwrap(), 3 * read);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("note:"), "{err}");
    assert_only_replay_data(&target);
    assert_eq!(
        listing(&meet),
        Vec::<String>::new(),
        "the job's files removed"
    );
}

#[test]
fn a_rank_that_never_arrives_ends_the_mpi_job_at_the_timeout() {
    if !have_mpirun() || !built_with_mpi() {
        return;
    }
    let (tmp, trace, target) = synth_with_target(TWO_RANKS);
    // A third MPI process that joins the world and then does nothing.
    let src = tmp.path().join("idle.c");
    std::fs::write(
        &src,
        "#include <mpi.h>\n#include <unistd.h>\n\
         int main(int c, char **v) { MPI_Init(&c, &v); sleep(60); MPI_Finalize(); return 0; }\n",
    )
    .unwrap();
    let idle = tmp.path().join("idle");
    let cc = Command::new("mpicc")
        .arg("-o")
        .arg(&idle)
        .arg(&src)
        .status()
        .unwrap();
    assert!(cc.success(), "mpicc (libopenmpi-dev) builds the idle rank");
    let start = Instant::now();
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2"])
        .arg(replay_bin())
        .arg(&trace)
        .arg("--target")
        .arg(&target)
        .args(["--json", "--timeout", "2s", ":", "-np", "1"])
        .arg(&idle)
        .output()
        .unwrap();
    let took = start.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("barrier `data prepared` timed out after 2s"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(took < Duration::from_secs(30), "{took:?}");
}

#[test]
fn srun_without_pmi_is_refused() {
    if !built_with_mpi() {
        return;
    }
    // What each process of `srun -n 4` sees when Slurm has no PMI plugin for
    // the MPI library: its task variables, and an MPI world of one.
    let (_tmp, trace, target) = synth_with_target(TWO_RANKS);
    let out = replay()
        .arg(&trace)
        .arg("--target")
        .arg(&target)
        .env("SLURM_PROCID", "2")
        .env("SLURM_NTASKS", "4")
        .env("SLURM_JOB_ID", "77")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("rank 0 of 1") && err.contains("SLURM_NTASKS") && err.contains("--mpi=pmix"),
        "{err}"
    );
    assert!(!target.exists(), "nothing created");
}
