//! What capturing a job's object-storage requests costs it: a boto3 job
//! making small GETs as fast as it can against the RADOS Gateway (4
//! threads, a 4 KiB object), run bare, under the collector, and under the
//! collector with `--no-requests`, in turns. The job's own time is what the
//! user feels; the collector's CPU per request is the capture's own cost,
//! set apart from the rest of the capture (the job's imports and files) by
//! the run without requests.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use super::objects::{aws_env, start_rgw, Server, BUCKET};
use super::{output_json, Ctx};

const THREADS: usize = 4;

/// The job's time for its GETs, and (under the collector) the collector's
/// CPU seconds and the trace's rows.
struct Run {
    job_s: f64,
    per_s: f64,
    collector_cpu_s: f64,
    rows: u64,
}

fn job(
    ctx: &Ctx,
    server: &Server,
    gets: usize,
    under: Option<&[&str]>,
    trace: &Path,
) -> Result<Run> {
    let script = ctx.root.join("xtask/src/bench/small_gets.py");
    let mut cmd = match under {
        None => Command::new("python3"),
        Some(flags) => {
            let _ = std::fs::remove_dir_all(trace);
            let mut c = Command::new(ctx.bin("iorepro-collect"));
            c.arg("--out")
                .arg(trace)
                .args(flags)
                .arg("--")
                .arg("python3");
            c
        }
    };
    cmd.arg(&script)
        .args([BUCKET, &gets.to_string(), &THREADS.to_string()]);
    aws_env(&mut cmd, server);
    let out = output_json(&mut cmd, "the small-GET job")?;
    let (collector_cpu_s, rows) = match under {
        None => (0.0, 0),
        Some(_) => {
            let m: serde_json::Value = serde_json::from_slice(
                &std::fs::read(trace.join("manifest.json")).context("the trace's manifest")?,
            )?;
            (
                m["collector_usage"]["cpu_s"].as_f64().unwrap_or(f64::NAN),
                m["events"].as_u64().unwrap_or(0),
            )
        }
    };
    Ok(Run {
        job_s: out["s"].as_f64().unwrap_or(f64::NAN),
        per_s: out["per_s"].as_f64().unwrap_or(f64::NAN),
        collector_cpu_s,
        rows,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

pub fn run(ctx: &Ctx) -> Result<()> {
    let server = start_rgw(ctx)?;
    let mut put = Command::new("python3");
    put.arg(ctx.root.join("xtask/src/bench/small_gets.py"))
        .args([BUCKET, "1", "1", "--put"]);
    aws_env(&mut put, &server);
    let status = put.status().context("putting the small object")?;
    anyhow::ensure!(status.success(), "putting the small object failed");
    let (gets, rounds) = if ctx.quick { (400, 1) } else { (3000, 5) };
    let dir = ctx.dir("request-capture")?;
    let (mut bare, mut on, mut off) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        bare.push(job(ctx, &server, gets, None, &dir.join("none"))?);
        on.push(job(ctx, &server, gets, Some(&[]), &dir.join("on"))?);
        off.push(job(
            ctx,
            &server,
            gets,
            Some(&["--no-requests"]),
            &dir.join("off"),
        )?);
    }
    let job_s = |runs: &[Run]| median(runs.iter().map(|r| r.job_s).collect());
    let cpu = |runs: &[Run]| median(runs.iter().map(|r| r.collector_cpu_s).collect());
    let (b, n, f) = (job_s(&bare), job_s(&on), job_s(&off));
    let rate = median(bare.iter().map(|r| r.per_s).collect());
    let request_rows = on[0].rows.saturating_sub(off[0].rows);
    let per_request_us = (cpu(&on) - cpu(&off)) / gets as f64 * 1e6;
    ctx.line(
        "request-capture",
        format!(
            "{gets} small GETs, {THREADS} boto3 threads, {} ({rate:.0} GETs/s bare; medians of {rounds} in turns): \
             job {b:.2} s bare, {n:.2} s captured ({:+.1} %, {:+.0} µs a GET), {f:.2} s captured with \
             --no-requests ({:+.1} %); the requests' own share {:+.1} %, {per_request_us:.1} µs of collector \
             CPU a request; {request_rows} request rows",
            server.name,
            (n / b - 1.0) * 100.0,
            (n - b) / gets as f64 * 1e6,
            (f / b - 1.0) * 100.0,
            (n / f - 1.0) * 100.0,
        ),
    );
    Ok(())
}
