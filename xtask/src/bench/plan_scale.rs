//! The replay's planning as a production trace grows: one synthetic job
//! (64 ranks, 100,000 files of 1 MiB read whole, 4 loader workers, a save
//! every 500 steps), made longer, planned at 4,096 ranks on 512 nodes with
//! one global batch (`--plan-only`), its CPU time (user and system) per row
//! and its peak memory beside `iorepro-trace summary`'s of the same trace.
//! Sizes: about 3 M, 30 M and 300 M rows; `--quick` plans the first alone
//! and says which it left out. Targets: at most 100 ns of CPU a row, and
//! peak memory within 2x from the smallest trace to the largest; a line
//! that misses one says `MISSES`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use super::Ctx;

/// Steps of the job at each size (about 1,550 rows a step).
const STEPS: [u32; 3] = [2_000, 20_000, 200_000];
const CPU_TARGET_NS: f64 = 100.0;
const MEMORY_GROWTH_TARGET: f64 = 2.0;

fn workload(steps: u32) -> String {
    format!(
        r#"name = "plan-scale"
ranks = 64
host = "bench0"
seed = 1
[dataset]
files = 100000
file_size = "1MiB"
read_size = "1MiB"
pattern = "random"
loader_workers = 4
[training]
steps = {steps}
compute_time = "200ms"
reads_per_step = 8
[checkpoint]
every = 500
bytes_per_rank = "256MiB"
write_size = "16MiB"
"#
    )
}

/// The trace of `steps` steps, made once per run.
fn trace(ctx: &Ctx, steps: u32) -> Result<PathBuf> {
    let dir = ctx.scratch.join(format!("plan-scale-{steps}"));
    if dir.join("manifest.json").exists() {
        return Ok(dir);
    }
    let wl = ctx.scratch.join(format!("plan-scale-{steps}.toml"));
    std::fs::write(&wl, workload(steps))?;
    super::time_cmd(
        Command::new(ctx.bin("iorepro-trace"))
            .arg("synth")
            .arg(&wl)
            .arg("-o")
            .arg(&dir),
    )?;
    Ok(dir)
}

fn rows_of(dir: &Path) -> Result<u64> {
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json"))?)?;
    m["events"].as_u64().context("manifest without events")
}

/// A command's CPU time (user + system, seconds) and peak memory (MiB).
fn cost(cmd: &mut Command) -> Result<(f64, f64)> {
    let m = super::measure(cmd)?;
    Ok((m.cpu_s, m.rss_kib as f64 / 1024.0))
}

pub fn run(ctx: &Ctx) -> Result<()> {
    let sizes: &[u32] = if ctx.quick { &STEPS[..1] } else { &STEPS };
    if ctx.quick {
        ctx.line(
            "plan-scale",
            format!(
                "--quick: the traces of {} and {} steps (about 30 M and 300 M rows) left out",
                STEPS[1], STEPS[2]
            ),
        );
    }
    let target = ctx.scratch.join("plan-scale-target");
    let mut peaks = Vec::new();
    for &steps in sizes {
        let dir = trace(ctx, steps)?;
        let rows = rows_of(&dir)?;
        let (plan_cpu, plan_mib) = cost(
            Command::new(ctx.bin("iorepro-replay"))
                .arg(&dir)
                .arg("--target")
                .arg(&target)
                .args(["--plan-only", "--ranks", "4096", "--nodes", "512"])
                .args(["--batch", "global"]),
        )?;
        let (sum_cpu, sum_mib) = cost(
            Command::new(ctx.bin("iorepro-trace"))
                .arg("summary")
                .arg(&dir),
        )?;
        let per_row = |cpu: f64| cpu * 1e9 / rows.max(1) as f64;
        let verdict = if per_row(plan_cpu) <= CPU_TARGET_NS {
            "meets"
        } else {
            "MISSES"
        };
        peaks.push(plan_mib);
        ctx.line(
            "plan-scale",
            format!(
                "{rows} rows ({steps} steps of 64 ranks), planned at 4096 ranks on 512 nodes: \
                 {plan_cpu:.1} s CPU ({:.0} ns a row; {verdict} {CPU_TARGET_NS:.0} ns), peak \
                 {plan_mib:.0} MiB ({:.1} bytes a row); iorepro-trace summary of it {sum_cpu:.1} \
                 s CPU ({:.0} ns a row), peak {sum_mib:.0} MiB",
                per_row(plan_cpu),
                plan_mib * 1_048_576.0 / rows.max(1) as f64,
                per_row(sum_cpu),
            ),
        );
    }
    if let (Some(first), Some(last)) = (peaks.first(), peaks.last()) {
        if peaks.len() > 1 {
            let growth = last / first.max(1.0);
            ctx.line(
                "plan-scale",
                format!(
                    "planning's peak memory from the smallest trace to the largest: x{growth:.2} \
                     ({} x{MEMORY_GROWTH_TARGET:.0})",
                    if growth <= MEMORY_GROWTH_TARGET {
                        "meets"
                    } else {
                        "MISSES"
                    }
                ),
            );
        }
    }
    Ok(())
}
