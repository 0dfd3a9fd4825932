//! Replay fidelity on the bundled captures of real training jobs: replay each
//! on this machine at its original timing, record what the replay did, and
//! compare the two with `iorepro-trace compare` (duration error and the
//! bandwidth error of each phase). Each replay runs [`RUNS`] times and the
//! median of each error is reported with its spread, because a checkpoint
//! lasts about 100 ms and one run's figure moves with whatever else the
//! machine is doing.
//!
//! Then where the rest of the error comes from, op by op
//! (`fidelity_ops.py`, DuckDB over both traces): in the load and checkpoint
//! phases, the time spent inside calls of each kind and between calls (the
//! compute the replay keeps), in the trace and in the replay.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use serde_json::Value;

use super::Ctx;

/// The bundled samples (see each one's NOTE.md for how it was captured).
const SAMPLES: [&str; 3] = [
    "traces/samples/torch-ddp-dcp",
    "traces/samples/torch-ddp-dcp-resume",
    "traces/samples/torch-ddp-shards",
];
const RUNS: usize = 3;
const FIDELITY_OPS: &str = include_str!("fidelity_ops.py");

/// One replay compared with its trace.
struct Run {
    duration_error: f64,
    /// Per phase of the trace, in order: its kind and the bandwidth error of
    /// its counterpart in the replay (None when it has none of the same kind).
    phases: Vec<(String, Option<f64>)>,
    /// Over the load and checkpoint phases: ms inside calls of each op kind
    /// and ms between calls, in the trace ("trace") and in the replay ("replay").
    attribution: BTreeMap<(&'static str, String), f64>,
}

pub fn run(ctx: &Ctx) -> Result<()> {
    for sample in SAMPLES {
        let trace = ctx.root.join(sample);
        let name = sample.rsplit('/').next().unwrap_or(sample);
        let runs = (0..RUNS)
            .map(|i| replay_once(ctx, &trace, name, i))
            .collect::<Result<Vec<Run>>>()?;
        ctx.line(&format!("replay-fidelity {name}"), errors_line(&runs));
        ctx.line(
            &format!("replay-fidelity-ops {name}"),
            attribution_line(&runs),
        );
    }
    Ok(())
}

fn pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

fn spread(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{}..{}", pct(lo), pct(hi))
}

fn errors_line(runs: &[Run]) -> String {
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
    format!(
        "median of {RUNS} replays: duration error {} ({}; aim <= 2%); load/checkpoint bandwidth errors: {} \
         (worst median {:.1}%, aim <= 5%); steady-read phases: {}; {unmatched} phase(s) without a counterpart",
        pct(median(&durations)),
        spread(&durations),
        spikes.join(", "),
        worst * 100.0,
        if steady.is_empty() { "none".into() } else { steady.join(", ") },
    )
}

/// "inside calls: write 47 -> 12 ms, ...; between calls 620 -> 622 ms".
fn attribution_line(runs: &[Run]) -> String {
    let med = |side: &'static str, what: &str| {
        let v: Vec<f64> = runs
            .iter()
            .map(|r| {
                r.attribution
                    .get(&(side, what.to_string()))
                    .copied()
                    .unwrap_or(0.0)
            })
            .collect();
        median(&v)
    };
    let mut kinds: Vec<String> = runs
        .iter()
        .flat_map(|r| r.attribution.keys().map(|(_, k)| k.clone()))
        .filter(|k| k != "between calls")
        .collect();
    kinds.sort();
    kinds.dedup();
    let mut calls: Vec<(f64, String)> = kinds
        .iter()
        .map(|k| {
            let (a, b) = (med("trace", k), med("replay", k));
            ((a - b).abs(), format!("{k} {a:.1} -> {b:.1}"))
        })
        .collect();
    // The kinds that account for the most difference first.
    calls.sort_by(|x, y| y.0.total_cmp(&x.0));
    let between = (
        "between calls",
        med("trace", "between calls"),
        med("replay", "between calls"),
    );
    format!(
        "load and checkpoint phases, ms summed over ranks, trace -> replay (median of {RUNS}): inside calls: {}; \
         {} {:.1} -> {:.1}",
        calls.into_iter().map(|c| c.1).collect::<Vec<_>>().join(", "),
        between.0,
        between.1,
        between.2,
    )
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn replay_once(ctx: &Ctx, trace: &Path, name: &str, i: usize) -> Result<Run> {
    let work = ctx.dir(&format!("fidelity-{name}-{i}"))?;
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
    let phases_a = trace_json(ctx, &["phases"], &[trace])?;
    let phases_b = trace_json(ctx, &["phases"], &[&ops])?;
    let b_kinds: Vec<String> = phases_b["phases"]
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
    let attribution = attribute(&work, trace, &ops, [&cmp, &phases_a, &phases_b])?;
    std::fs::remove_dir_all(&work).ok();
    Ok(Run {
        duration_error: cmp["duration_error"].as_f64().unwrap_or(f64::NAN),
        phases,
        attribution,
    })
}

/// Runs `fidelity_ops.py` and sums its figures over the load and checkpoint phases.
fn attribute(
    work: &Path,
    trace: &Path,
    ops: &Path,
    docs: [&Value; 3],
) -> Result<BTreeMap<(&'static str, String), f64>> {
    let mut files = Vec::new();
    for (doc, name) in docs
        .iter()
        .zip(["compare.json", "phases-a.json", "phases-b.json"])
    {
        let f = work.join(name);
        std::fs::write(&f, doc.to_string())?;
        files.push(f);
    }
    let out = Command::new("python3")
        .arg("-c")
        .arg(FIDELITY_OPS)
        .arg(trace)
        .arg(ops)
        .args(&files)
        .output()
        .context("running python3 (DuckDB) for the op-by-op comparison")?;
    if !out.status.success() {
        anyhow::bail!(
            "the op-by-op comparison failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let phases: Value = serde_json::from_slice(&out.stdout).context("fidelity_ops.py output")?;
    let mut sums = BTreeMap::new();
    for p in phases.as_array().into_iter().flatten() {
        if !matches!(p["kind"].as_str(), Some("load" | "checkpoint")) {
            continue;
        }
        for side in ["trace", "replay"] {
            for (op, ms) in p[side]["calls_ms"].as_object().into_iter().flatten() {
                *sums.entry((side, op.clone())).or_insert(0.0) += ms.as_f64().unwrap_or(0.0);
            }
            *sums
                .entry((side, "between calls".to_string()))
                .or_insert(0.0) += p[side]["gaps_ms"].as_f64().unwrap_or(0.0);
        }
    }
    Ok(sums)
}

/// Runs `iorepro-trace <sub> <paths...> --json` and parses what it prints.
fn trace_json(ctx: &Ctx, sub: &[&str], paths: &[&Path]) -> Result<Value> {
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
