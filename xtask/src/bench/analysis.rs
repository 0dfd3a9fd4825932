//! `iorepro-trace summary`, `phases` and `plot` against DuckDB computing the
//! same aggregates from the same Parquet segments, in the same run, on a
//! synthetic trace of 200 M rows (2 M with `--quick`; `--analysis-rows N`
//! for another size): the time ratio, with each side's wall time per row and
//! peak memory (max RSS) next to it. Targets: at most half DuckDB's time and
//! at most 1 GiB of memory; a line that misses them says `MISSES`, and the
//! benchmark then fails (`cargo xtask bench` exits non-zero).
//!
//! What DuckDB computes, per command:
//! - summary: events, count and bytes per op, bytes per rank, the request-size
//!   histogram, 1 s peak bandwidth, bytes per file (busiest files) and the
//!   count of files;
//! - phases: what a phase detector needs per 100 ms window: bytes read and
//!   written, distinct writers, and the first and last read and write times;
//! - plot: bytes read and written per window, and the phases' inputs above,
//!   since the figure shades the phases.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Result};

use super::Ctx;

/// The rows of the full benchmark and of `--quick`.
pub const FULL_ROWS: u64 = 200_000_000;
pub const QUICK_ROWS: u64 = 2_000_000;
/// The memory the analysis may use on a trace of any size.
const RSS_TARGET_MIB: u64 = 1024;
const TIME_TARGET: f64 = 0.5;

const DUCKDB_SUMMARY: &str = r#"
import duckdb, json, sys
con = duckdb.connect()
con.execute(f"create view t as select * from read_parquet('{sys.argv[1]}/*.parquet')")
q = lambda s: con.execute(s).fetchall()
out = {"events": q("select sum(calls) from t")[0][0]}
out["ops"] = q("select op, sum(calls), sum(case when op in ('read','write') and ret > 0 then ret else 0 end) from t group by op")
out["ranks"] = q("select rank, sum(case when op='read' and ret>0 then ret else 0 end), sum(case when op='write' and ret>0 then ret else 0 end), sum(calls) from t group by rank")
out["hist"] = q("select op, case when size = 0 then 0 else pow(2, floor(log2(size // calls)))::bigint end b, sum(calls) from t where op in ('read','write') and size is not null group by op, b")
t0 = q("select min(epoch_ns(ts)) from t")[0][0]
out["peak"] = q(f"select op, max(s) from (select op, sum(ret) s from t where op in ('read','write') and ret > 0 group by op, (epoch_ns(ts) - {t0}) // 1000000000) group by op")
out["files"] = q("select count(distinct path) from t")[0][0]
out["top_files"] = q("select path, sum(calls), sum(case when op='read' and ret>0 then ret else 0 end) r, sum(case when op='write' and ret>0 then ret else 0 end) w from t where path is not null group by path order by r + w desc limit 10")
print(json.dumps(out, default=str))
"#;

const DUCKDB_WINDOWS: &str = r#"
import duckdb, json, sys
con = duckdb.connect()
con.execute(f"create view t as select * from read_parquet('{sys.argv[1]}/*.parquet')")
t0 = con.execute("select min(epoch_ns(ts)) from t").fetchall()[0][0]
rows = con.execute(f"""select (epoch_ns(ts) - {t0}) // 100000000 w,
  sum(case when op in ('read', 'fault') and ret > 0 then ret else 0 end),
  sum(case when op = 'write' and ret > 0 then ret else 0 end),
  count(distinct case when op = 'write' and ret > 0 then coalesce(rank, pid) end),
  min(case when op = 'write' and ret > 0 then epoch_ns(ts) end),
  max(case when op = 'write' and ret > 0 then epoch_ns(ts) + greatest(dur_ns, coalesce(span_ns, 0)) end),
  min(case when op in ('read', 'fault') and ret > 0 then epoch_ns(ts) end),
  max(case when op in ('read', 'fault') and ret > 0 then epoch_ns(ts) + greatest(dur_ns, coalesce(span_ns, 0)) end)
  from t group by w order by w""").fetchall()
print(json.dumps({"windows": len(rows)}))
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

/// Wall time and max RSS in KiB of a command.
fn measure(cmd: &mut Command) -> Result<(Duration, u64)> {
    let m = super::measure(cmd)?;
    Ok((m.wall, m.rss_kib))
}

/// Median time and largest RSS of each of two commands over `n` runs, taken
/// in turns (A, B, A, B, ...), so a build that starts or ends on a shared
/// machine weighs on both sides alike.
fn median_of_pair(
    n: usize,
    mut a: impl FnMut() -> Command,
    mut b: impl FnMut() -> Command,
) -> Result<((Duration, u64), (Duration, u64))> {
    let (mut ta, mut tb) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut ra, mut rb) = (0, 0);
    for _ in 0..n {
        let (t, r) = measure(&mut a())?;
        ta.push(t);
        ra = ra.max(r);
        let (t, r) = measure(&mut b())?;
        tb.push(t);
        rb = rb.max(r);
    }
    ta.sort();
    tb.sort();
    Ok(((ta[n / 2], ra), (tb[n / 2], rb)))
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
    let took = super::time_cmd(
        Command::new(ctx.bin("iorepro-trace"))
            .arg("synth")
            .arg(&wl)
            .arg("-o")
            .arg(&dir),
    )?;
    println!(
        "bench analysis: synthesized {} rows in {:.1} s",
        events_of(&dir)?,
        took.as_secs_f64()
    );
    Ok(dir)
}

fn events_of(dir: &Path) -> Result<u64> {
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json"))?)?;
    Ok(m["events"].as_u64().unwrap_or(0))
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub fn run(ctx: &Ctx) -> Result<()> {
    let rows = ctx
        .analysis_rows
        .unwrap_or(if ctx.quick { QUICK_ROWS } else { FULL_ROWS });
    let dir = trace(ctx, rows)?;
    let events = events_of(&dir)?;
    let runs = 3;
    let svg = ctx.scratch.join("analysis-timeline.svg");
    let ours = |args: Vec<&'static str>| {
        let dir = dir.clone();
        let bin = ctx.bin("iorepro-trace");
        let svg = svg.clone();
        move || {
            let mut c = Command::new(&bin);
            for a in &args {
                if *a == "@OUT" {
                    c.arg(&svg);
                } else {
                    c.arg(a);
                }
            }
            c.arg(&dir);
            c
        }
    };
    let duck = |script: &'static str| {
        let dir = dir.clone();
        move || {
            let mut c = Command::new("python3");
            c.arg("-c").arg(script).arg(&dir);
            c
        }
    };
    let cases: [(&str, Vec<&'static str>, &'static str); 3] = [
        ("summary", vec!["summary", "--json"], DUCKDB_SUMMARY),
        ("phases", vec!["phases", "--json"], DUCKDB_WINDOWS),
        ("plot", vec!["plot", "-o", "@OUT"], DUCKDB_WINDOWS),
    ];
    let mut missed = Vec::new();
    for (name, args, script) in cases {
        let load_before = load_average();
        let ((mine, mine_rss), (theirs, theirs_rss)) =
            median_of_pair(runs, ours(args), duck(script))?;
        let ratio = mine.as_secs_f64() / theirs.as_secs_f64();
        let ns_row = |d: Duration| d.as_nanos() as f64 / events.max(1) as f64;
        let verdict = if ratio <= TIME_TARGET && mine_rss / 1024 <= RSS_TARGET_MIB {
            "meets"
        } else {
            missed.push(name);
            "MISSES"
        };
        ctx.line(
            &format!("analysis-{name}"),
            format!(
                "{name} over {events} rows: {ratio:.2}x DuckDB's time (target <= {TIME_TARGET}x), \
                 {:.1} vs {:.1} ns/row ({:.2} s vs {:.2} s); max RSS {} MiB (target <= {RSS_TARGET_MIB} MiB) \
                 vs DuckDB {} MiB; {verdict}; {} cores, load average {load_before} -> {}",
                ns_row(mine),
                ns_row(theirs),
                mine.as_secs_f64(),
                theirs.as_secs_f64(),
                mine_rss / 1024,
                theirs_rss / 1024,
                cores(),
                load_average()
            ),
        );
    }
    // Every line is printed first; a miss then fails the benchmark (and
    // `cargo xtask bench` exits non-zero), as a benchmark that broke does.
    if !missed.is_empty() {
        bail!(
            "{} MISSES its targets (time <= {TIME_TARGET}x DuckDB's, max RSS <= {RSS_TARGET_MIB} MiB)",
            missed.join(", ")
        );
    }
    Ok(())
}
