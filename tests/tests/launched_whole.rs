//! Jobs as users launch them, captured whole (no `--path-prefix`) the way
//! the README says: `iorepro-collect --out T -- mpirun -np 2 JOB`, with the
//! job's stdout redirected to a file, a Hydra-style run directory
//! (`.hydra/*.yaml`, `summary.json`, per-rank outputs) and a log appended
//! through the run (`tests/jobs/run_record.py`). The jobs are the DLIO-like
//! benchmark (`bench_like.py`, rank 0 saving at each epoch's end, or every
//! K steps) and the PyTorch DDP job (`train_ddp.py`, DataLoader workers,
//! DCP saves every K steps), started by Open MPI's `mpirun`, not torchrun,
//! and by Slurm's `srun` in a batch job that the prolog recipe of
//! `deploy/slurm/` captures whole.
//!
//! Each trace of 2 ranks is replayed at 4 and checked against the same job
//! run at 4 processes, whose own files are the ground truth: the replay
//! exits 0 whatever the launcher's files were, reads the dataset bytes and
//! writes the checkpoint bytes of the job at 4 (within 1%), in as many
//! checkpoint files and saves; it leaves out only what its reasons name;
//! and every log and run record of the capture has the role `log` or
//! `output`, every checkpoint file `checkpoint`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use iorepro_format::Op;
use iorepro_tests::bins::{bin, run_json, scratch, wait_for, workspace_root};
use iorepro_tests::capture::probe_support;
use iorepro_tests::http::free_port;
use iorepro_tests::job::{files_under, make_dataset, torch_python};
use iorepro_tests::rows::load;
use iorepro_tests::skip::cannot_run;
use iorepro_tests::slurm::{install_recipe, Cluster};

const FILES: usize = 32;
const FILE_BYTES: usize = 1 << 20;
const R: u32 = 2;
const N: u32 = 4;

/// Reasons a whole capture may leave calls out for: names that are not
/// storage, the launcher's own files, and roles a replay does not need.
const ALLOWED_REASONS: [&str; 10] = [
    "role_code",
    "role_system",
    "role_other",
    "launcher",
    "not_a_file",
    "root_directory",
    "kernel_file",
    "device",
    "pipe_socket_or_anonymous",
    "empty_path",
];

/// One job as launched: its script and arguments.
struct Job {
    name: &'static str,
    script: &'static str,
    args: Vec<String>,
    python: PathBuf,
}

/// How the job's processes are started.
enum Launcher {
    /// `mpirun -np R` under `iorepro-collect --out T --`.
    Mpirun,
    /// `srun -n R` in a batch job of a one-node cluster whose prolog
    /// captures every job whole into `traces/job_ID/host=NAME`.
    Srun { cluster: Cluster, traces: PathBuf },
}

impl Launcher {
    /// The launcher, ready, or why it cannot run here.
    fn start(kind: &str, root: &Path) -> Result<Launcher, String> {
        if kind == "mpirun" {
            let ok = Command::new("mpirun")
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            return if ok {
                Ok(Launcher::Mpirun)
            } else {
                Err("mpirun is not installed (apt package openmpi-bin; `cargo xtask setup`)".into())
            };
        }
        let traces = root.join("traces");
        let env = format!(
            "IOREPRO_COLLECT={}\nIOREPRO_TRACE_DIR={}\nIOREPRO_STATE_DIR={}\n\
             IOREPRO_COLLECT_ARGS=\nIOREPRO_STOP_TIMEOUT=30\n",
            bin("iorepro-collect").display(),
            traces.display(),
            root.join("state").display(),
        );
        let extra = install_recipe(root, &env);
        let cluster = Cluster::start(&root.join("slurm"), &extra)
            .map_err(|why| format!("Slurm cannot run here: {why}"))?;
        Ok(Launcher::Srun { cluster, traces })
    }

    /// Runs `job` at `ranks` processes in `run` (checkpoints to `run/ckpt`,
    /// the run directory `run/out`), its stdout and stderr redirected to
    /// `run/stdout.log` as a user's `... > run.log 2>&1` does; captured
    /// whole into `trace` when one is given (the prolog captures every
    /// Slurm job; that trace is then moved there).
    fn run(&self, job: &Job, ranks: u32, data: &Path, run: &Path, trace: Option<&Path>) {
        std::fs::create_dir_all(run.join("ckpt")).unwrap();
        let script = workspace_root().join("tests/jobs").join(job.script);
        let mut args = vec![
            job.python.display().to_string(),
            script.display().to_string(),
        ];
        args.extend(["--data".into(), data.display().to_string()]);
        args.extend(["--ckpt".into(), run.join("ckpt").display().to_string()]);
        args.extend(["--out".into(), run.join("out").display().to_string()]);
        args.extend(job.args.iter().cloned());
        // torch.distributed meets on a port of this run's own.
        let port = free_port();
        let log = run.join("stdout.log");
        match self {
            Launcher::Mpirun => {
                let file = std::fs::File::create(&log).unwrap();
                let mut cmd = match trace {
                    Some(t) => {
                        let mut c = Command::new(bin("iorepro-collect"));
                        c.arg("--out").arg(t).args(["--", "mpirun"]);
                        c
                    }
                    None => Command::new("mpirun"),
                };
                cmd.args([
                    "--allow-run-as-root",
                    "--oversubscribe",
                    "--bind-to",
                    "none",
                ])
                .args(["-np", &ranks.to_string()])
                .args(["-x", &format!("MASTER_PORT={port}")])
                .args(&args)
                .current_dir(run)
                .stdout(file.try_clone().unwrap())
                .stderr(file);
                let status = cmd.status().expect("mpirun runs");
                assert!(
                    status.success(),
                    "{cmd:?} failed ({status}):\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            Launcher::Srun { cluster, traces } => {
                let batch = run.join("job.sh");
                let script = format!(
                    "#!/bin/bash\ncd {}\nexport MASTER_PORT={port}\nsrun -n {ranks} {} > {} 2>&1\n",
                    run.display(),
                    args.join(" "),
                    log.display()
                );
                std::fs::write(&batch, script).unwrap();
                let out = cluster
                    .command("sbatch")
                    .args(["--wait", "-n", &ranks.to_string(), "--time", "5", "-o"])
                    .arg(run.join("batch.out"))
                    .arg(&batch)
                    .output()
                    .expect("sbatch runs");
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success(),
                    "sbatch failed: {stdout}{}\njob output: {}\nslurmd: {}",
                    String::from_utf8_lossy(&out.stderr),
                    std::fs::read_to_string(&log).unwrap_or_default(),
                    cluster.log("slurmd")
                );
                let id = stdout
                    .split_whitespace()
                    .last()
                    .expect("Submitted batch job N");
                let job_dir = traces.join(format!("job_{id}"));
                // The epilog stops the collector once the job has ended: a
                // manifest that says the trace is complete is the sign (the
                // collector writes one, incomplete, as it starts, and may
                // still be writing its last segment when `sbatch --wait`
                // returns).
                let complete = |dir: &Path| {
                    std::fs::read_to_string(dir.join("manifest.json"))
                        .ok()
                        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                        .is_some_and(|m| m["complete"] == true)
                };
                let node = || {
                    std::fs::read_dir(&job_dir)
                        .ok()
                        .and_then(|rd| rd.flatten().map(|e| e.path()).find(|p| complete(p)))
                };
                assert!(
                    wait_for(Duration::from_secs(60), || node().is_some()),
                    "no complete trace under {} within 60 s; slurmd's log:\n{}",
                    job_dir.display(),
                    cluster.log("slurmd")
                );
                if let Some(t) = trace {
                    std::fs::rename(node().unwrap(), t).unwrap();
                }
            }
        }
    }
}

/// Checkpoint files beneath `dir` (any depth) and their bytes; none when
/// there is no such directory (a rank that writes no checkpoint).
fn checkpoint_files(dir: &Path) -> (usize, u64) {
    if !dir.is_dir() {
        return (0, 0);
    }
    let files = files_under(dir);
    (files.len(), files.iter().map(|(_, n)| n).sum())
}

/// What the job reports it saved (its summary.json, written by rank 0).
fn saves_reported(run: &Path) -> usize {
    let text = std::fs::read_to_string(run.join("out/summary.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["checkpoints"].as_array().map_or(0, Vec::len)
}

fn check(launcher: &str, job: Job) {
    // One Slurm cluster at a time.
    let _one = (launcher == "srun").then(Cluster::lock);
    let root = scratch(&format!("launched-whole-{launcher}-{}", job.name));
    if let Err(why) = probe_support(&root) {
        return cannot_run(why);
    }
    let launcher = match Launcher::start(launcher, &root) {
        Ok(l) => l,
        Err(why) => return cannot_run(why),
    };
    let data = root.join("dataset");
    make_dataset(&data, FILES, FILE_BYTES);
    let traced_run = root.join(format!("job-at-{R}"));
    let trace = root.join("trace");
    launcher.run(&job, R, &data, &traced_run, Some(&trace));
    // The job at N: its own files are the ground truth.
    let truth = root.join(format!("job-at-{N}"));
    launcher.run(&job, N, &data, &truth, None);

    // Roles: logs and run records are never checkpoints.
    let files = run_json(
        Command::new(bin("iorepro-trace"))
            .arg("files")
            .arg("--json")
            .arg(&trace),
    );
    let mut seen = BTreeSet::new();
    for f in files["files"].as_array().unwrap() {
        let path = f["path"].as_str().unwrap();
        let role = f["role"].as_str().unwrap();
        let Some(rel) = Path::new(path).strip_prefix(&traced_run).ok() else {
            continue;
        };
        if f["directory"].as_bool() == Some(true) {
            continue;
        }
        let want: &[&str] = if rel.starts_with("ckpt") {
            &["checkpoint"]
        } else if rel.starts_with("out") || rel == Path::new("stdout.log") {
            &["log", "output"]
        } else {
            continue;
        };
        assert!(
            want.contains(&role),
            "{}: role {role}, want one of {want:?}",
            rel.display()
        );
        seen.insert(rel.to_path_buf());
    }
    for must in [
        "out/summary.json",
        "out/.hydra/config.yaml",
        "out/train.log",
        "stdout.log",
    ] {
        assert!(
            seen.contains(Path::new(must)),
            "{must} not in the files of the capture: {seen:?}"
        );
    }

    // The replay at N.
    let target = root.join("target");
    let record = root.join("record");
    let report = run_json(
        Command::new(bin("iorepro-replay"))
            .arg(&trace)
            .arg("--target")
            .arg(&target)
            // The job at N holds each rank's batch, as DLIO does.
            .args(["--ranks", &N.to_string(), "--batch", "per-rank"])
            .args(["--timing", "afap", "--json", "--record-ops"])
            .arg(&record),
    );
    assert!(
        report["errors"].as_array().is_some_and(|e| e.is_empty()),
        "errors: {}",
        report["errors"]
    );
    for (why, t) in report["left_out"]["reasons"].as_object().unwrap() {
        assert!(
            ALLOWED_REASONS.contains(&why.as_str()),
            "left out for {why}: {t} (report: {})",
            report["left_out"]
        );
    }
    let rows = load(&record);
    let data_bytes: u64 = rows
        .iter()
        .filter(|r| r.op == Op::Read && r.path.as_deref().is_some_and(|p| p.contains("/dataset/")))
        .map(|r| r.moved())
        .sum();
    let ckpt_dirs: Vec<PathBuf> = std::fs::read_dir(target.join("ranks"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    let (mut replay_files, mut replay_bytes) = (0, 0);
    for d in ckpt_dirs {
        let (n, b) = checkpoint_files(&d.join(traced_run.strip_prefix("/").unwrap()).join("ckpt"));
        replay_files += n;
        replay_bytes += b;
    }
    let (job_files, job_bytes) = checkpoint_files(&truth.join("ckpt"));
    // Each process reads every file of its share once an epoch.
    let dataset: u64 = files_under(&data).iter().map(|(_, n)| n).sum();
    let job_data = dataset * epochs(&job);
    let plan = report["plan"]["checkpoint_timing"].clone();
    eprintln!(
        "launched-whole {} {R}->{N}: data {} vs {} B, checkpoints {} files {} B vs {} files {} B; \
         saves planned {} vs reported by the job at {N} {}; {plan}",
        job.name,
        data_bytes,
        job_data,
        replay_files,
        replay_bytes,
        job_files,
        job_bytes,
        planned_saves(&trace),
        saves_reported(&truth),
    );
    let err = |a: u64, b: u64| (a as f64 - b as f64).abs() / (b as f64).max(1.0);
    assert!(
        err(data_bytes, job_data) <= 0.01,
        "dataset bytes {data_bytes} vs the job's {job_data}"
    );
    assert!(
        err(replay_bytes, job_bytes) <= 0.01,
        "checkpoint bytes {replay_bytes} vs the job's {job_bytes}"
    );
    assert_eq!(replay_files, job_files, "checkpoint files");
    assert_eq!(planned_saves(&trace), saves_reported(&truth), "saves");
}

/// The epochs a job runs (its `--epochs`, or the script's default).
fn epochs(job: &Job) -> u64 {
    job.args
        .iter()
        .position(|a| a == "--epochs")
        .and_then(|i| job.args[i + 1].parse().ok())
        .unwrap_or(3)
}

/// The saves the plan makes at N.
fn planned_saves(trace: &Path) -> usize {
    let plan = run_json(Command::new(bin("iorepro-replay")).arg(trace).args([
        "--ranks",
        &N.to_string(),
        "--batch",
        "per-rank",
        "--plan-only",
        "--json",
    ]));
    let saves = &plan["saves"];
    saves["traced"].as_array().map_or(0, Vec::len) - saves["dropped"].as_array().map_or(0, Vec::len)
}

fn bench(name: &'static str, args: &[&str]) -> Job {
    Job {
        name,
        script: "bench_like.py",
        args: args.iter().map(|s| s.to_string()).collect(),
        python: PathBuf::from("python3"),
    }
}

/// The DDP job saving every 4 steps, or (`every` 0) at each epoch's end.
fn ddp(name: &'static str, every: u32) -> Option<Job> {
    match torch_python() {
        Ok(python) => Some(Job {
            name,
            script: "train_ddp.py",
            args: [
                "--epochs",
                "2",
                "--ckpt-every",
                &every.to_string(),
                "--compute-s",
                "0.02",
                "--hidden",
                "256",
            ]
            .map(String::from)
            .to_vec(),
            python,
        }),
        Err(why) => {
            cannot_run(why);
            None
        }
    }
}

fn bench_epochs() -> Job {
    bench(
        "bench-epoch",
        &["--epochs", "3", "--ckpt-mib", "16", "--compute-s", "0.01"],
    )
}

fn bench_steps() -> Job {
    bench(
        "bench-steps",
        &[
            "--epochs",
            "2",
            "--ckpt-mib",
            "8",
            "--ckpt-every-steps",
            "4",
            "--compute-s",
            "0.03",
        ],
    )
}

#[test]
fn a_benchmark_saving_each_epoch_under_mpirun_replays_at_twice_its_ranks() {
    check("mpirun", bench_epochs());
}

#[test]
fn a_benchmark_saving_every_k_steps_under_mpirun_replays_at_twice_its_ranks() {
    check("mpirun", bench_steps());
}

#[test]
fn a_pytorch_job_saving_every_k_steps_under_mpirun_replays_at_twice_its_ranks() {
    if let Some(job) = ddp("ddp-steps", 4) {
        check("mpirun", job);
    }
}

#[test]
fn a_pytorch_job_saving_each_epoch_under_mpirun_replays_at_twice_its_ranks() {
    if let Some(job) = ddp("ddp-epoch", 0) {
        check("mpirun", job);
    }
}

#[test]
fn a_benchmark_saving_each_epoch_under_srun_replays_at_twice_its_ranks() {
    check("srun", bench_epochs());
}

#[test]
fn a_benchmark_saving_every_k_steps_under_srun_replays_at_twice_its_ranks() {
    check("srun", bench_steps());
}

#[test]
fn a_pytorch_job_saving_every_k_steps_under_srun_replays_at_twice_its_ranks() {
    if let Some(job) = ddp("ddp-steps", 4) {
        check("srun", job);
    }
}

#[test]
fn a_pytorch_job_saving_each_epoch_under_srun_replays_at_twice_its_ranks() {
    if let Some(job) = ddp("ddp-epoch", 0) {
        check("srun", job);
    }
}
