//! The PyTorch training job of `tests/jobs/` and the dataset it reads.

use std::path::{Path, PathBuf};
use std::process::Command;

use rand::{RngCore, SeedableRng};

use crate::bins::workspace_root;

/// The Python interpreter that has torch, resolved to the real executable
/// (not a version-manager shim), or why the job cannot run here.
pub fn torch_python() -> Result<PathBuf, String> {
    let out = Command::new("python3")
        .args(["-c", "import sys, torch; print(sys.executable)"])
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "python3 cannot import torch (install it: pip install torch): {}",
            String::from_utf8_lossy(&out.stderr)
                .trim()
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Writes `files` sample files of varying sizes (around `typical` bytes,
/// incompressible) into `dir` and returns their total size.
pub fn make_dataset(dir: &Path, files: usize, typical: usize) -> u64 {
    std::fs::create_dir_all(dir).unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
    let mut total = 0u64;
    for i in 0..files {
        // Sizes that are not multiples of a page, so a short or missing
        // final read shows up in the byte totals.
        let size = typical + (i * 4093) % (typical / 2);
        let mut buf = vec![0u8; size];
        rng.fill_bytes(&mut buf);
        std::fs::write(dir.join(format!("sample_{i:04}.bin")), &buf).unwrap();
        total += size as u64;
    }
    total
}

/// One run of `tests/jobs/train_ddp.py`.
#[derive(Debug, Clone)]
pub struct TrainJob {
    pub data: PathBuf,
    pub ckpt: PathBuf,
    pub report: PathBuf,
    pub ranks: u32,
    pub epochs: u32,
    pub batch: u32,
    pub prefetch: u32,
    pub ckpt_every: u32,
    pub compute_s: f64,
    /// Rank 0 also writes the model with `torch.save` at each checkpoint.
    pub rank0_save: bool,
}

impl TrainJob {
    /// The default shape used by the tests: 2 ranks, 2 epochs of 64 files,
    /// 16 steps per rank per epoch, a DCP checkpoint every 10 steps (3
    /// saves). The workers load 4 batches ahead, which makes the start of the
    /// job a read burst above the steady one-batch-per-step pace.
    pub fn new(root: &Path) -> Self {
        TrainJob {
            data: root.join("dataset"),
            ckpt: root.join("ckpt"),
            report: root.join("job-report.json"),
            ranks: 2,
            epochs: 2,
            batch: 2,
            prefetch: 4,
            ckpt_every: 10,
            compute_s: 0.15,
            rank0_save: false,
        }
    }

    /// The command line: torchrun (as `python -m torch.distributed.run`, the
    /// same entry point) launching the job on `ranks` local processes.
    pub fn command(&self, python: &Path) -> Vec<String> {
        let script = workspace_root().join("tests/jobs/train_ddp.py");
        let mut v: Vec<String> = vec![
            python.display().to_string(),
            "-m".into(),
            "torch.distributed.run".into(),
            "--standalone".into(),
            format!("--nproc_per_node={}", self.ranks),
            script.display().to_string(),
        ];
        for (k, val) in [
            ("--data", self.data.display().to_string()),
            ("--ckpt", self.ckpt.display().to_string()),
            ("--report", self.report.display().to_string()),
            ("--epochs", self.epochs.to_string()),
            ("--batch", self.batch.to_string()),
            ("--prefetch", self.prefetch.to_string()),
            ("--ckpt-every", self.ckpt_every.to_string()),
            ("--compute-s", self.compute_s.to_string()),
        ] {
            v.push(k.into());
            v.push(val);
        }
        if self.rank0_save {
            v.push("--rank0-save".into());
        }
        v
    }

    /// What the job reported (rank 0 writes it at the end).
    pub fn report(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(&self.report)
            .unwrap_or_else(|e| panic!("{}: {e}", self.report.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", self.report.display()))
    }
}

/// Sizes of every regular file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                out.push((e.path(), m.len()));
            }
        }
    }
    out.sort();
    out
}
