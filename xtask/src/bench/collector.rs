//! Collector benchmarks: what tracing costs the job (dd bs=4k over a cached
//! file, traced vs untraced vs strace), how many events per second it keeps
//! up with and what happens past that, how compact the trace is next to
//! gzip'd JSON lines, and what the collector itself uses (CPU, RSS).

use std::io::Write;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::{dir_size, Ctx};

pub fn run(ctx: &Ctx) -> Result<()> {
    if !crate::setup::is_root() {
        ctx.line("collector", "skipped: loading eBPF programs needs root");
        return Ok(());
    }
    let dir = ctx.dir("collector")?;
    let mib: usize = if ctx.quick { 64 } else { 256 };
    let data = dir.join("data.bin");
    std::fs::write(&data, vec![0x5au8; mib << 20])?;
    std::fs::read(&data)?; // into the page cache
    let loops = if ctx.quick { 1 } else { 2 };
    let reps = if ctx.quick { 1 } else { 3 };
    let job = format!(
        "for i in $(seq {loops}); do dd if={} of=/dev/null bs=4k; done",
        data.display()
    );
    let reads = (loops * (mib << 20) / 4096) as f64;

    // Overhead: dd's own reported time, so collector start-up is not counted.
    let untraced = median(reps, || dd_seconds(Command::new("sh").args(["-c", &job])))?;
    let mut traced_runs = Vec::new();
    for i in 0..reps {
        let out = dir.join(format!("dd-trace-{i}"));
        let secs = dd_seconds(collect_cmd(ctx, &out, &[]).args(["sh", "-c", &job]))?;
        traced_runs.push((secs, out));
    }
    traced_runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (traced, trace) = traced_runs[traced_runs.len() / 2].clone();
    let strace = if have("strace") {
        Some(median(1, || {
            dd_seconds(Command::new("strace").args([
                "-f",
                "-e",
                "trace=read",
                "-o",
                "/dev/null",
                "sh",
                "-c",
                &job,
            ]))
        })?)
    } else {
        None
    };
    let m = Manifest::load(&trace)?;
    ctx.line(
        "collector-overhead",
        format!(
            "dd bs=4k, {:.0} reads of a cached file: untraced {:.3} s, traced {:.3} s ({:.2}x, {:.0} ns/read added){}; dropped {}",
            reads,
            untraced,
            traced,
            traced / untraced,
            (traced - untraced) / reads * 1e9,
            strace
                .map(|s| format!(", strace -f -e trace=read {s:.3} s ({:.1}x)", s / untraced))
                .unwrap_or_default(),
            m.dropped_events
        ),
    );

    // Size: bytes per event on disk vs the same rows as gzip'd JSON lines.
    let trace_bytes = dir_size(&trace) as f64;
    let json_gz = json_lines_gz(&trace)? as f64;
    let events = m.events.max(1) as f64;
    ctx.line(
        "collector-size",
        format!(
            "{} events: trace {:.2} bytes/event, gzip'd JSON lines {:.2} bytes/event ({:.1}x smaller)",
            m.events,
            trace_bytes / events,
            json_gz / events,
            json_gz / trace_bytes
        ),
    );
    if let Some(u) = m.extra.get("collector_usage") {
        let cpu = u["cpu_s"].as_f64().unwrap_or(0.0);
        let wall = u["wall_s"].as_f64().unwrap_or(1.0);
        ctx.line(
            "collector-usage",
            format!(
                "during the dd capture: collector CPU {:.2} s over {:.2} s ({:.0}% of one core, {:.2} us/event), max RSS {} MiB",
                cpu,
                wall,
                100.0 * cpu / wall,
                cpu / events * 1e6,
                u["max_rss_kib"].as_i64().unwrap_or(0) / 1024
            ),
        );
    }

    // Rate: parallel dd bs=512 readers, default ring buffer, then a small one.
    for (readers, ring) in [(1, None), (2, None), (4, None), (2, Some("1048576"))] {
        let out = dir.join(format!("rate-{readers}-{}", ring.unwrap_or("default")));
        let job = format!(
            "for i in $(seq {readers}); do dd if={} of=/dev/null bs=512 & done; wait",
            data.display()
        );
        let extra: Vec<&str> = ring
            .map(|r| vec!["--ring-buffer-bytes", r])
            .unwrap_or_default();
        let mut cmd = collect_cmd(ctx, &out, &extra);
        let o = cmd.args(["sh", "-c", &job]).output()?;
        if !o.status.success() {
            bail!("rate run failed: {}", String::from_utf8_lossy(&o.stderr));
        }
        let secs = parse_dd_seconds(&String::from_utf8_lossy(&o.stderr))
            .into_iter()
            .fold(0.0f64, f64::max);
        let m = Manifest::load(&out)?;
        let issued = m.events + m.dropped_events;
        ctx.line(
            "collector-rate",
            format!(
                "{readers} x dd bs=512{}: {:.0} events/s issued, {} captured, {} dropped ({:.2}%){}",
                ring.map(|r| format!(" (ring buffer {r} B)")).unwrap_or_default(),
                issued as f64 / secs.max(1e-9),
                m.events,
                m.dropped_events,
                100.0 * m.dropped_events as f64 / issued.max(1) as f64,
                if m.dropped_events > 0 { ", counted in the manifest and warned" } else { ", zero drops" }
            ),
        );
    }
    Ok(())
}

fn collect_cmd(ctx: &Ctx, out: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(ctx.bin("iorepro-collect"));
    c.arg("--out").arg(out).args(extra).arg("--");
    c
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn median(n: usize, mut f: impl FnMut() -> Result<f64>) -> Result<f64> {
    let mut v = (0..n).map(|_| f()).collect::<Result<Vec<_>>>()?;
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
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

/// The manifest keys these benchmarks read.
struct Manifest {
    events: u64,
    dropped_events: u64,
    extra: serde_json::Value,
}

impl Manifest {
    fn load(trace: &Path) -> Result<Manifest> {
        let path = trace.join("manifest.json");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)
            .with_context(|| format!("{}: not JSON", path.display()))?;
        Ok(Manifest {
            events: v["events"].as_u64().unwrap_or(0),
            dropped_events: v["dropped_events"].as_u64().unwrap_or(0),
            extra: v,
        })
    }
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
