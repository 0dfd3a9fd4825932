//! Jobs as users launch them, captured whole (no `--path-prefix`) the way
//! the README says: `iorepro-collect --out T -- mpirun -np 2 JOB`, with the
//! job's stdout redirected to a file, a Hydra-style run directory
//! (`.hydra/*.yaml`, `summary.json`, per-rank outputs) and a log appended
//! through the run (`tests/jobs/run_record.py`). The jobs are the DLIO-like
//! benchmark (`bench_like.py`, rank 0 saving at each epoch's end, or every
//! K steps) and the PyTorch DDP job (`train_ddp.py`, DataLoader workers,
//! DCP saves every K steps), started by Open MPI's `mpirun`, not torchrun.
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

use iorepro_tests::bins::{bin, run_json, scratch, workspace_root};
use iorepro_tests::capture::probe_support;
use iorepro_tests::http::free_port;
use iorepro_tests::job::{files_under, make_dataset, torch_python};
use iorepro_tests::rows::load;
use iorepro_tests::skip::cannot_run;
use iorepro_traces::Op;

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

/// Why `mpirun` cannot run here, if it cannot.
fn mpirun_missing() -> Option<String> {
    let ok = Command::new("mpirun")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (!ok).then(|| "mpirun is not installed (apt package openmpi-bin; `cargo xtask setup`)".into())
}

/// The command line of `job` at `ranks` processes under `mpirun`, writing
/// its checkpoints to `run/ckpt` and its run directory to `run/out`.
fn mpirun_command(job: &Job, ranks: u32, data: &Path, run: &Path) -> Vec<String> {
    let script = workspace_root().join("tests/jobs").join(job.script);
    let mut v: Vec<String> = [
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
        "--bind-to",
        "none",
        "-np",
    ]
    .map(String::from)
    .to_vec();
    v.push(ranks.to_string());
    // torch.distributed meets on a port of this test's own.
    v.extend(["-x".into(), format!("MASTER_PORT={}", free_port())]);
    v.push(job.python.display().to_string());
    v.push(script.display().to_string());
    v.extend(["--data".into(), data.display().to_string()]);
    v.extend(["--ckpt".into(), run.join("ckpt").display().to_string()]);
    v.extend(["--out".into(), run.join("out").display().to_string()]);
    v.extend(job.args.iter().cloned());
    v
}

/// Runs `command` with its stdout and stderr redirected to `run/stdout.log`,
/// as a user's `mpirun ... > run.log 2>&1` does; under the collector when
/// `trace` is given, whole.
fn launch(command: &[String], run: &Path, trace: Option<&Path>) {
    std::fs::create_dir_all(run.join("ckpt")).unwrap();
    let log = std::fs::File::create(run.join("stdout.log")).unwrap();
    let mut cmd = match trace {
        Some(t) => {
            let mut c = Command::new(bin("iorepro-collect"));
            c.arg("--out").arg(t).arg("--");
            c.args(command);
            c
        }
        None => {
            let mut c = Command::new(&command[0]);
            c.args(&command[1..]);
            c
        }
    };
    cmd.current_dir(run)
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    let status = cmd.status().expect("the launcher runs");
    assert!(
        status.success(),
        "{command:?} failed ({status}):\n{}",
        std::fs::read_to_string(run.join("stdout.log")).unwrap_or_default()
    );
}

/// Checkpoint files beneath `dir` (any depth) and their bytes.
fn checkpoint_files(dir: &Path) -> (usize, u64) {
    let files = files_under(dir);
    (files.len(), files.iter().map(|(_, n)| n).sum())
}

/// What the job reports it saved (its summary.json, written by rank 0).
fn saves_reported(run: &Path) -> usize {
    let text = std::fs::read_to_string(run.join("out/summary.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["checkpoints"].as_array().map_or(0, Vec::len)
}

fn check(job: Job) {
    let root = scratch(&format!("launched-whole-{}", job.name));
    if let Err(why) = probe_support(&root) {
        return cannot_run(why);
    }
    if let Some(why) = mpirun_missing() {
        return cannot_run(why);
    }
    let data = root.join("dataset");
    make_dataset(&data, FILES, FILE_BYTES);
    let traced_run = root.join(format!("job-at-{R}"));
    let trace = root.join("trace");
    launch(
        &mpirun_command(&job, R, &data, &traced_run),
        &traced_run,
        Some(&trace),
    );
    // The job at N, uncaptured: its files are the ground truth.
    let truth = root.join(format!("job-at-{N}"));
    launch(&mpirun_command(&job, N, &data, &truth), &truth, None);

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
            .args(["--ranks", &N.to_string(), "--timing", "afap", "--json"])
            .arg("--record-ops")
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
    let job_data = (FILES * FILE_BYTES) as u64 * epochs(&job);
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

#[test]
fn a_benchmark_saving_each_epoch_under_mpirun_replays_at_twice_its_ranks() {
    check(bench(
        "bench-epoch",
        &["--epochs", "3", "--ckpt-mib", "16", "--compute-s", "0.01"],
    ));
}

#[test]
fn a_benchmark_saving_every_k_steps_under_mpirun_replays_at_twice_its_ranks() {
    check(bench(
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
    ));
}

#[test]
fn a_pytorch_job_under_mpirun_replays_at_twice_its_ranks() {
    let python = match torch_python() {
        Ok(p) => p,
        Err(why) => return cannot_run(why),
    };
    check(Job {
        name: "ddp",
        script: "train_ddp.py",
        args: [
            "--epochs",
            "2",
            "--ckpt-every",
            "4",
            "--compute-s",
            "0.02",
            "--hidden",
            "256",
        ]
        .map(String::from)
        .to_vec(),
        python,
    });
}
