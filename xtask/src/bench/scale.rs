//! The replayer at scale on one machine: the bundled sample replayed by 4,
//! 16 and 64 processes under `mpirun --oversubscribe`, meeting through MPI
//! and, for comparison, through files in a rendezvous directory; for each,
//! the time spent in barriers and in gathering, and a check that the
//! gathered report is whole (every rank, exactly N/R times the trace's
//! bytes). Then the spread of the ranks' first checkpoint write after a
//! barrier at 16 ranks (MPI, and threads of one process), and the peak
//! memory of the sample replayed as 1 to 64 ranks in one process.
//!
//! On a small machine 64 processes share a few cores, so barrier times here
//! are an upper bound of what the mechanisms cost on a real cluster.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::host::MIB;
use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::Ctx;

/// The bundled sample (see its NOTE.md): 2 ranks, 3 checkpoints.
const SAMPLE: &str = "traces/samples/torch-ddp-dcp";

/// What the trace holds, from `iorepro-trace summary --json`.
struct TraceTotals {
    ranks: u64,
    read_bytes: u64,
    write_bytes: u64,
}

fn totals(ctx: &Ctx, trace: &Path) -> Result<TraceTotals> {
    let out = Command::new(ctx.bin("iorepro-trace"))
        .arg("summary")
        .arg(trace)
        .arg("--json")
        .output()
        .context("running iorepro-trace summary")?;
    let v: Value = serde_json::from_slice(&out.stdout).context("summary --json")?;
    Ok(TraceTotals {
        ranks: v["ranks"].as_array().map_or(0, |r| r.len() as u64),
        read_bytes: v["read_bytes"].as_u64().unwrap_or(0),
        write_bytes: v["write_bytes"].as_u64().unwrap_or(0),
    })
}

fn have_mpirun() -> bool {
    Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// One replay of `np` processes under mpirun; its report.
fn mpirun(ctx: &Ctx, trace: &Path, np: u32, target: &Path, extra: &[&str]) -> Result<Value> {
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(np.to_string())
        .arg(ctx.bin("iorepro-replay"))
        .arg(trace)
        .arg("--target")
        .arg(target)
        .args(["--json", "--timeout", "300s"])
        // Clones: every rank replays a traced rank in full, so a whole
        // report holds exactly N/R times the trace's bytes.
        .args(["--data", "replicate", "--checkpoint", "replicate"])
        .args(extra)
        .output()
        .context("running mpirun")?;
    if !out.status.success() {
        bail!(
            "mpirun -np {np} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).context("the gathered report is not one JSON document")
}

/// Whether a report of `np` ranks is whole: every rank, N/R times the bytes.
fn check_report(r: &Value, np: u32, t: &TraceTotals) -> Result<()> {
    let per_rank = r["per_rank"].as_array().map_or(0, |a| a.len());
    let scale = |b: u64| b * np as u64 / t.ranks.max(1);
    let (read, write) = (
        r["read_bytes"].as_u64().unwrap_or(0),
        r["write_bytes"].as_u64().unwrap_or(0),
    );
    if r["ranks"] != np || per_rank != np as usize {
        bail!("{np} ranks: the report holds {per_rank} ranks");
    }
    if read != scale(t.read_bytes) || write != scale(t.write_bytes) {
        bail!(
            "{np} ranks moved {read} + {write} bytes, not {} + {}",
            scale(t.read_bytes),
            scale(t.write_bytes)
        );
    }
    if r["errors"].as_array().is_some_and(|e| !e.is_empty()) {
        bail!("{np} ranks: errors {}", r["errors"]);
    }
    Ok(())
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// "4 ranks 1.2 s: barriers wait p50 .. ms max .., release .., gather .. ms".
fn rendezvous_figures(np: u32, r: &Value) -> String {
    let rv = &r["rendezvous"];
    format!(
        "{np} ranks {:.2} s: {} barriers, waited {:.1} ms per rank (max {:.1}), released {:.2} ms \
         after the last arrival (p50; max {:.2}), gather {:.1} ms",
        f(&r["duration_s"]),
        rv["barriers"],
        f(&rv["barrier_wait_s"]["p50"]) * 1e3,
        f(&rv["barrier_wait_s"]["max"]) * 1e3,
        f(&rv["barrier_release_ms"]["p50"]),
        f(&rv["barrier_release_ms"]["max"]),
        f(&rv["gather_s"]) * 1e3,
    )
}

pub fn run(ctx: &Ctx) -> Result<()> {
    let trace = ctx.root.join(SAMPLE);
    let t = totals(ctx, &trace)?;
    let counts: &[u32] = if ctx.quick { &[4, 16] } else { &[4, 16, 64] };
    if have_mpirun() {
        for (name, files) in [("replay-scale-mpi", false), ("replay-scale-files", true)] {
            let mut parts = Vec::new();
            for &np in counts {
                let work = ctx.dir(&format!("{name}-{np}"))?;
                let meet = work.join("meet");
                let extra: Vec<&str> = if files {
                    vec!["--rendezvous-dir", meet.to_str().unwrap_or_default()]
                } else {
                    Vec::new()
                };
                let r = mpirun(ctx, &trace, np, &work.join("target"), &extra)?;
                let want = if files { "files" } else { "mpi" };
                if r["rendezvous"]["mechanism"] != want {
                    bail!(
                        "expected the {want} rendezvous, got {} (is the replayer built with --features mpi?)",
                        r["rendezvous"]["mechanism"]
                    );
                }
                check_report(&r, np, &t)?;
                parts.push(rendezvous_figures(np, &r));
                std::fs::remove_dir_all(&work).ok();
            }
            ctx.line(
                name,
                format!(
                    "mpirun --oversubscribe on {} cores, bundled sample, afap; {}; every report whole",
                    cores(),
                    parts.join("; ")
                ),
            );
        }
        skew(ctx, &trace)?;
    } else {
        ctx.line("replay-scale-mpi", "skipped: mpirun is not installed");
    }
    memory(ctx, &trace)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The spread of the first checkpoint write after the barrier, 16 ranks.
fn skew(ctx: &Ctx, trace: &Path) -> Result<()> {
    let work = ctx.dir("replay-skew")?;
    let ops = work.join("ops");
    let record = ["--record-ops", ops.to_str().unwrap_or_default()];
    let mpi = mpirun(ctx, trace, 16, &work.join("mpi"), &record)?;
    std::fs::remove_dir_all(&ops).ok();
    let out = Command::new(ctx.bin("iorepro-replay"))
        .arg(trace)
        .arg("--target")
        .arg(work.join("threads"))
        .args(["--ranks", "16", "--json"])
        .args(["--data", "replicate", "--checkpoint", "replicate"])
        .args(record)
        .output()
        .context("running iorepro-replay")?;
    if !out.status.success() {
        bail!(
            "iorepro-replay failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let threads: Value = serde_json::from_slice(&out.stdout)?;
    let s = |r: &Value| {
        format!(
            "p50 {:.3} ms, max {:.3} ms (start barrier released in {:.3} ms)",
            f(&r["checkpoint_skew_ms"]["p50"]),
            f(&r["checkpoint_skew_ms"]["max"]),
            f(&r["rendezvous"]["release_each_ms"][0]),
        )
    };
    ctx.line(
        "replay-barrier-skew",
        format!(
            "16 ranks on {} cores, bundled sample (3 checkpoints), spread of the first checkpoint write \
             after the barrier: MPI processes {}; threads of one process {} (aim <= 1 ms)",
            cores(),
            s(&mpi),
            s(&threads)
        ),
    );
    std::fs::remove_dir_all(&work).ok();
    Ok(())
}

/// Peak RSS of the sample replayed as N ranks in one process.
fn memory(ctx: &Ctx, trace: &Path) -> Result<()> {
    let counts: &[u32] = if ctx.quick {
        &[1, 4, 16]
    } else {
        &[1, 4, 16, 64]
    };
    let mut peaks = Vec::new();
    for &n in counts {
        let work = ctx.dir("replay-memory")?;
        let report = work.join("report.json");
        let (_, peak) = super::run_peak_rss(
            Command::new(ctx.bin("iorepro-replay"))
                .arg(trace)
                .arg("--target")
                .arg(work.join("target"))
                .args(["--ranks", &n.to_string(), "--json"]),
            Stdio::from(std::fs::File::create(&report)?),
        )?;
        let r: Value = serde_json::from_slice(&std::fs::read(&report)?)?;
        if r["ranks"] != n {
            bail!("the {n}-rank replay reported {} ranks", r["ranks"]);
        }
        peaks.push((n, peak as f64 / MIB));
        std::fs::remove_dir_all(&work).ok();
    }
    let (n0, p0) = peaks[0];
    let (n1, p1) = peaks[peaks.len() - 1];
    let per_rank = (p1 - p0) / (n1 - n0) as f64;
    let list: Vec<String> = peaks
        .iter()
        .map(|(n, p)| format!("{n} ranks {p:.0} MiB"))
        .collect();
    ctx.line(
        "replay-memory",
        format!(
            "bundled sample (largest op 4 MiB), afap, ranks as threads of one process: peak RSS {}; \
             {per_rank:.2} MiB per rank above one (aim: the largest op once, plus at most 1 MiB per rank)",
            list.join(", "),
        ),
    );
    Ok(())
}
