//! Time fidelity: does a replay at N of a job's trace at R take the job at
//! N's time? `tests/jobs/time_fidelity.py` runs a job at R = 1 and 2 under
//! the collector and at N = 4, on the storage as it is and on storage with
//! reads throttled below what 4 processes ask for (a loop device of its
//! own under a cgroup v1 blkio throttle), replays the trace at 4 on each, and predicts the
//! throttled run with `--plan-only --bandwidth`; the trace is also replayed
//! at R against the captured run (same scale). The jobs: the DLIO-like
//! benchmark, holding each rank's batch and (replayed with `--batch
//! global`) its global batch fixed, and the PyTorch DDP job (DataLoader
//! workers), the latter only where PyTorch is installed. One line per job, scale and storage: the
//! errors in span, per epoch, in AU (points) and per checkpoint, with both
//! sides' figures; the throttled line also gives the plan's error per
//! epoch; a line `job again` gives the job's own run-to-run variation at N
//! (a second run against the first), the floor under any of these errors.
//! The same driver is `tests/tests/time_fidelity.rs`'s.

use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::Ctx;

fn pct(v: &Value) -> String {
    match v.as_array() {
        Some(a) => a
            .iter()
            .map(|x| format!("{:+.1}", x.as_f64().unwrap_or(f64::NAN) * 100.0))
            .collect::<Vec<_>>()
            .join("/"),
        None => format!("{:+.1}", v.as_f64().unwrap_or(f64::NAN) * 100.0),
    }
}

fn secs(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|x| format!("{:.2}", x.as_f64().unwrap_or(f64::NAN)))
                .collect::<Vec<_>>()
                .join("/")
        })
        .unwrap_or_default()
}

/// The jobs, the batch they hold fixed and the traced scales measured,
/// each replayed at 4.
const CASES: &[(&str, &str, u32)] = &[
    ("bench_like", "per-rank", 2),
    ("bench_like", "per-rank", 1),
    ("bench_like", "global", 2),
    ("train_ddp", "per-rank", 2),
    ("train_ddp", "per-rank", 1),
];

pub fn run(ctx: &Ctx) -> Result<()> {
    for &(job, batch, traced) in CASES {
        if ctx.quick && traced == 1 {
            continue;
        }
        one_case(ctx, job, batch, traced)?;
    }
    Ok(())
}

fn one_case(ctx: &Ctx, job: &str, batch: &str, traced: u32) -> Result<()> {
    let scratch = ctx.dir("time-fidelity")?;
    let mut cmd = Command::new("python3");
    cmd.arg(ctx.root.join("tests/jobs/time_fidelity.py"))
        .arg("--collect")
        .arg(ctx.bin("iorepro-collect"))
        .arg("--replay")
        .arg(ctx.bin("iorepro-replay"))
        .arg("--scratch")
        .arg(&scratch)
        .args([
            "--job",
            job,
            "--batch",
            batch,
            "--traced",
            &traced.to_string(),
        ])
        .arg("--job-again");
    if ctx.quick {
        cmd.args(["--epochs", "2", "--files", "16"]);
    }
    let out = cmd.output().context("running time_fidelity.py")?;
    if out.status.code() == Some(3) {
        let why = String::from_utf8_lossy(&out.stderr);
        ctx.line(
            "time-fidelity",
            format!("{job} {traced}->4: not measured: {}", why.trim()),
        );
        return Ok(());
    }
    if !out.status.success() {
        bail!(
            "time_fidelity.py: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let r: Value = serde_json::from_slice(&out.stdout).context("time_fidelity.py's JSON")?;
    let (from, to) = (&r["traced_ranks"], &r["ranks"]);
    let job = format!("{job} (batch {batch})");
    for storage in ["same_scale", "fast", "throttled"] {
        let s = &r[storage];
        let scale = if storage == "same_scale" {
            format!("{from}->{from}, storage fast (the captured run itself)")
        } else {
            format!("{from}->{to}, storage {storage}")
        };
        let throttle = if storage == "throttled" {
            match r["throttle_write_mib_s"].as_u64() {
                Some(0) | None => format!(" (reads at {} MiB/s)", r["throttle_mib_s"]),
                Some(w) => format!(" (reads at {} MiB/s, writes at {w})", r["throttle_mib_s"]),
            }
        } else {
            String::new()
        };
        let mut text = format!(
            "{job} {scale}{throttle}: {}",
            errors(&s["errors"], &s["job"], &s["replay"], "replay")
        );
        if let Some(plan) = s.get("plan") {
            text.push_str(&format!(
                "; plan at that bandwidth: epochs {}% ({} s), checkpoints {}% ({} s), \
                 AU >= 90 % down to {:.3} GiB/s",
                pct(&s["errors"]["plan_epochs"]),
                secs(&plan["epochs_s"]),
                pct(&s["errors"]["plan_checkpoints"]),
                secs(&plan["checkpoints_s"]),
                plan["bandwidth_for_au_gib_s"].as_f64().unwrap_or(f64::NAN)
            ));
        }
        ctx.line("time-fidelity", text);
        if let Some(again) = s.get("job_again") {
            ctx.line(
                "time-fidelity",
                format!(
                    "{job} at {to}, storage {storage}{throttle}, job again (its own variation): {}",
                    errors(&s["job_variation"], &s["job"], again, "again")
                ),
            );
        }
        if let Some(beyond) = s.get("errors_beyond_job") {
            ctx.line(
                "time-fidelity",
                format!(
                    "{job} {scale}{throttle}, replay beyond the job's two runs: span {}%, \
                     epochs {}%, checkpoints {}%",
                    pct(&beyond["span"]),
                    pct(&beyond["epochs"]),
                    pct(&beyond["checkpoints"]),
                ),
            );
        }
    }
    Ok(())
}

/// `e`, the errors of `other` against `job`, with both sides' figures.
fn errors(e: &Value, job: &Value, other: &Value, name: &str) -> String {
    format!(
        "span {}% (job {:.2} s, {name} {:.2} s); \
         epochs {}% (job {} s, {name} {} s); AU points {} (job {} %, {name} {} %); \
         checkpoints {}% (job {} s, {name} {} s)",
        pct(&e["span"]),
        job["span_s"].as_f64().unwrap_or(f64::NAN),
        other["span_s"].as_f64().unwrap_or(f64::NAN),
        pct(&e["epochs"]),
        secs(&job["epochs_s"]),
        secs(&other["epochs_s"]),
        e["au_points"]
            .as_array()
            .map(|a| a
                .iter()
                .map(|x| format!("{:+.1}", x.as_f64().unwrap_or(f64::NAN)))
                .collect::<Vec<_>>()
                .join("/"))
            .unwrap_or_default(),
        secs(&job["au_percent"]),
        secs(&other["au_percent"]),
        pct(&e["checkpoints"]),
        secs(&job["checkpoints_s"]),
        secs(&other["checkpoints_s"]),
    )
}
