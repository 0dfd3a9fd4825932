//! `iorepro-trace summary --json` against DuckDB computing the same totals
//! (bytes and counts per op, bytes per rank, request-size histogram, 1 s peak
//! bandwidth) on the same Parquet segments, in the same run: the time ratio
//! and the peak memory (max RSS) of each.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::Ctx;

/// The totals a user would ask DuckDB for, over every segment of the trace.
const DUCKDB_SUMMARY: &str = r#"
import duckdb, json, sys
con = duckdb.connect()
con.execute(f"create view t as select * from read_parquet('{sys.argv[1]}/*.parquet')")
q = lambda s: con.execute(s).fetchall()
out = {"events": q("select count(*) from t")[0][0]}
out["ops"] = q("select op, count(*), sum(case when op in ('read','write') and ret > 0 then ret else 0 end) from t group by op")
out["ranks"] = q("select rank, sum(case when op='read' and ret>0 then ret else 0 end), sum(case when op='write' and ret>0 then ret else 0 end), count(*) from t group by rank")
out["hist"] = q("select op, case when size = 0 then 0 else pow(2, floor(log2(size)))::bigint end b, count(*) from t where op in ('read','write') and size is not null group by op, b")
t0 = q("select min(epoch_ns(ts)) from t")[0][0]
out["peak"] = q(f"select op, max(s) from (select op, sum(ret) s from t where op in ('read','write') and ret > 0 group by op, (epoch_ns(ts) - {t0}) // 1000000000) group by op")
print(json.dumps(out, default=str))
"#;

/// A DLIO-like job large enough for `rows` rows: 64 ranks reading 16 samples a
/// step (open, read, close each) with checkpoints every 1000 steps.
fn workload(rows: u64) -> String {
    let steps = (rows / (64 * 16 * 3)).max(10);
    format!(
        r#"name = "bench-analysis"
ranks = 64
host = "bench0"
seed = 1
[load]
bytes_per_rank = "256MiB"
[dataset]
files = 4096
file_size = "64MiB"
read_size = "256KiB"
pattern = "random"
loader_workers = 4
[training]
steps = {steps}
compute_time = "20ms"
reads_per_step = 16
[checkpoint]
every = 1000
bytes_per_rank = "512MiB"
write_size = "8MiB"
"#
    )
}

/// Runs a command under `/usr/bin/time -v`: wall time and max RSS in KiB.
fn measure(cmd: &mut Command) -> Result<(Duration, u64)> {
    let mut timed = Command::new("/usr/bin/time");
    timed.arg("-v").arg(cmd.get_program()).args(cmd.get_args());
    let start = Instant::now();
    let out = timed
        .output()
        .with_context(|| format!("running {cmd:?} under /usr/bin/time"))?;
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("{cmd:?} failed ({}): {}", out.status, stderr.trim());
    }
    let rss = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
        .and_then(|v| v.trim().parse().ok())
        .context("no max RSS in /usr/bin/time output")?;
    Ok((took, rss))
}

/// Median time and the largest RSS over `n` runs.
fn median_of(n: usize, mut make: impl FnMut() -> Command) -> Result<(Duration, u64)> {
    let mut times = Vec::with_capacity(n);
    let mut rss = 0;
    for _ in 0..n {
        let (t, r) = measure(&mut make())?;
        times.push(t);
        rss = rss.max(r);
    }
    times.sort();
    Ok((times[n / 2], rss))
}

/// The trace is kept in the scratch area between benchmarks of one run and
/// made again only when missing or of another size.
fn trace(ctx: &Ctx, rows: u64) -> Result<PathBuf> {
    let dir = ctx.scratch.join(format!("analysis-{rows}"));
    let manifest = dir.join("manifest.json");
    if let Ok(text) = std::fs::read_to_string(&manifest) {
        let m: serde_json::Value = serde_json::from_str(&text)?;
        if m["complete"] == true && m["events"].as_u64().unwrap_or(0) >= rows * 9 / 10 {
            return Ok(dir);
        }
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&ctx.scratch)?;
    let wl = ctx.scratch.join(format!("analysis-{rows}.toml"));
    std::fs::write(&wl, workload(rows))?;
    super::time_cmd(
        Command::new(ctx.bin("iorepro-trace"))
            .arg("synth")
            .arg(&wl)
            .arg("-o")
            .arg(&dir),
    )?;
    Ok(dir)
}

fn events_of(dir: &Path) -> Result<u64> {
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json"))?)?;
    Ok(m["events"].as_u64().unwrap_or(0))
}

pub fn run(ctx: &Ctx) -> Result<()> {
    let rows: u64 = if ctx.quick { 1_000_000 } else { 20_000_000 };
    let dir = trace(ctx, rows)?;
    let events = events_of(&dir)?;
    let runs = if ctx.quick { 1 } else { 3 };
    let (ours, ours_rss) = median_of(runs, || {
        let mut c = Command::new(ctx.bin("iorepro-trace"));
        c.arg("summary").arg("--json").arg(&dir);
        c
    })?;
    let (duck, duck_rss) = median_of(runs, || {
        let mut c = Command::new("python3");
        c.arg("-c").arg(DUCKDB_SUMMARY).arg(&dir);
        c
    })?;
    ctx.line(
        "analysis-summary",
        format!(
            "summary --json over {events} rows: {:.2} s vs DuckDB {:.2} s = {:.2}x DuckDB's time (target <= 1.0x); max RSS {} MiB vs DuckDB {} MiB (target <= 1024 MiB)",
            ours.as_secs_f64(),
            duck.as_secs_f64(),
            ours.as_secs_f64() / duck.as_secs_f64(),
            ours_rss / 1024,
            duck_rss / 1024
        ),
    );
    Ok(())
}
