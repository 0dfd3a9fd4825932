//! How many calls per second the collector keeps up with, found by stepping
//! the load up: 1, 2 and 4 threads of back-to-back `pread`s, at consecutive
//! offsets (which the kernel side merges into runs) and at random ones
//! (one record per call, the collector's worst case); and the flood that
//! used to lose a fifth of its events, four `dd bs=4k` readers at once.
//! Each line gives the calls issued and captured, what was lost (counted,
//! never silent), and the collector's own CPU per call and per row at
//! steady state (its start-up CPU, measured apart, taken off).

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::collector_jobs::{collect_cmd, Jobs, Manifest};
use super::Ctx;

pub fn run(ctx: &Ctx, dir: &Path, jobs: &Jobs) -> Result<()> {
    let idle_cpu = start_up_cpu(ctx, dir)?;
    let secs = if ctx.quick { "1" } else { "3" };
    for pattern in ["seq", "random"] {
        let mut lossless: Option<(f64, usize)> = None;
        for threads in [1usize, 2, 4] {
            let out = dir.join(format!("rate-{pattern}-{threads}"));
            let o = collect_cmd(ctx, &out, &[])
                .arg(&jobs.flood)
                .arg(&jobs.data)
                .args([threads.to_string().as_str(), secs, pattern, "512"])
                .output()?;
            if !o.status.success() {
                bail!("rate run failed: {}", String::from_utf8_lossy(&o.stderr));
            }
            let printed = String::from_utf8_lossy(&o.stdout);
            let mut f = printed.split_whitespace();
            let issued: u64 = f
                .next()
                .and_then(|v| v.parse().ok())
                .context("flood output")?;
            let rate: f64 = f
                .next()
                .and_then(|v| v.parse().ok())
                .context("flood output")?;
            let m = Manifest::load(&out)?;
            let usage = &m.extra["collector_usage"];
            let cpu = usage["cpu_s"].as_f64().unwrap_or(0.0) - idle_cpu;
            let rss_mib = usage["max_rss_kib"].as_i64().unwrap_or(0) / 1024;
            // Beside the job's preads, a trace holds the few calls of its
            // start (the loader's opens and reads).
            let captured = m.calls;
            if m.dropped_events == 0 && captured >= issued {
                lossless = Some(lossless.map_or((rate, threads), |l| {
                    if rate > l.0 {
                        (rate, threads)
                    } else {
                        l
                    }
                }));
            }
            ctx.line(
                "collector-rate",
                format!(
                    "pread 512 B, {pattern} offsets, {threads} thread(s): {rate:.0} calls/s issued; {captured} calls captured in {} rows, {} lost ({:.2}%, counted); \
                     collector CPU at steady state {:.3} us per call, {} per row; RSS {rss_mib} MiB",
                    m.events,
                    m.dropped_events,
                    100.0 * m.dropped_events as f64 / (issued.max(1) as f64),
                    cpu.max(0.0) / captured.max(1) as f64 * 1e6,
                    if m.events >= 10_000 {
                        format!("{:.3} us", cpu.max(0.0) / m.events as f64 * 1e6)
                    } else {
                        "(too few rows to tell)".to_string()
                    },
                ),
            );
        }
        ctx.line(
            "collector-lossless",
            match lossless {
                Some((rate, threads)) => format!(
                    "{pattern} offsets: highest rate captured with nothing lost: {rate:.0} calls/s ({threads} thread(s); more threads than cores cannot issue more here)"
                ),
                None => format!("{pattern} offsets: every step lost calls"),
            },
        );
    }
    // The flood that lost 19.5% before: four dd readers of the data at once.
    let out = dir.join("rate-4dd");
    let job = format!(
        "for i in 1 2 3 4; do dd if={} of=/dev/null bs=4k 2>/dev/null & done; wait",
        jobs.data.display()
    );
    let o = collect_cmd(ctx, &out, &[])
        .args(["sh", "-c", &job])
        .output()?;
    if !o.status.success() {
        bail!("4 x dd failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    let m = Manifest::load(&out)?;
    let reads = 4 * std::fs::metadata(&jobs.data)?.len() / 4096;
    ctx.line(
        "collector-rate",
        format!(
            "4 x dd bs=4k at once ({reads} reads): {} calls captured in {} rows, {} lost ({:.2}%)",
            m.calls,
            m.events,
            m.dropped_events,
            100.0 * m.dropped_events as f64 / reads as f64
        ),
    );
    Ok(())
}

/// Collector CPU of a capture of a job that does nothing: start-up and
/// shut-down, to take off the steady-state figures.
fn start_up_cpu(ctx: &Ctx, dir: &Path) -> Result<f64> {
    let out = dir.join("rate-idle");
    let status = collect_cmd(ctx, &out, &[]).arg("true").status()?;
    if !status.success() {
        bail!("iorepro-collect -- true failed");
    }
    let m = Manifest::load(&out)?;
    Ok(m.extra["collector_usage"]["cpu_s"].as_f64().unwrap_or(0.0))
}
