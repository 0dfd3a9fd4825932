//! Real jobs captured whole, as a user captures them (no `--path-prefix`):
//! a one-line Python job, a Python job whose worker processes read a
//! dataset and that saves checkpoints (tests/jobs/loader_job.py), and a
//! shell pipeline. Each replays at twice its ranks with exit status 0,
//! says what it left out by role, and prepares no more than it reads
//! (plus 64 MiB). For the Python job, the roles the analysis finds are
//! checked against what the job's files are, and its replay against an S3
//! server against its replay into a directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use iorepro_tests::bins::{bin, run_json, run_ok, scratch, workspace_root};
use iorepro_tests::capture::{can_capture, capture};
use iorepro_tests::s3::{files_as_keys, S3Server};

const SLACK: u64 = 64 << 20;

fn capture_whole(trace: &Path, command: &[String]) {
    let out = capture(trace, &[], command);
    assert!(
        out.status.success(),
        "the job failed under the collector: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Replays at `ranks` with `--json` (the default scaling model, as a user
/// runs it); checks exit 0, that it moved the bytes its plan said it would,
/// what was left out, and that prepare wrote no more than the replay read
/// plus [`SLACK`].
fn replay_checked(trace: &Path, target: &Path, ranks: u32) -> serde_json::Value {
    let replay = |extra: &[&str]| {
        run_json(
            Command::new(bin("iorepro-replay"))
                .arg(trace)
                .args([
                    "--target",
                    target.to_str().unwrap(),
                    "--ranks",
                    &ranks.to_string(),
                    "--timing",
                    "afap",
                    "--json",
                ])
                .args(extra),
        )
    };
    let plan = replay(&["--plan-only"]);
    let r = replay(&[]);
    assert!(r["errors"].as_array().unwrap().is_empty(), "{r:#}");
    for key in ["read_bytes", "write_bytes"] {
        assert_eq!(
            r[key], plan[key],
            "{key}: the replay against its plan {plan:#}"
        );
    }
    assert!(
        r["left_out"]["calls"].as_u64().unwrap() > 0,
        "{:#}",
        r["left_out"]
    );
    let read = r["read_bytes"].as_u64().unwrap();
    let prepared = r["prepare"]["bytes_written"].as_u64().unwrap();
    eprintln!(
        "{}: replayed at {ranks} ranks; read {read} B, prepared {prepared} B; left out {} calls ({} B read) by role {}",
        trace.display(),
        r["left_out"]["calls"],
        r["left_out"]["read_bytes"],
        r["left_out"]["roles"]
    );
    assert!(
        prepared <= read + SLACK,
        "prepared {prepared} B for {read} B read"
    );
    r
}

fn python() -> String {
    "python3".into()
}

#[test]
fn the_one_line_job_replays_at_two_ranks() {
    let root = scratch("whole-one-line");
    if !can_capture(&root) {
        return;
    }
    let d = root.join("D");
    std::fs::create_dir_all(&d).unwrap();
    let d = d.display();
    let code = format!(
        "import json, os; os.listdir('/'); os.stat('{d}/.'); open('{d}/f','w').write('x'*65536); open('{d}/f').read()"
    );
    let trace = root.join("trace");
    capture_whole(&trace, &[python(), "-c".into(), code]);
    let r = replay_checked(&trace, &root.join("target"), 2);
    // One process wrote the file and read it back: at two ranks it is still
    // written by one writer, and read back once.
    assert_eq!(r["read_bytes"], 65536);
    assert_eq!(r["write_bytes"], 65536);
}

/// Where a job keeps its files: what each of them is, by where it lies.
struct Truth {
    data: PathBuf,
    ckpt: PathBuf,
    scratch: Option<PathBuf>,
    code: Vec<String>,
}

impl Truth {
    fn new(data: PathBuf, ckpt: PathBuf, scratch: Option<PathBuf>) -> Self {
        let out = run_ok(Command::new("python3").args([
            "-c",
            "import sys, sysconfig; print('\\n'.join({sys.prefix, sys.base_prefix, sys.exec_prefix, *sysconfig.get_paths().values()}))",
        ]));
        let code = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .chain(["/usr".to_string(), "/lib".into(), "/lib64".into()])
            .collect();
        Truth {
            data,
            ckpt,
            scratch,
            code,
        }
    }

    fn of(&self, path: &str) -> Option<&'static str> {
        let p = Path::new(path);
        if p.starts_with(&self.data) {
            Some("dataset")
        } else if p.starts_with(&self.ckpt) {
            Some("checkpoint")
        } else if launcher(path) {
            Some("launcher")
        } else if self.scratch.as_ref().is_some_and(|s| p.starts_with(s))
            || p.starts_with("/dev/shm")
        {
            Some("scratch")
        } else if ["/proc", "/sys", "/dev", "/etc"]
            .iter()
            .any(|d| p.starts_with(d))
            || path.contains(":[")
        {
            Some("system")
        } else if self.code.iter().any(|d| p.starts_with(d))
            || path.ends_with(".py")
            || path.ends_with(".so")
            || path.contains(".so.")
        {
            Some("code")
        } else {
            None
        }
    }

    /// The share of the files whose place is known that got the right
    /// role, by files and by bytes moved; the wrong ones named.
    fn accuracy(&self, trace: &Path, name: &str) -> (f64, f64, Vec<String>) {
        let files = run_json(
            Command::new(bin("iorepro-trace"))
                .arg("files")
                .arg(trace)
                .arg("--json"),
        );
        let (mut known, mut right, mut known_bytes, mut right_bytes) = (0u64, 0u64, 0u64, 0u64);
        let mut wrong = Vec::new();
        let mut unknown = 0u64;
        for f in files["files"].as_array().unwrap() {
            if f["directory"].as_bool().unwrap() {
                continue;
            }
            let path = f["path"].as_str().unwrap();
            let Some(want) = self.of(path) else {
                unknown += 1;
                continue;
            };
            let bytes = f["read_bytes"].as_u64().unwrap() + f["write_bytes"].as_u64().unwrap();
            known += 1;
            known_bytes += bytes;
            if f["role"] == want {
                right += 1;
                right_bytes += bytes;
            } else {
                wrong.push(format!("{path}: {} (is {want})", f["role"]));
            }
        }
        let by_files = right as f64 / known.max(1) as f64;
        let by_bytes = right_bytes as f64 / known_bytes.max(1) as f64;
        eprintln!(
            "roles of {name}: {right}/{known} files right ({:.1} %), {:.2} % of {known_bytes} bytes ({unknown} files of no known place); wrong: {wrong:#?}",
            by_files * 100.0,
            by_bytes * 100.0
        );
        (by_files, by_bytes, wrong)
    }
}

/// The files a launcher or runtime makes beside the job: multiprocessing's
/// `pymp-*` and semaphores, PyTorch's and NCCL's shared memory, Open MPI's
/// and PMIx's session files.
fn launcher(path: &str) -> bool {
    let shm = [
        "torch_",
        "sem.",
        "nccl-",
        "gloo",
        "vader_segment.",
        "sm_segment.",
        "ompi",
    ];
    path.strip_prefix("/dev/shm/")
        .is_some_and(|n| shm.iter().any(|s| n.starts_with(s)))
        || ["/pymp-", "/ompi.", "/pmix", "/torchelastic_"]
            .iter()
            .any(|s| path.contains(s))
}

#[test]
fn a_python_job_with_worker_processes_and_checkpoints_replays_at_twice_its_ranks() {
    let root = scratch("whole-loader");
    if !can_capture(&root) {
        return;
    }
    let (total, job) = loader_job(&root, 48, 200_000);
    let trace = root.join("trace");
    capture_whole(&trace, &job);
    let r = replay_checked(&trace, &root.join("target"), 2);
    // Two epochs over the dataset, shared out over the two replayed ranks,
    // as the job at two ranks reads it.
    assert_eq!(r["read_bytes"].as_u64().unwrap(), 2 * total);
    assert_loader_roles(&root, &trace, "the loader job");
    replays_into_a_bucket_as_into_the_directory(&trace, &root.join("target"), &r);
}

/// The whole capture replayed against an S3 server at the same ranks: the
/// same bytes, and the objects are the directory replay's files.
fn replays_into_a_bucket_as_into_the_directory(
    trace: &Path,
    dir: &Path,
    report: &serde_json::Value,
) {
    let server = match S3Server::start(&[]) {
        Ok(s) => s,
        Err(e) => return iorepro_tests::skip::cannot_run(e),
    };
    server.create_bucket("whole");
    let mut cmd = Command::new(bin("iorepro-replay"));
    cmd.arg(trace)
        .args(["--target", "s3://whole/job", "--ranks", "2", "--json"]);
    let s3 = run_json(server.env(&mut cmd));
    for k in ["read_bytes", "write_bytes", "left_out"] {
        assert_eq!(s3[k], report[k], "{k}");
    }
    assert_eq!(server.objects("whole", "job/"), files_as_keys(dir, "job"));
}

/// tests/jobs/loader_job.py over a dataset of `files` files of `size`
/// bytes under `root`: (the dataset's bytes, the command).
fn loader_job(root: &Path, files: usize, size: usize) -> (u64, Vec<String>) {
    let total = iorepro_tests::job::make_dataset(&root.join("data"), files, size);
    for d in ["ckpt", "scratch"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let arg = |p: PathBuf| p.display().to_string();
    let job = vec![
        python(),
        arg(workspace_root().join("tests/jobs/loader_job.py")),
        "--data".into(),
        arg(root.join("data")),
        "--ckpt".into(),
        arg(root.join("ckpt")),
        "--scratch".into(),
        arg(root.join("scratch")),
    ];
    (total, job)
}

/// The roles of the loader job's files are where it keeps them.
fn assert_loader_roles(root: &Path, trace: &Path, name: &str) {
    let truth = Truth::new(
        root.join("data"),
        root.join("ckpt"),
        Some(root.join("scratch")),
    );
    let (by_files, by_bytes, wrong) = truth.accuracy(trace, name);
    assert!(by_bytes >= 0.99, "{wrong:#?}");
    assert!(by_files >= 0.95, "{wrong:#?}");
}

#[test]
fn a_python_job_under_mpirun_replays_at_twice_its_ranks() {
    let root = scratch("whole-mpirun");
    if !can_capture(&root) {
        return;
    }
    let have = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        return iorepro_tests::skip::cannot_run(
            "mpirun is not installed (apt install openmpi-bin)",
        );
    }
    let (total, job) = loader_job(&root, 32, 150_000);
    let trace = root.join("trace");
    let mut cmd: Vec<String> = [
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        "2",
    ]
    .map(String::from)
    .to_vec();
    cmd.extend(job);
    cmd.extend(["--workers".into(), "2".into()]);
    capture_whole(&trace, &cmd);
    let r = replay_checked(&trace, &root.join("target"), 4);
    // The two traced ranks read two epochs of the dataset between them;
    // the four replayed ranks share the same reads out.
    assert_eq!(r["read_bytes"].as_u64().unwrap(), 2 * total);
    assert_loader_roles(&root, &trace, "the job under mpirun");
}

#[test]
fn a_shell_pipeline_replays_at_twice_its_ranks() {
    let root = scratch("whole-pipeline");
    if !can_capture(&root) {
        return;
    }
    let d = root.join("in");
    let total = iorepro_tests::job::make_dataset(&d, 3, 300_000);
    let out = root.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let script = format!(
        "cat {d}/sample_0000.bin {d}/sample_0001.bin | gzip -1 > {o}/cat.gz && sort {d}/sample_0002.bin | head -c 1000 > {o}/head && rm {o}/head && ls / > /dev/null",
        d = d.display(),
        o = out.display()
    );
    let trace = root.join("trace");
    capture_whole(&trace, &["sh".into(), "-c".into(), script]);
    let r = replay_checked(&trace, &root.join("target"), 2);
    // What the pipeline read, read once between the two replayed ranks.
    assert_eq!(r["read_bytes"].as_u64().unwrap(), total);
}

#[test]
fn a_torchrun_ddp_job_captured_whole_replays_at_twice_its_ranks() {
    let root = scratch("whole-ddp");
    if !can_capture(&root) {
        return;
    }
    let python = match iorepro_tests::job::torch_python() {
        Ok(p) => p,
        Err(why) => return iorepro_tests::skip::cannot_run(why),
    };
    let mut job = iorepro_tests::job::TrainJob::new(&root);
    job.epochs = 1;
    job.compute_s = 0.02;
    // Two DCP saves in the epoch's 8 steps.
    job.ckpt_every = 4;
    let total = iorepro_tests::job::make_dataset(&job.data, 32, 128 << 10);
    std::fs::create_dir_all(&job.ckpt).unwrap();
    let trace = root.join("trace");
    capture_whole(&trace, &job.command(&python));
    let r = replay_checked(&trace, &root.join("target"), 2 * job.ranks);
    // The dataset is shared out over the replayed ranks as the traced ranks
    // shared it: every sample read at least once in all.
    assert!(r["read_bytes"].as_u64().unwrap() >= total, "{r:#}");
    let code = &r["left_out"]["roles"]["code"];
    assert!(code["files"].as_u64().unwrap() > 100, "{code:#}");
    let ckpt_written: u64 = iorepro_tests::job::files_under(&job.ckpt)
        .iter()
        .map(|(_, n)| n)
        .sum();
    assert!(ckpt_written > 0, "the job saved no checkpoint");
    assert!(r["write_bytes"].as_u64().unwrap() > 0, "{r:#}");
    let truth = Truth::new(job.data.clone(), job.ckpt.clone(), None);
    let (by_files, by_bytes, wrong) = truth.accuracy(&trace, "the torchrun DDP job");
    assert!(by_bytes >= 0.99, "{wrong:#?}");
    assert!(by_files >= 0.95, "{wrong:#?}");
}
