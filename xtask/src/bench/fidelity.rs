//! Replay fidelity on the bundled capture of a real training job: replay it
//! on this machine at its original timing, record what the replay did, and
//! compare the two with `iorepro-trace compare` (duration error and the
//! bandwidth error of each phase). The replay runs [`RUNS`] times and the
//! median of each error is reported with its spread, because a checkpoint of
//! the sample lasts under 100 ms and one run's figure moves with whatever
//! else the machine is doing.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use super::Ctx;

/// The bundled sample (see its NOTE.md for how it was captured).
const SAMPLE: &str = "traces/samples/torch-ddp-dcp";
const RUNS: usize = 3;

/// One replay compared with the sample.
struct Run {
    duration_error: f64,
    /// Per phase of the sample, in order: its kind and the bandwidth error of
    /// its counterpart in the replay (None when it has none of the same kind).
    phases: Vec<(String, Option<f64>)>,
}

pub fn run(ctx: &Ctx) -> Result<()> {
    let trace = ctx.root.join(SAMPLE);
    let runs = (0..RUNS)
        .map(|i| replay_once(ctx, &trace, i))
        .collect::<Result<Vec<Run>>>()?;
    let pct = |x: f64| format!("{:+.1}%", x * 100.0);
    let spread = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{}..{}", pct(lo), pct(hi))
    };
    let durations: Vec<f64> = runs.iter().map(|r| r.duration_error).collect();
    // Load and checkpoint phases are what the fidelity aim is about; the
    // steady-read stretches between them are listed apart.
    let (mut spikes, mut steady, mut worst, mut unmatched) = (Vec::new(), Vec::new(), 0.0f64, 0);
    for (i, (kind, _)) in runs[0].phases.iter().enumerate() {
        if kind == "idle" {
            continue; // no bytes, no bandwidth
        }
        let errs: Vec<f64> = runs.iter().filter_map(|r| r.phases.get(i)?.1).collect();
        if errs.len() < runs.len() {
            unmatched += 1;
            continue;
        }
        let m = median(&errs);
        if kind == "read" {
            steady.push(pct(m));
        } else {
            worst = worst.max(m.abs());
            spikes.push(format!("{kind} {} ({})", pct(m), spread(&errs)));
        }
    }
    ctx.line(
        "replay-fidelity",
        format!(
            "median of {RUNS} replays: duration error {} ({}; aim <= 2%); load/checkpoint bandwidth errors: {} \
             (worst median {:.1}%, aim <= 5%); steady-read phases: {}; {unmatched} phase(s) without a counterpart",
            pct(median(&durations)),
            spread(&durations),
            spikes.join(", "),
            worst * 100.0,
            steady.join(", "),
        ),
    );
    Ok(())
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn replay_once(ctx: &Ctx, trace: &Path, i: usize) -> Result<Run> {
    let work = ctx.dir(&format!("fidelity-{i}"))?;
    let ops = work.join("ops");
    let out = Command::new(ctx.bin("iorepro-replay"))
        .arg(trace)
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
    let cmp = trace_json(ctx, &["compare"], &[trace, &ops])?;
    let b_kinds: Vec<String> = trace_json(ctx, &["phases"], &[&ops])?["phases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| p["kind"].as_str().unwrap_or("?").to_string())
        .collect();
    let phases = cmp["phases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let kind = p["kind"].as_str().unwrap_or("?").to_string();
            let same_kind = p["b_index"]
                .as_u64()
                .and_then(|j| b_kinds.get(j as usize))
                .is_some_and(|k| *k == kind);
            let err = p["gib_s_error"].as_f64().filter(|_| same_kind);
            (kind, err)
        })
        .collect();
    Ok(Run {
        duration_error: cmp["duration_error"].as_f64().unwrap_or(f64::NAN),
        phases,
    })
}

/// Runs `iorepro-trace <sub> <paths...> --json` and parses what it prints.
fn trace_json(ctx: &Ctx, sub: &[&str], paths: &[&Path]) -> Result<serde_json::Value> {
    let out = Command::new(ctx.bin("iorepro-trace"))
        .args(sub)
        .args(paths)
        .arg("--json")
        .output()
        .with_context(|| format!("running iorepro-trace {}", sub.join(" ")))?;
    if !out.status.success() {
        anyhow::bail!(
            "iorepro-trace {} failed: {}",
            sub.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).with_context(|| format!("{} --json output", sub.join(" ")))
}
