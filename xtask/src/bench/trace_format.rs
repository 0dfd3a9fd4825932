//! Trace writer throughput and size: rows/s on one core and bytes per event
//! for a capture-like mix, against the same events as gzip'd JSON lines.

use std::process::Command;

use anyhow::{Context, Result};

use super::Ctx;

pub fn run(ctx: &Ctx) -> Result<()> {
    let rows = if ctx.quick { 500_000 } else { 5_000_000 };
    let dir = ctx.scratch.join("write-rate");
    let out = Command::new(ctx.bin_dir.join("examples/write_rate"))
        .arg(&dir)
        .arg(rows.to_string())
        .output()
        .context("running the write_rate example")?;
    if !out.status.success() {
        anyhow::bail!(
            "write_rate failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    ctx.line(
        "trace-writer",
        format!(
            "{:.2} M rows per CPU-second ({:.2} M/s wall, {} rows of 16 interleaved loader streams); {:.2} bytes/event vs {:.2} as gzip'd JSON lines ({:.1}x smaller)",
            f("rows_per_cpu_s") / 1e6,
            f("rows_per_s") / 1e6,
            rows,
            f("parquet_bytes_per_event"),
            f("jsonl_gz_bytes_per_event"),
            f("jsonl_gz_bytes_per_event") / f("parquet_bytes_per_event"),
        ),
    );
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
