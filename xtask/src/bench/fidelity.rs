//! Replay fidelity on the bundled capture of a real training job: replay it
//! on this machine at its original timing, record what the replay did, and
//! compare the two with `iorepro-trace compare` (duration error and the
//! bandwidth error of each phase).

use std::process::Command;

use anyhow::{Context, Result};

use super::Ctx;

/// The bundled sample (see its NOTE.md for how it was captured).
const SAMPLE: &str = "traces/samples/torch-ddp-dcp";

pub fn run(ctx: &Ctx) -> Result<()> {
    let trace = ctx.root.join(SAMPLE);
    let work = ctx.dir("fidelity")?;
    let ops = work.join("ops");
    let out = Command::new(ctx.bin("iorepro-replay"))
        .arg(&trace)
        .arg("--target")
        .arg(work.join("target"))
        .args(["--timing", "original", "--json", "--record-ops"])
        .arg(&ops)
        .output()
        .context("running iorepro-replay")?;
    if !out.status.success() {
        anyhow::bail!("iorepro-replay failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let out = Command::new(ctx.bin("iorepro-trace"))
        .arg("compare")
        .arg(&trace)
        .arg(&ops)
        .arg("--json")
        .output()
        .context("running iorepro-trace compare")?;
    if !out.status.success() {
        anyhow::bail!("iorepro-trace compare failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let cmp: serde_json::Value = serde_json::from_slice(&out.stdout).context("compare --json output")?;
    let pct = |v: &serde_json::Value| v.as_f64().map_or("n/a".to_string(), |x| format!("{:+.2}%", x * 100.0));
    let mut worst_phase = 0.0f64;
    let mut per_phase = Vec::new();
    for p in cmp["phases"].as_array().into_iter().flatten() {
        let kind = p["kind"].as_str().unwrap_or("?");
        if kind == "idle" {
            continue; // no bytes, no bandwidth
        }
        if let Some(e) = p["gib_s_error"].as_f64() {
            worst_phase = worst_phase.max(e.abs());
        }
        per_phase.push(format!("{kind} {}", pct(&p["gib_s_error"])));
    }
    ctx.line(
        "replay-fidelity",
        format!(
            "duration error {} (aim <= 2%), worst phase bandwidth error {:.2}% (aim <= 5%); per phase: {}",
            pct(&cmp["duration_error"]),
            worst_phase * 100.0,
            per_phase.join(", ")
        ),
    );
    Ok(())
}
