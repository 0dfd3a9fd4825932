//! `cargo xtask demo`: the README's tour in one command. Captures a small
//! training-shaped job when this machine can (root and eBPF), otherwise takes a
//! bundled sample trace and says why in one line; then summarizes it, finds its
//! phases, replays it at 8 ranks into a temporary target (every traced save
//! made), prints the report with its verdict last and writes it as an HTML
//! page, and draws the capture and the replay at 8 on one timeline. Every step prints a line as it starts and
//! its time when it ends, and the build shows cargo's own progress.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::host::is_root;
use anyhow::{bail, Context, Result};

use crate::cargo;

pub fn run(root: &Path) -> Result<()> {
    let started = Instant::now();
    let mut steps = Steps::default();
    steps.begin("build the three tools (release; the first build takes minutes)");
    // One build for the three packages: cargo schedules them together.
    cargo(&[
        "build",
        "--release",
        "-p",
        "iorepro-collector",
        "-p",
        "iorepro-traces",
        "-p",
        "iorepro-replayer",
    ])?;
    steps.end();
    let bin = root.join("target/release");
    let out = root.join("target/demo");
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    std::fs::create_dir_all(&out)?;
    let trace = match capture(root, &bin, &out, &mut steps) {
        Ok(t) => t,
        Err(e) => {
            println!("demo: not capturing a live job: {e:#}; using a bundled sample trace instead");
            bundled_sample(root, &bin, &out, &mut steps)?
        }
    };
    let tool = bin.join("iorepro-trace");
    steps.run(
        "summary",
        cmd(&tool, &["summary".as_ref(), trace.as_os_str()]),
    )?;
    steps.run(
        "phases",
        cmd(&tool, &["phases".as_ref(), trace.as_os_str()]),
    )?;
    let target = tempfile::Builder::new()
        .prefix("iorepro-demo-target-")
        .tempdir_in("/var/tmp")
        .or_else(|_| tempfile::tempdir())?;
    let ops = out.join("replay-at-8");
    let page = out.join("replay-at-8.html");
    let replay_args: [&OsStr; 11] = [
        trace.as_os_str(),
        "--target".as_ref(),
        target.path().as_os_str(),
        "--ranks".as_ref(),
        "8".as_ref(),
        "--timing".as_ref(),
        "original".as_ref(),
        "--record-ops".as_ref(),
        ops.as_os_str(),
        "--report".as_ref(),
        page.as_os_str(),
    ];
    steps.run(
        "replay at 8 ranks (the verdict ends it)",
        cmd(&bin.join("iorepro-replay"), &replay_args),
    )?;
    // The capture and the replay at 8 on one time axis: the load burst
    // and the checkpoint spikes, as traced and as replayed.
    let svg = out.join("timeline.svg");
    let plot_args: [&OsStr; 6] = [
        "plot".as_ref(),
        trace.as_os_str(),
        "--against".as_ref(),
        ops.as_os_str(),
        "-o".as_ref(),
        svg.as_os_str(),
    ];
    steps.run(
        "timeline: the capture over the replay at 8",
        cmd(&tool, &plot_args),
    )?;
    println!(
        "\ndemo: done in {:.1} s (build {:.1} s). trace {}  timeline {}\nthe replay's report, to open \
         in a browser or send: {}",
        started.elapsed().as_secs_f64(),
        steps.build_s,
        trace.display(),
        svg.display(),
        page.display()
    );
    Ok(())
}

/// Numbered steps, each announced before it starts and timed when it ends.
#[derive(Default)]
struct Steps {
    n: usize,
    current: Option<Instant>,
    build_s: f64,
}

impl Steps {
    fn begin(&mut self, name: &str) {
        self.n += 1;
        println!("\n== {}. {name}", self.n);
        self.current = Some(Instant::now());
    }

    fn end(&mut self) {
        if let Some(t) = self.current.take() {
            let s = t.elapsed().as_secs_f64();
            if self.n == 1 {
                self.build_s = s;
            }
            println!("== {}. done in {s:.1} s", self.n);
        }
    }

    fn run(&mut self, name: &str, mut cmd: Command) -> Result<()> {
        self.begin(name);
        println!("   {cmd:?}");
        let status = cmd.status().with_context(|| format!("running {name}"))?;
        if !status.success() {
            bail!("{name} failed ({status})");
        }
        self.end();
        Ok(())
    }
}

fn cmd(program: &Path, args: &[&OsStr]) -> Command {
    let mut c = Command::new(program);
    c.args(args);
    c
}

/// Captures `xtask/demo/job.py` under the collector; fails (and the demo falls
/// back to a sample) when not root or the probes cannot be loaded here.
fn capture(root: &Path, bin: &Path, out: &Path, steps: &mut Steps) -> Result<PathBuf> {
    if !is_root() {
        bail!("capturing needs root (or CAP_BPF+CAP_PERFMON)");
    }
    let collect = bin.join("iorepro-collect");
    probe_check(&collect)?;
    let work = out.join("job");
    let trace = out.join("capture");
    let job = root.join("xtask/demo/job.py");
    // Stage the dataset before the capture, as a real job finds its data in
    // place; otherwise writing it would show up as a first write burst.
    steps.run(
        "stage the dataset",
        cmd(
            "python3".as_ref(),
            &[job.as_os_str(), work.as_os_str(), "0".as_ref()],
        ),
    )?;
    steps.run(
        "capture a training-shaped job (2 loader workers, 4 checkpoints)",
        cmd(
            &collect,
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

/// Captures `true` into a scratch trace, silently: if the probes cannot load
/// on this kernel, the collector's own one-line reason becomes the demo's.
fn probe_check(collect: &Path) -> Result<()> {
    let scratch = tempfile::tempdir()?;
    let out = Command::new(collect)
        .arg("--out")
        .arg(scratch.path().join("t"))
        .args(["--", "true"])
        .stdout(Stdio::null())
        .output()
        .with_context(|| format!("running {}", collect.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        bail!("the collector cannot trace here ({})", first.trim());
    }
    Ok(())
}

/// The first bundled sample, or a synthetic trace when none is bundled.
fn bundled_sample(root: &Path, bin: &Path, out: &Path, steps: &mut Steps) -> Result<PathBuf> {
    let samples = root.join("traces/samples");
    if let Ok(entries) = std::fs::read_dir(&samples) {
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("manifest.json").exists())
            .collect();
        dirs.sort();
        if let Some(d) = dirs.into_iter().next() {
            println!("demo: sample trace {}", d.display());
            return Ok(d);
        }
    }
    let trace = out.join("synth");
    let workload = root.join("traces/workloads/example.toml");
    steps.run(
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
