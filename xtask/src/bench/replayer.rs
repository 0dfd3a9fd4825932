//! Replayer against fio on the same files of the same target directory, in
//! one run: sequential 1 MiB O_DIRECT reads (2 ranks vs 2 fio jobs), 4 KiB
//! random O_DIRECT reads with psync and with io_uring (IOPS), the small-op
//! rate of one process from the page cache, and the peak RSS of replaying a
//! large synthetic trace (memory must not grow with the trace).

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::host::{GIB, MIB, MIB_BYTES};
use anyhow::{bail, Context, Result};

use super::Ctx;

/// A trace of `ranks` ranks, each reading its own file `/bench/r{rank}.bin`
/// of `file_size` bytes with `ops` reads of `bs` bytes, `seq` or `random`,
/// or writing it with `ops` calls of `bs` bytes (`write`) (written by the
/// trace library's `read_trace` example).
pub(super) fn read_trace(
    ctx: &Ctx,
    dir: &Path,
    ranks: i32,
    file_size: u64,
    bs: u64,
    ops: u64,
    pattern: &str,
) -> Result<PathBuf> {
    let out = dir.join("trace");
    super::time_cmd(
        Command::new(ctx.bin_dir.join("examples/read_trace"))
            .arg(&out)
            .args([ranks as u64, file_size, bs, ops].map(|n| n.to_string()))
            .arg(pattern),
    )?;
    Ok(out)
}

fn replay_json(ctx: &Ctx, trace: &Path, target: &Path, args: &[&str]) -> Result<serde_json::Value> {
    super::output_json(
        Command::new(ctx.bin("iorepro-replay"))
            .arg(trace)
            .arg("--target")
            .arg(target)
            .arg("--json")
            .args(args),
        &format!("iorepro-replay {args:?}"),
    )
}

/// fio over the files the replayer prepared: one job per file.
fn fio(
    files: &[PathBuf],
    rw: &str,
    bs: &str,
    engine: &str,
    direct: bool,
    size: u64,
    ios: Option<u64>,
) -> Result<(f64, f64)> {
    let mut cmd = Command::new("fio");
    cmd.args(["--output-format=json", "--group_reporting", "--thread"])
        .arg(format!("--rw={rw}"))
        .arg(format!("--bs={bs}"))
        .arg(format!("--ioengine={engine}"))
        .arg(format!("--direct={}", direct as u8))
        .arg("--iodepth=1")
        .arg(format!("--size={size}"))
        .arg("--invalidate=1");
    if let Some(n) = ios {
        cmd.arg(format!("--number_ios={n}"));
    }
    for (i, f) in files.iter().enumerate() {
        cmd.arg(format!("--name=j{i}"))
            .arg(format!("--filename={}", f.display()));
    }
    let out = cmd.output().context("running fio (apt install fio)")?;
    if !out.status.success() {
        bail!(
            "fio failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("fio JSON")?;
    let read = &v["jobs"][0]["read"];
    Ok((
        read["bw_bytes"].as_f64().unwrap_or(0.0),
        read["iops"].as_f64().unwrap_or(0.0),
    ))
}

/// Runs the replay and fio alternately `n` times and returns the median of
/// each (the machine is shared and noisy; alternating spreads the noise evenly).
pub(super) fn alternate(
    n: usize,
    mut replay: impl FnMut() -> Result<f64>,
    mut fio: impl FnMut() -> Result<f64>,
) -> Result<(f64, f64)> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..n {
        a.push(replay()?);
        b.push(fio()?);
    }
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    Ok((a[n / 2], b[n / 2]))
}

fn supports_direct(dir: &Path) -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc_o_direct())
        .open(dir.join(".direct-probe"))
        .is_ok()
}

/// O_DIRECT's value differs between architectures (xtask does not link libc).
const fn libc_o_direct() -> i32 {
    if cfg!(any(target_arch = "aarch64", target_arch = "arm")) {
        0o200000
    } else {
        0o40000
    }
}

pub fn run(ctx: &Ctx) -> Result<()> {
    let base = ctx.dir("replayer")?;
    if !supports_direct(&base) {
        ctx.line(
            "replayer",
            format!(
                "{} refuses O_DIRECT (tmpfs?); run the benchmark from a disk-backed directory",
                base.display()
            ),
        );
        return Ok(());
    }
    // The replayer prepares its files here; fio reads the same ones, so
    // both meet the same blocks of the same file system.
    let target = base.join("target");
    let data = |r: usize| target.join(format!("data/rep-0000/bench/r{r}.bin"));
    let files = [data(0), data(1)];
    let size = if ctx.quick {
        128 * MIB_BYTES
    } else {
        1024 * MIB_BYTES
    };
    sequential_direct_reads(ctx, &target, &files, size)?;
    random_direct_reads(ctx, &target, &files, size)?;
    small_ops_from_page_cache(ctx, &base)?;
    peak_rss_of_a_large_trace(ctx, &base)
}

/// Sequential 1 MiB O_DIRECT reads of two files of `size` bytes, 2 ranks vs
/// fio psync numjobs=2: the replayer's bandwidth against fio's.
fn sequential_direct_reads(ctx: &Ctx, target: &Path, files: &[PathBuf], size: u64) -> Result<()> {
    let seq = read_trace(
        ctx,
        &ctx.dir("replayer-seq")?,
        2,
        size,
        MIB_BYTES,
        size / MIB_BYTES,
        "seq",
    )?;
    replay_json(ctx, &seq, target, &["--prepare", "only"]).ok();
    let (replay_bw, fio_gib) = alternate(
        3,
        || {
            Ok(
                replay_json(ctx, &seq, target, &["--direct", "--prepare", "skip"])?["read_gib_s"]
                    .as_f64()
                    .unwrap_or(0.0),
            )
        },
        || Ok(fio(files, "read", "1m", "psync", true, size, None)?.0 / GIB),
    )?;
    ctx.line(
        "replayer-seq-1MiB-direct-2ranks",
        format!(
            "replay {replay_bw:.3} GiB/s, fio psync {fio_gib:.3} GiB/s, ratio {:.2}x (aim >= 1.0x)",
            replay_bw / fio_gib
        ),
    );
    Ok(())
}

/// 4 KiB random O_DIRECT reads, 2 ranks, psync and io_uring vs fio's same
/// engines: the replayer's IOPS against fio's, per engine.
fn random_direct_reads(ctx: &Ctx, target: &Path, files: &[PathBuf], size: u64) -> Result<()> {
    let ops = if ctx.quick { 5_000 } else { 40_000 };
    let rnd = read_trace(
        ctx,
        &ctx.dir("replayer-rand")?,
        2,
        size,
        4096,
        ops,
        "random",
    )?;
    for (engine, fio_engine) in [("psync", "psync"), ("io_uring", "io_uring")] {
        let (iops, fio_iops) = alternate(
            3,
            || {
                Ok(replay_json(
                    ctx,
                    &rnd,
                    target,
                    &["--direct", "--prepare", "skip", "--engine", engine],
                )?["ops"]["read"]["iops"]
                    .as_f64()
                    .unwrap_or(0.0))
            },
            || Ok(fio(files, "randread", "4k", fio_engine, true, size, Some(ops))?.1),
        )?;
        ctx.line(
            &format!("replayer-rand-4KiB-direct-{engine}"),
            format!(
                "replay {iops:.0} IOPS, fio {fio_engine} {fio_iops:.0} IOPS, ratio {:.2}x",
                iops / fio_iops
            ),
        );
    }
    Ok(())
}

/// Small ops of one process from the page cache (4 KiB buffered reads of a
/// cached file): the replayer's own cost per call, with no device beneath.
fn small_ops_from_page_cache(ctx: &Ctx, base: &Path) -> Result<()> {
    let cached = if ctx.quick { 200_000 } else { 2_000_000 };
    let small = read_trace(
        ctx,
        &ctx.dir("replayer-small")?,
        1,
        64 * MIB_BYTES,
        4096,
        cached,
        "random",
    )?;
    let small_target = base.join("small-target");
    replay_json(ctx, &small, &small_target, &["--prepare", "only"]).ok();
    let cached_file = small_target.join("data/rep-0000/bench/r0.bin");
    let _ = std::fs::read(&cached_file); // into the page cache
    let replay_rate = || -> Result<f64> {
        let r = replay_json(ctx, &small, &small_target, &["--prepare", "skip"])?;
        Ok(r["ops"]["read"]["count"].as_f64().unwrap_or(0.0)
            / r["duration_s"].as_f64().unwrap_or(1.0))
    };
    let fio_rate = || -> Result<f64> {
        let out = Command::new("fio")
            .args([
                "--output-format=json",
                "--name=c",
                "--rw=randread",
                "--bs=4k",
                "--ioengine=psync",
                "--direct=0",
                "--invalidate=0",
            ])
            .arg(format!("--filename={}", cached_file.display()))
            .arg(format!("--size={}", 64 * MIB_BYTES))
            .arg(format!("--number_ios={cached}"))
            .output()?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("fio JSON")?;
        Ok(v["jobs"][0]["read"]["iops"].as_f64().unwrap_or(0.0))
    };
    let (rate, fio_iops) = alternate(3, replay_rate, fio_rate)?;
    ctx.line(
        "replayer-small-ops-page-cache",
        format!(
            "replay {rate:.0} ops/s on one rank, fio psync {fio_iops:.0} IOPS, ratio {:.2}x",
            rate / fio_iops
        ),
    );
    Ok(())
}

/// Peak RSS while replaying a large synthetic trace (3 events per read:
/// open, read, close): the replayer streams the trace, so its memory must
/// not grow with it.
fn peak_rss_of_a_large_trace(ctx: &Ctx, base: &Path) -> Result<()> {
    let events: u64 = if ctx.quick { 3_000_000 } else { 100_000_000 };
    let ranks = 4u64;
    let reads_per_step = 1_000u64;
    let steps = events / (3 * ranks * reads_per_step);
    let workload = format!(
        "name = \"rss\"\nranks = {ranks}\n[dataset]\ndir = \"/d\"\nfiles = 8\nfile_size = \"1MiB\"\nread_size = \"4KiB\"\npattern = \"random\"\n\
         [training]\nsteps = {steps}\ncompute_time = \"1us\"\nreads_per_step = {reads_per_step}\n"
    );
    let big_dir = ctx.dir("replayer-rss")?;
    let big = big_dir.join("trace");
    let workload_file = big_dir.join("workload.toml");
    std::fs::write(&workload_file, workload)?;
    let synth_s = super::time_cmd(
        Command::new(ctx.bin("iorepro-trace"))
            .arg("synth")
            .arg(&workload_file)
            .arg("-o")
            .arg(&big),
    )?
    .as_secs_f64();
    let (took, peak) = super::run_peak_rss(
        Command::new(ctx.bin("iorepro-replay"))
            .arg(&big)
            .arg("--target")
            .arg(base.join("rss-target"))
            .arg("--json"),
        Stdio::null(),
    )?;
    let n = steps * 3 * ranks * reads_per_step;
    ctx.line(
        "replayer-rss",
        format!(
            "{n} events, {ranks} ranks: peak RSS {:.0} MiB (limit 1024 MiB for 100 M events), replay {:.1} s ({:.2} M events/s), trace synthesis {synth_s:.1} s",
            peak as f64 / MIB,
            took.as_secs_f64(),
            n as f64 / took.as_secs_f64() / 1e6
        ),
    );
    Ok(())
}
