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
        anyhow::bail!(
            "iorepro-replay failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let out = Command::new(ctx.bin("iorepro-trace"))
        .arg("compare")
        .arg(&trace)
        .arg(&ops)
        .arg("--json")
        .output()
        .context("running iorepro-trace compare")?;
    if !out.status.success() {
        anyhow::bail!(
            "iorepro-trace compare failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let cmp: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("compare --json output")?;
    let b_kinds = phase_kinds(ctx, &ops)?;
    let pct = |x: f64| format!("{:+.2}%", x * 100.0);
    // Load and checkpoint phases are what the fidelity aim is about; the
    // steady-read stretches between them move little and are listed apart.
    let (mut spikes, mut steady, mut worst, mut unmatched) = (Vec::new(), Vec::new(), 0.0f64, 0);
    for p in cmp["phases"].as_array().into_iter().flatten() {
        let kind = p["kind"].as_str().unwrap_or("?");
        if kind == "idle" {
            continue; // no bytes, no bandwidth
        }
        let same_kind = p["b_index"]
            .as_u64()
            .and_then(|j| b_kinds.get(j as usize))
            .is_some_and(|k| k == kind);
        match (same_kind, p["gib_s_error"].as_f64()) {
            (true, Some(e)) if kind == "read" => steady.push(pct(e)),
            (true, Some(e)) => {
                worst = worst.max(e.abs());
                spikes.push(format!("{kind} {}", pct(e)));
            }
            _ => unmatched += 1,
        }
    }
    ctx.line(
        "replay-fidelity",
        format!(
            "duration error {} (aim <= 2%); load/checkpoint bandwidth errors: {} (worst {:.2}%, aim <= 5%); \
             steady-read phases: {}; {unmatched} phase(s) without a counterpart",
            cmp["duration_error"].as_f64().map_or("n/a".into(), pct),
            spikes.join(", "),
            worst * 100.0,
            steady.join(", "),
        ),
    );
    Ok(())
}

/// The kinds of a trace's phases, in order.
fn phase_kinds(ctx: &Ctx, trace: &std::path::Path) -> Result<Vec<String>> {
    let out = Command::new(ctx.bin("iorepro-trace"))
        .arg("phases")
        .arg(trace)
        .arg("--json")
        .output()
        .context("running iorepro-trace phases")?;
    if !out.status.success() {
        anyhow::bail!(
            "iorepro-trace phases failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("phases --json output")?;
    Ok(v["phases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| p["kind"].as_str().unwrap_or("?").to_string())
        .collect())
}
