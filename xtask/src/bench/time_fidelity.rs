//! Time fidelity: does a replay at N of a job's trace at R take the job at
//! N's time? `tests/jobs/time_fidelity.py` runs the DLIO-like benchmark at
//! R = 2 under the collector and at N = 4, on the storage as it is and on
//! the same storage with reads throttled below what 4 processes ask for
//! (a cgroup v1 blkio throttle), replays the trace at 4 on each, and
//! predicts the throttled run with `--plan-only --bandwidth`; the trace is
//! also replayed at 2 against the captured run (same scale). One line per
//! scale and storage: the errors in span, per epoch, in AU (points) and per
//! checkpoint, with both sides' figures; the throttled line also gives the
//! plan's error per epoch. The same driver is `tests/tests/time_fidelity.rs`'s.

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

pub fn run(ctx: &Ctx) -> Result<()> {
    let scratch = ctx.dir("time-fidelity")?;
    let mut cmd = Command::new("python3");
    cmd.arg(ctx.root.join("tests/jobs/time_fidelity.py"))
        .arg("--collect")
        .arg(ctx.bin("iorepro-collect"))
        .arg("--replay")
        .arg(ctx.bin("iorepro-replay"))
        .arg("--scratch")
        .arg(&scratch);
    if ctx.quick {
        cmd.args(["--epochs", "2", "--files", "16"]);
    }
    let out = cmd.output().context("running time_fidelity.py")?;
    if !out.status.success() {
        bail!(
            "time_fidelity.py: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let r: Value = serde_json::from_slice(&out.stdout).context("time_fidelity.py's JSON")?;
    let (from, to) = (&r["traced_ranks"], &r["ranks"]);
    for storage in ["same_scale", "fast", "throttled"] {
        let s = &r[storage];
        let e = &s["errors"];
        let (job, replay) = (&s["job"], &s["replay"]);
        let scale = if storage == "same_scale" {
            format!("{from}->{from}, storage fast (the captured run itself)")
        } else {
            format!("{from}->{to}, storage {storage}")
        };
        let mut text = format!(
            "bench_like {scale}{}: span {}% (job {:.2} s, replay {:.2} s); \
             epochs {}% (job {} s, replay {} s); AU points {} (job {} %, replay {} %); \
             checkpoints {}% (job {} s, replay {} s)",
            if storage == "throttled" {
                format!(" (reads at {} MiB/s)", r["throttle_mib_s"])
            } else {
                String::new()
            },
            pct(&e["span"]),
            job["span_s"].as_f64().unwrap_or(f64::NAN),
            replay["span_s"].as_f64().unwrap_or(f64::NAN),
            pct(&e["epochs"]),
            secs(&job["epochs_s"]),
            secs(&replay["epochs_s"]),
            e["au_points"]
                .as_array()
                .map(|a| a
                    .iter()
                    .map(|x| format!("{:+.1}", x.as_f64().unwrap_or(f64::NAN)))
                    .collect::<Vec<_>>()
                    .join("/"))
                .unwrap_or_default(),
            secs(&job["au_percent"]),
            secs(&replay["au_percent"]),
            pct(&e["checkpoints"]),
            secs(&job["checkpoints_s"]),
            secs(&replay["checkpoints_s"]),
        );
        if let Some(plan) = s.get("plan") {
            text.push_str(&format!(
                "; plan at that bandwidth: epochs {}% ({} s), AU >= 90 % down to {:.3} GiB/s",
                pct(&e["plan_epochs"]),
                secs(&plan["epochs_s"]),
                plan["bandwidth_for_au_gib_s"].as_f64().unwrap_or(f64::NAN)
            ));
        }
        ctx.line("time-fidelity", text);
    }
    Ok(())
}
