//! Against a real single-node Slurm cluster (Debian's slurm-wlm, see
//! `iorepro_tests::slurm`): `srun -n 4 iorepro-replay` as a launched replay,
//! and the prolog/epilog recipe of `deploy/slurm/` capturing one job's I/O.
//! Each test says why and returns where Slurm (or capturing) cannot run.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use iorepro_format::Op;
use iorepro_tests::bins::{bin, scratch, wait_for};
use iorepro_tests::capture::probe_support;
use iorepro_tests::rows::load_with_manifest;
use iorepro_tests::samples::{sample, TORCH_DDP};
use iorepro_tests::slurm::{install_recipe, Cluster};

/// `srun -n 4 [srun_args] iorepro-replay SAMPLE --json [replay_args]`:
/// rank 0's report, checked to be the only output and to hold exactly
/// twice the bytes of the 2-rank trace (the ranks replay as clones, so the
/// launcher's part is what is checked).
fn srun_replay(
    cluster: &Cluster,
    root: &Path,
    srun_args: &[&str],
    replay_args: &[&str],
) -> serde_json::Value {
    let out = cluster
        .command("srun")
        .args(["-n", "4", "--time", "5"])
        .args(srun_args)
        .arg(bin("iorepro-replay"))
        .arg(sample(TORCH_DDP))
        .arg("--target")
        .arg(root.join("target"))
        .arg("--json")
        .args(["--data", "replicate", "--checkpoint", "replicate"])
        .args(replay_args)
        .output()
        .expect("srun runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "srun {srun_args:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // One report: rank 0's, gathered from all four; the others print nothing.
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("srun's output is not one JSON report ({e}):\n{stdout}"));
    assert_eq!(report["ranks"], 4, "{report}");
    assert!(
        report["errors"].as_array().is_some_and(|e| e.is_empty()),
        "{report}"
    );
    let source_ranks = report["trace"]["ranks"].as_u64().expect("trace.ranks");
    assert_eq!(source_ranks, 2, "the sample is a 2-rank job");
    for key in ["read_bytes", "write_bytes"] {
        let traced = report["trace"][key].as_u64().unwrap();
        assert!(traced > 0, "{key}");
        assert_eq!(
            report[key].as_u64().unwrap(),
            4 / source_ranks * traced,
            "{key}: 4 ranks of a 2-rank trace move twice its bytes"
        );
    }
    eprintln!(
        "srun -n 4 {srun_args:?}: rendezvous {}, {} B read, {} B written in {:.2} s",
        report["rendezvous"]["mechanism"],
        report["read_bytes"],
        report["write_bytes"],
        report["duration_s"].as_f64().unwrap_or(0.0)
    );
    report
}

#[test]
fn srun_launches_a_replay_whose_rank_0_reports_for_all() {
    let _one = Cluster::lock();
    let root = scratch("slurm-srun");
    let cluster = match Cluster::start(&root.join("slurm"), "") {
        Ok(c) => c,
        Err(why) => {
            return iorepro_tests::skip::cannot_run(format!("Slurm cannot run here: {why}"))
        }
    };
    // Without MPI: the ranks meet in a directory off the target.
    let rdv = root.join("rendezvous");
    let files = srun_replay(
        &cluster,
        &root,
        &[],
        &["--rendezvous-dir", rdv.to_str().unwrap()],
    );
    assert_eq!(
        files["rendezvous"]["mechanism"], "files",
        "{}",
        files["rendezvous"]
    );
    // Through PMIx: a build with the `mpi` feature (as `cargo xtask test`
    // builds it) meets over MPI; one without it falls back to files.
    let plugins = cluster.command("srun").arg("--mpi=list").output().unwrap();
    let plugins = String::from_utf8_lossy(&plugins.stdout).to_string()
        + &String::from_utf8_lossy(&plugins.stderr);
    if !plugins.contains("pmix") {
        return eprintln!("srun --mpi=pmix not tried: this Slurm has no pmix plugin:\n{plugins}");
    }
    let pmix = srun_replay(&cluster, &root, &["--mpi=pmix"], &[]);
    let mechanism = pmix["rendezvous"]["mechanism"].as_str().unwrap_or("");
    assert!(
        ["mpi", "files"].contains(&mechanism),
        "{}",
        pmix["rendezvous"]
    );
}

#[test]
fn the_prolog_captures_its_job_and_no_one_else_with_slurm_ranks() {
    let _one = Cluster::lock();
    let root = scratch("slurm-prolog");
    if let Err(why) = probe_support(&root) {
        return iorepro_tests::skip::cannot_run(why);
    }
    let io = root.join("io");
    std::fs::create_dir_all(io.join("job")).unwrap();
    std::fs::create_dir_all(io.join("noise")).unwrap();
    let traces = root.join("traces");
    let env = format!(
        "IOREPRO_COLLECT={}\nIOREPRO_TRACE_DIR={}\nIOREPRO_STATE_DIR={}\n\
         IOREPRO_COLLECT_ARGS=\"--path-prefix {}\"\nIOREPRO_STOP_TIMEOUT=30\n",
        bin("iorepro-collect").display(),
        traces.display(),
        root.join("state").display(),
        io.display()
    );
    let extra = install_recipe(&root, &env);
    let cluster = match Cluster::start(&root.join("slurm"), &extra) {
        Ok(c) => c,
        Err(why) => {
            return iorepro_tests::skip::cannot_run(format!("Slurm cannot run here: {why}"))
        }
    };
    // Someone else's I/O under the same prefix, all through the job.
    let mut noise = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "while :; do dd if=/dev/zero of={0}/n bs=64k count=4 status=none; cat {0}/n >/dev/null; sleep 0.05; done",
            io.join("noise").display()
        ))
        .spawn()
        .unwrap();
    // Rank r writes (r + 1) MiB to its own file and reads it back.
    let job = root.join("job.sh");
    std::fs::write(
        &job,
        format!(
            "#!/bin/bash\nsrun -n 2 bash -c 'f={}/rank$SLURM_PROCID; \
             dd if=/dev/zero of=$f bs=64k count=$((16 * (SLURM_PROCID + 1))) status=none; \
             cat $f >/dev/null'\n",
            io.join("job").display()
        ),
    )
    .unwrap();
    let out = cluster
        .command("sbatch")
        .args(["--wait", "-n", "2", "--time", "5", "-o"])
        .arg(root.join("job.out"))
        .arg(&job)
        .output()
        .expect("sbatch runs");
    let _ = noise.kill();
    let _ = noise.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "sbatch failed: {stdout}{}\njob output: {}\nslurmd: {}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(root.join("job.out")).unwrap_or_default(),
        cluster.log("slurmd")
    );
    let job_id = stdout
        .split_whitespace()
        .last()
        .expect("Submitted batch job N")
        .to_string();
    let job_dir = traces.join(format!("job_{job_id}"));
    // The epilog runs once the job has ended: the manifest is its sign.
    let manifest_there = || {
        std::fs::read_dir(&job_dir).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.path().join("manifest.json").is_file())
        })
    };
    assert!(
        wait_for(Duration::from_secs(60), manifest_there),
        "no trace under {} within 60 s; slurmd's log:\n{}",
        job_dir.display(),
        cluster.log("slurmd")
    );
    let node = std::fs::read_dir(&job_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("manifest.json").is_file())
        .unwrap();
    assert!(
        node.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("host="),
        "{}",
        node.display()
    );
    let (manifest, rows) = load_with_manifest(&node);
    // Stopped by the epilog's SIGTERM, cleanly: a manifest, nothing lost.
    assert_eq!(manifest.dropped_events, 0);
    let extra = serde_json::to_value(&manifest).unwrap();
    assert_eq!(extra["stopped_by_signal"], libc::SIGTERM, "{extra}");
    let others: Vec<_> = rows
        .iter()
        .filter(|r| r.path.is_some() && !r.under(&io.join("job")))
        .collect();
    assert!(
        others.is_empty(),
        "I/O of another process: {:?}",
        others.first()
    );
    for rank in 0..2i32 {
        let file = io.join("job").join(format!("rank{rank}"));
        let mine: Vec<_> = rows
            .iter()
            .filter(|r| r.path.as_deref() == Some(file.to_str().unwrap()))
            .collect();
        let moved = |op: Op| -> u64 { mine.iter().filter(|r| r.op == op).map(|r| r.moved()).sum() };
        let size = (rank as u64 + 1) << 20;
        assert_eq!(moved(Op::Write), size, "rank {rank} writes");
        assert_eq!(moved(Op::Read), size, "rank {rank} reads");
        assert!(
            mine.iter().all(|r| r.rank == Some(rank)),
            "rank {rank}'s rows carry SLURM_PROCID: {:?}",
            mine.iter().map(|r| r.rank).collect::<Vec<_>>()
        );
    }
    // The recipe keeps the collector's status lines beside the trace.
    let status = traces.join(format!(
        "job_{job_id}.{}.status.jsonl",
        node.file_name()
            .unwrap()
            .to_string_lossy()
            .trim_start_matches("host=")
    ));
    let lines =
        std::fs::read_to_string(&status).unwrap_or_else(|e| panic!("{}: {e}", status.display()));
    let last: serde_json::Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    assert_eq!(last["done"], true, "{last}");
    assert_eq!(last["events"], manifest.events, "{last}");
    eprintln!(
        "job {job_id}: {} rows; last status line: {last}",
        rows.len()
    );
}
