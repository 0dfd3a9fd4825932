//! Collector benchmarks: what tracing costs the job, per call, next to the
//! floor any tracer on the same hooks pays (empty programs) and next to
//! strace; what a capture costs processes it does not trace; start-up and
//! shut-down; the collector's own CPU and memory; trace size next to gzip'd
//! JSON lines. The rates it keeps up with are in `collector_rate`.
//!
//! The job is `jobs/pairs.c`: 4 KiB reads of a cached file, each written to
//! /dev/null, as `dd bs=4k` does. It reports its own thread CPU time per
//! read+write pair, the least over many chunks, which counts what the probes
//! cost the job (they run in its thread) and not what other processes on
//! these two cores take from it; `dd`'s own elapsed time is reported too.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::host::is_root;
use anyhow::{bail, Context, Result};

use super::collector_jobs::{collect_cmd, Jobs, Manifest};
use super::{dir_size, Ctx};

pub fn run(ctx: &Ctx) -> Result<()> {
    if !is_root() {
        ctx.line("collector", "skipped: loading eBPF programs needs root");
        return Ok(());
    }
    let dir = ctx.dir("collector")?;
    let jobs = Jobs::build(&dir, if ctx.quick { 64 } else { 256 })?;
    overhead(ctx, &dir, &jobs)?;
    metadata_overhead(ctx, &dir, &jobs)?;
    untraced_neighbour(ctx, &dir, &jobs)?;
    dd_and_size(ctx, &dir, &jobs)?;
    start_up(ctx, &dir)?;
    super::collector_rate::run(ctx, &dir, &jobs)
}

/// Per-pair cost: untraced, the floor, the collector (runs merged and not),
/// strace; rounds alternate so a machine that speeds up or slows down
/// affects all alike, and each figure is the median over rounds.
fn overhead(ctx: &Ctx, dir: &Path, jobs: &Jobs) -> Result<()> {
    let (chunks, pairs) = if ctx.quick {
        (10, 10_000)
    } else {
        (30, 20_000)
    };
    let rounds = if ctx.quick { 1 } else { 3 };
    let job = |cmd: &mut Command| least_cpu_ns(cmd, &jobs.pairs, &jobs.data, chunks, pairs);
    let mut untraced = Vec::new();
    let mut floor = Vec::new();
    let mut runs = Vec::new();
    let mut each_call = Vec::new();
    for round in 0..rounds {
        untraced.push(job(&mut Command::new("env"))?);
        {
            let _floor = Floor::attach(ctx)?;
            floor.push(job(&mut Command::new("env"))?);
        }
        let out = dir.join(format!("pairs-{round}"));
        runs.push(job(&mut collect_cmd(ctx, &out, &[]))?);
        let out = dir.join(format!("pairs-each-{round}"));
        each_call.push(job(&mut collect_cmd(ctx, &out, &["--no-runs"]))?);
    }
    let strace = have("strace")
        .then(|| {
            job(Command::new("strace").args([
                "-f",
                "-qq",
                "-e",
                "trace=read,write",
                "-o",
                "/dev/null",
            ]))
        })
        .transpose()?;
    let base = median(&untraced);
    let added = |v: &[f64]| median(v) - base;
    let ratio = |v: &[f64]| median(v) / base;
    ctx.line(
        "collector-overhead",
        format!(
            "4 KiB read + write to /dev/null of a cached file, thread CPU per pair (least of {chunks} x {pairs}, median of {rounds}): \
             untraced {base:.0} ns; floor (empty programs on the same hooks) +{:.0} ns; \
             iorepro-collect +{:.0} ns ({:.2}x); --no-runs +{:.0} ns ({:.2}x){}",
            added(&floor),
            added(&runs),
            ratio(&runs),
            added(&each_call),
            ratio(&each_call),
            strace
                .map(|s| format!("; strace -f +{:.0} ns ({:.1}x)", s - base, s / base))
                .unwrap_or_default()
        ),
    );
    Ok(())
}

/// Runs a C job (`jobs/*.c`: JOB FILE CHUNKS CALLS) under `cmd` (`env` for
/// none, the collector, strace) and returns the least thread CPU time per
/// call it printed.
fn least_cpu_ns(
    cmd: &mut Command,
    job: &Path,
    data: &Path,
    chunks: u32,
    calls: u64,
) -> Result<f64> {
    let o = cmd
        .arg(job)
        .arg(data)
        .args([chunks.to_string(), calls.to_string()])
        .stderr(Stdio::null())
        .output()
        .with_context(|| format!("running {cmd:?}"))?;
    let out = String::from_utf8_lossy(&o.stdout);
    out.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("{cmd:?} printed no timing: {out}"))
}

/// Per-call cost of name-space calls (`jobs/stats.c`: a stat that finds its
/// file and one that does not, both recorded with their path and result):
/// untraced, the collector, strace; the trace must hold every call.
fn metadata_overhead(ctx: &Ctx, dir: &Path, jobs: &Jobs) -> Result<()> {
    let (chunks, calls) = if ctx.quick { (10, 5_000) } else { (30, 10_000) };
    let rounds = if ctx.quick { 1 } else { 3 };
    let job = |cmd: &mut Command| least_cpu_ns(cmd, &jobs.stats, &jobs.data, chunks, calls);
    let (mut untraced, mut traced) = (Vec::new(), Vec::new());
    let mut recorded = 0;
    for round in 0..rounds {
        untraced.push(job(&mut Command::new("env"))?);
        let out = dir.join(format!("stats-{round}"));
        traced.push(job(&mut collect_cmd(ctx, &out, &[]))?);
        let m = Manifest::load(&out)?;
        if m.dropped_events > 0 {
            bail!("the stat capture dropped {} events", m.dropped_events);
        }
        recorded = m.calls;
    }
    let made = 2 * chunks as u64 * calls;
    if recorded < made {
        bail!("the stat capture holds {recorded} calls, the job made {made}");
    }
    let strace = have("strace")
        .then(|| {
            job(Command::new("strace").args(["-f", "-qq", "-e", "trace=%stat", "-o", "/dev/null"]))
        })
        .transpose()?;
    let base = median(&untraced);
    let t = median(&traced);
    ctx.line(
        "collector-metadata",
        format!(
            "stat of a file and of a missing name, thread CPU per call (least of {chunks} x {}, median of {rounds}): \
             untraced {base:.0} ns; iorepro-collect +{:.0} ns ({:.2}x), every call recorded with its path and result{}",
            2 * calls,
            t - base,
            t / base,
            strace
                .map(|s| format!("; strace -f +{:.0} ns ({:.1}x)", s - base, s / base))
                .unwrap_or_default()
        ),
    );
    Ok(())
}

/// What a capture costs a process it does not trace.
fn untraced_neighbour(ctx: &Ctx, dir: &Path, jobs: &Jobs) -> Result<()> {
    let (chunks, pairs) = if ctx.quick {
        (10, 10_000)
    } else {
        (30, 20_000)
    };
    let rounds = if ctx.quick { 1 } else { 3 };
    let job = || -> Result<f64> {
        let o = Command::new(&jobs.pairs)
            .arg(&jobs.data)
            .args([chunks.to_string(), pairs.to_string()])
            .output()?;
        let out = String::from_utf8_lossy(&o.stdout);
        out.split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .context("pairs printed no timing")
    };
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        alone.push(job()?);
        let out = dir.join(format!("idle-capture-{round}"));
        let mut capture = collect_cmd(ctx, &out, &[])
            .args(["sleep", "600"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        wait_for_manifest(&out)?;
        let measured = job();
        stop(&mut capture);
        beside.push(measured?);
    }
    let (a, b) = (median(&alone), median(&beside));
    ctx.line(
        "collector-untraced",
        format!(
            "the same pairs in an untraced process while a capture of another job runs: {a:.0} -> {b:.0} ns per pair (+{:.0} ns, {:.2}x)",
            b - a,
            b / a
        ),
    );
    Ok(())
}

/// dd's own time (what a user of dd sees), and trace size per row and per
/// call next to the same rows as gzip'd JSON lines.
fn dd_and_size(ctx: &Ctx, dir: &Path, jobs: &Jobs) -> Result<()> {
    let job = format!("dd if={} of=/dev/null bs=4k", jobs.data.display());
    let reads = std::fs::metadata(&jobs.data)?.len() as f64 / 4096.0;
    let rounds = if ctx.quick { 1 } else { 3 };
    let mut untraced = Vec::new();
    let mut traced = Vec::new();
    let mut trace = PathBuf::new();
    for round in 0..rounds {
        untraced.push(dd_seconds(Command::new("sh").args(["-c", &job]))?);
        trace = dir.join(format!("dd-{round}"));
        traced.push(dd_seconds(
            collect_cmd(ctx, &trace, &[]).args(["sh", "-c", &job]),
        )?);
    }
    let (u, t) = (median(&untraced), median(&traced));
    let m = Manifest::load(&trace)?;
    ctx.line(
        "collector-dd",
        format!(
            "dd bs=4k of a cached file, dd's own time: untraced {u:.3} s, traced {t:.3} s ({:.2}x, +{:.0} ns per read+write pair); dropped {}",
            t / u,
            (t - u) / reads * 1e9,
            m.dropped_events
        ),
    );
    // A mixed capture for size: the dd capture is a handful of run rows.
    let mixed = dir.join("size-capture");
    let o = collect_cmd(ctx, &mixed, &[])
        .arg(&jobs.flood)
        .arg(&jobs.data)
        .args(["2", "1", "random", "4096"])
        .output()?;
    if !o.status.success() {
        bail!(
            "flood capture failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    for (what, trace) in [
        ("dd capture (runs)", &trace),
        ("random 4 KiB preads", &mixed),
    ] {
        let m = Manifest::load(trace)?;
        let bytes = dir_size(trace) as f64;
        let json_gz = json_lines_gz(trace)? as f64;
        let rows = m.events.max(1) as f64;
        let calls = m.calls.max(1) as f64;
        ctx.line(
            "collector-size",
            format!(
                "{what}: {} rows for {} calls: trace {:.2} bytes/row, {:.3} bytes/call; the same rows as gzip'd JSON lines {:.2} bytes/row ({:.1}x the trace)",
                m.events,
                m.calls,
                bytes / rows,
                bytes / calls,
                json_gz / rows,
                json_gz / bytes
            ),
        );
    }
    Ok(())
}

/// `iorepro-collect -- true`: from launch to the job's start, and from the
/// job's end to the collector's exit.
fn start_up(ctx: &Ctx, dir: &Path) -> Result<()> {
    let runs = if ctx.quick { 3 } else { 7 };
    let (mut to_start, mut total) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let out = dir.join(format!("startup-{i}"));
        let stamp = dir.join(format!("startup-{i}.ns"));
        let launched = wall_ns();
        let t = Instant::now();
        let status = collect_cmd(ctx, &out, &[])
            .args(["sh", "-c", &format!("date +%s%N > {}", stamp.display())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        let took = t.elapsed().as_secs_f64();
        if !status.success() {
            bail!("iorepro-collect -- date failed");
        }
        let started: i64 = std::fs::read_to_string(&stamp)?.trim().parse()?;
        to_start.push((started - launched) as f64 / 1e9);
        total.push(took);
    }
    let (s, t) = (median(&to_start), median(&total));
    ctx.line(
        "collector-startup",
        format!(
            "iorepro-collect -- (a job that only stamps the time), median of {runs}: the job starts {:.0} ms after launch; \
             the whole capture takes {:.0} ms, of which {:.0} ms after the job started (its end, detaching, the trace's close)",
            s * 1e3,
            t * 1e3,
            (t - s) * 1e3
        ),
    );
    Ok(())
}

/// Empty programs on the collector's syscall hooks, attached until dropped.
struct Floor(Child);

impl Floor {
    fn attach(ctx: &Ctx) -> Result<Floor> {
        let mut child = Command::new(ctx.bin_dir.join("examples/empty_probes"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("running examples/empty_probes")?;
        let mut line = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().context("no stdout")?).read_line(&mut line)?;
        if line.trim() != "attached" {
            bail!("empty_probes did not attach: {line}");
        }
        Ok(Floor(child))
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

fn wait_for_manifest(trace: &Path) -> Result<()> {
    let t = Instant::now();
    while !trace.join("manifest.json").exists() {
        if t.elapsed() > Duration::from_secs(30) {
            bail!("the capture into {} did not start", trace.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The manifest is written before the probes attach; give them time.
    std::thread::sleep(Duration::from_millis(500));
    Ok(())
}

fn stop(child: &mut Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
}

fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs a job of dd commands and sums the times dd itself reports.
fn dd_seconds(cmd: &mut Command) -> Result<f64> {
    let o = cmd
        .env("LC_ALL", "C")
        .output()
        .with_context(|| format!("running {cmd:?}"))?;
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        bail!("{cmd:?} failed: {}", err.trim());
    }
    let times = parse_dd_seconds(&err);
    if times.is_empty() {
        bail!("no dd timing in the output of {cmd:?}: {}", err.trim());
    }
    Ok(times.iter().sum())
}

/// `... bytes (...) copied, 0.123 s, ...` lines of dd.
fn parse_dd_seconds(stderr: &str) -> Vec<f64> {
    stderr
        .lines()
        .filter_map(|l| {
            let after = l.split("copied, ").nth(1)?;
            after.split(" s").next()?.trim().parse().ok()
        })
        .collect()
}

/// The trace's rows as one JSON object per line (written by pyarrow, the
/// tool such a log would come from), gzip'd: compressed bytes.
fn json_lines_gz(trace: &Path) -> Result<u64> {
    const DUMP: &str = "import sys, json, glob, pyarrow as pa, pyarrow.parquet as pq\n\
        t = pq.read_table(sorted(glob.glob(sys.argv[1] + '/*.parquet')))\n\
        t = t.set_column(0, 'ts', t.column('ts').cast(pa.int64()))\n\
        w = sys.stdout.write\n\
        for b in t.to_batches():\n    for r in b.to_pylist():\n        w(json.dumps(r) + '\\n')\n";
    let o = Command::new("python3")
        .args(["-c", DUMP])
        .arg(trace)
        .output()
        .context("python3 with pyarrow (installed by cargo xtask setup)")?;
    if !o.status.success() {
        bail!(
            "JSON lines dump failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&o.stdout)?;
    Ok(gz.finish()?.len() as u64)
}
