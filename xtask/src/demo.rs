//! `cargo xtask demo`: the README's tour in one command. Captures a small
//! training-shaped job when this machine can (root and eBPF), otherwise takes a
//! bundled sample trace; then summarizes it, finds its phases, replays it at 8
//! ranks into a temporary target, prints the report and writes the timeline SVG.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{cargo, setup};

pub fn run(root: &Path) -> Result<()> {
    cargo(&[
        "build",
        "--release",
        "-p",
        "iorepro-traces",
        "-p",
        "iorepro-replayer",
    ])?;
    let bin = root.join("target/release");
    let out = root.join("target/demo");
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    std::fs::create_dir_all(&out)?;
    let trace = match capture(root, &out) {
        Ok(t) => t,
        Err(e) => {
            println!("demo: not capturing a live job ({e:#}); using a bundled sample trace");
            bundled_sample(root, &bin, &out)?
        }
    };
    let tool = bin.join("iorepro-trace");
    step(
        "summary",
        cmd(&tool, &["summary".as_ref(), trace.as_os_str()]),
    )?;
    step(
        "phases",
        cmd(&tool, &["phases".as_ref(), trace.as_os_str()]),
    )?;
    let svg = out.join("timeline.svg");
    step(
        "plot",
        cmd(
            &tool,
            &[
                "plot".as_ref(),
                trace.as_os_str(),
                "-o".as_ref(),
                svg.as_os_str(),
            ],
        ),
    )?;
    let target = tempfile::Builder::new()
        .prefix("iorepro-demo-target-")
        .tempdir_in("/var/tmp")
        .or_else(|_| tempfile::tempdir())?;
    step(
        "replay at 8 ranks",
        cmd(
            &bin.join("iorepro-replay"),
            &[
                trace.as_os_str(),
                "--target".as_ref(),
                target.path().as_os_str(),
                "--ranks".as_ref(),
                "8".as_ref(),
                "--timing".as_ref(),
                "original".as_ref(),
            ],
        ),
    )?;
    println!(
        "\ndemo: trace {}  timeline {}",
        trace.display(),
        svg.display()
    );
    Ok(())
}

fn cmd(program: &Path, args: &[&OsStr]) -> Command {
    let mut c = Command::new(program);
    c.args(args);
    c
}

fn step(name: &str, mut cmd: Command) -> Result<()> {
    println!("\n== {name}: {cmd:?}");
    let status = cmd.status().with_context(|| format!("running {name}"))?;
    if !status.success() {
        bail!("{name} failed ({status})");
    }
    Ok(())
}

/// Captures `xtask/demo/job.py` under the collector; fails (and the demo falls
/// back to a sample) when not root or the probes cannot be built or loaded.
fn capture(root: &Path, out: &Path) -> Result<PathBuf> {
    if !setup::is_root() {
        bail!("capturing needs root (or CAP_BPF+CAP_PERFMON)");
    }
    cargo(&["build", "--release", "-p", "iorepro-collector"])
        .context("building the collector (run `cargo xtask setup` for the eBPF toolchain)")?;
    let work = out.join("job");
    let trace = out.join("capture");
    let job = root.join("xtask/demo/job.py");
    // Stage the dataset before the capture, as a real job finds its data in
    // place; otherwise writing it would show up as a first write burst.
    step(
        "stage the dataset",
        cmd(
            "python3".as_ref(),
            &[job.as_os_str(), work.as_os_str(), "0".as_ref()],
        ),
    )?;
    step(
        "capture a training-shaped job",
        cmd(
            &root.join("target/release/iorepro-collect"),
            &[
                "--out".as_ref(),
                trace.as_os_str(),
                "--path-prefix".as_ref(),
                work.as_os_str(),
                "--".as_ref(),
                "python3".as_ref(),
                job.as_os_str(),
                work.as_os_str(),
            ],
        ),
    )?;
    Ok(trace)
}

/// The first bundled sample, or a synthetic trace when none is bundled.
fn bundled_sample(root: &Path, bin: &Path, out: &Path) -> Result<PathBuf> {
    let samples = root.join("traces/samples");
    if let Ok(entries) = std::fs::read_dir(&samples) {
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("manifest.json").exists())
            .collect();
        dirs.sort();
        if let Some(d) = dirs.into_iter().next() {
            return Ok(d);
        }
    }
    let trace = out.join("synth");
    let workload = root.join("traces/workloads/example.toml");
    step(
        "synthesize a trace",
        cmd(
            &bin.join("iorepro-trace"),
            &[
                "synth".as_ref(),
                workload.as_os_str(),
                "-o".as_ref(),
                trace.as_os_str(),
            ],
        ),
    )?;
    Ok(trace)
}
