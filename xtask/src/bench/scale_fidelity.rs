//! Scale fidelity: does a replay of a job's trace at R ranks, at N ranks,
//! do what the job does at N? The jobs of `tests/jobs/`: `train_scale.py`
//! (torchrun, gloo, DataLoader workers, a DCP save and a rank-0 torch.save
//! every epoch) at R = 1 and 2, `bench_like.py` (DLIO-like, rank-0
//! checkpoints) at R = 1, `train_ddp.py` (DCP saves every 10 steps) at
//! R = 2, and each at N = 4, under the collector; each R-trace is replayed at N with
//! `--record-ops`, by default (`--data shard --checkpoint auto`) and as
//! clones (`replicate`), and `scale_fidelity.py` (DuckDB) reads the I/O the
//! comparison looks at from both sides. One line per job and mode: the error
//! in dataset bytes, whether every dataset file was read as often, the
//! error in checkpoint bytes in all and for the worst writer, checkpoint
//! files and writers (replay/job), and each side's time.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::Ctx;

const HELPER: &str = include_str!("scale_fidelity.py");
const N: u32 = 4;
const FILES: usize = 64;

fn python_with_torch() -> Result<String> {
    let out = Command::new("python3")
        .args(["-c", "import sys, torch, duckdb; print(sys.executable)"])
        .output()
        .context("running python3")?;
    if !out.status.success() {
        bail!("python3 cannot import torch and duckdb (cargo xtask setup installs them)");
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub(super) fn make_dataset(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..FILES {
        let size = (64 << 10) + (i * 4093) % (32 << 10);
        let mut buf = vec![0u8; size];
        for b in buf.iter_mut() {
            // xorshift: incompressible enough, and no dependency for it.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *b = seed as u8;
        }
        std::fs::write(dir.join(format!("sample_{i:04}.bin")), &buf)?;
    }
    Ok(())
}

/// Captures the job at `ranks`; the trace and the job's time under the collector.
fn capture(
    ctx: &Ctx,
    python: &str,
    root: &Path,
    job: &str,
    ranks: u32,
) -> Result<(std::path::PathBuf, f64)> {
    let data = root.join("dataset");
    let ckpt = root.join(format!("{job}-{ranks}")).join("ckpt");
    std::fs::create_dir_all(&ckpt)?;
    let trace = root.join(format!("{job}-trace-{ranks}"));
    let script = ctx.root.join(format!("tests/jobs/{job}.py"));
    let started = Instant::now();
    let out = Command::new(ctx.bin("iorepro-collect"))
        .arg("--out")
        .arg(&trace)
        .arg("--path-prefix")
        .arg(&data)
        .arg("--path-prefix")
        .arg(&ckpt)
        .args(["--", python, "-m", "torch.distributed.run", "--standalone"])
        .arg(format!("--nproc_per_node={ranks}"))
        .arg(&script)
        .arg("--data")
        .arg(&data)
        .arg("--ckpt")
        .arg(&ckpt)
        .output()
        .context("running iorepro-collect")?;
    if !out.status.success() {
        bail!(
            "{job} at {ranks} rank(s) failed under the collector: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok((trace, started.elapsed().as_secs_f64()))
}

fn figures(ctx: &Ctx, trace: &Path) -> Result<Value> {
    let helper = ctx.scratch.join("scale_fidelity.py");
    std::fs::write(&helper, HELPER)?;
    let out = Command::new("python3")
        .arg(&helper)
        .arg(trace)
        .output()
        .context("running python3 (DuckDB)")?;
    if !out.status.success() {
        bail!(
            "scale_fidelity.py failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).context("scale_fidelity.py output")
}

fn err(got: &Value, want: &Value) -> f64 {
    let (g, w) = (got.as_f64().unwrap_or(0.0), want.as_f64().unwrap_or(0.0));
    (g - w) / w.max(1.0)
}

fn line(replay: &Value, job: &Value, job_s: f64, replay_s: f64) -> String {
    let per_writer =
        |v: &Value| -> Vec<Value> { v["per_writer"].as_array().cloned().unwrap_or_default() };
    let (rw, jw) = (per_writer(replay), per_writer(job));
    let worst = rw
        .iter()
        .zip(&jw)
        .map(|(a, b)| err(a, b))
        .fold(0.0f64, |m, e| if e.abs() > m.abs() { e } else { m });
    let opens = |v: &Value| -> BTreeMap<String, u64> {
        v["opens"]
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (ro, jo) = (opens(replay), opens(job));
    let reads = if ro == jo {
        "equal".to_string()
    } else {
        let differ = jo.iter().filter(|(k, v)| ro.get(*k) != Some(v)).count();
        format!("{differ}/{} files differ", jo.len())
    };
    format!(
        "data {:+.2}%, per-file reads {reads}, checkpoint {:+.2}% in all, {:+.2}% worst writer, \
         files {}/{}, writers {}/{}; job {job_s:.1} s (captured), replay {replay_s:.1} s",
        err(&replay["data_bytes"], &job["data_bytes"]) * 100.0,
        err(&replay["ckpt_bytes"], &job["ckpt_bytes"]) * 100.0,
        worst * 100.0,
        replay["ckpt_files"],
        job["ckpt_files"],
        rw.len(),
        jw.len(),
    )
}

pub fn run(ctx: &Ctx) -> Result<()> {
    let python = python_with_torch()?;
    let root = ctx.dir("scale-fidelity")?;
    make_dataset(&root.join("dataset"))?;
    for (name, sources) in [
        ("train_scale", &[1u32, 2][..]),
        ("bench_like", &[1][..]),
        ("train_ddp", &[2][..]),
    ] {
        let (job_trace, job_s) = capture(ctx, &python, &root, name, N)?;
        let job = figures(ctx, &job_trace)?;
        for &r in sources {
            let (trace, _) = capture(ctx, &python, &root, name, r)?;
            for (mode, args) in [
                ("shard/auto", &[][..]),
                (
                    "replicate",
                    &["--data", "replicate", "--checkpoint", "replicate"][..],
                ),
            ] {
                let record = root.join(format!("{name}-record-{r}-{}", mode.replace('/', "-")));
                let target = root.join(format!("{name}-target-{r}"));
                let started = Instant::now();
                let out = Command::new(ctx.bin("iorepro-replay"))
                    .arg(&trace)
                    .arg("--target")
                    .arg(&target)
                    // The jobs at N hold each rank's batch.
                    .args(["--ranks", &N.to_string(), "--batch", "per-rank"])
                    .args(["--json", "--record-ops"])
                    .arg(&record)
                    .args(args)
                    .output()
                    .context("running iorepro-replay")?;
                let replay_s = started.elapsed().as_secs_f64();
                if !out.status.success() {
                    bail!(
                        "replay failed: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
                let replay = figures(ctx, &record)?;
                ctx.line(
                    &format!("scale-fidelity {name} {r}->{N} {mode}"),
                    line(&replay, &job, job_s, replay_s),
                );
            }
        }
    }
    Ok(())
}
