//! `cargo xtask bench`: side-by-side benchmarks, one printed line each, as
//! ratios against the tool a user would otherwise reach for, measured in the
//! same run (absolute times on these machines are too noisy to compare).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

pub mod analysis;
pub mod collector;
pub mod collector_jobs;
pub mod collector_rate;
pub mod dlio_roundtrip;
pub mod fidelity;
pub mod objects;
pub mod plan_scale;
pub mod record;
pub mod replayer;
pub mod request_capture;
pub mod scale;
pub mod scale_fidelity;
pub mod time_fidelity;
pub mod trace_format;

/// What every benchmark gets: where the release binaries are and a scratch
/// directory that is removed afterwards.
pub struct Ctx {
    pub root: PathBuf,
    pub bin_dir: PathBuf,
    pub scratch: PathBuf,
    /// Smaller inputs, for a smoke run of the benchmarks themselves.
    pub quick: bool,
    /// Rows of the analysis benchmark's trace, when not its default size.
    pub analysis_rows: Option<u64>,
    /// The result lines printed so far, for [`record`].
    pub lines: std::sync::Mutex<Vec<String>>,
}

impl Ctx {
    pub fn bin(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }

    /// A fresh directory under the scratch area.
    pub fn dir(&self, name: &str) -> Result<PathBuf> {
        let d = self.scratch.join(name);
        if d.exists() {
            std::fs::remove_dir_all(&d)?;
        }
        std::fs::create_dir_all(&d)?;
        Ok(d)
    }

    /// Prints one result line, `bench <name>: <text>`, and keeps it for
    /// the figures' file.
    pub fn line(&self, name: &str, text: impl AsRef<str>) {
        let line = format!("bench {name}: {}", text.as_ref());
        println!("{line}");
        if let Ok(mut lines) = self.lines.lock() {
            lines.push(line);
        }
    }
}

/// Runs a command to completion and returns its wall time; a failure is an error with its stderr.
pub fn time_cmd(cmd: &mut std::process::Command) -> Result<Duration> {
    let start = Instant::now();
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    let took = start.elapsed();
    if !out.status.success() {
        anyhow::bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(took)
}

/// What `/usr/bin/time -v` said of a command that succeeded.
pub struct Measured {
    pub wall: Duration,
    /// User and system CPU, seconds.
    pub cpu_s: f64,
    /// Peak resident memory, KiB.
    pub rss_kib: u64,
}

/// Runs a command under `/usr/bin/time -v`; a failure is an error with
/// its stderr.
pub fn measure(cmd: &mut Command) -> Result<Measured> {
    let mut timed = Command::new("/usr/bin/time");
    timed.arg("-v").arg(cmd.get_program()).args(cmd.get_args());
    let start = Instant::now();
    let out = timed
        .output()
        .with_context(|| format!("running {cmd:?} under /usr/bin/time"))?;
    let wall = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("{cmd:?} failed ({}): {}", out.status, stderr.trim());
    }
    let field = |name: &str| -> Result<f64> {
        stderr
            .lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .with_context(|| format!("no `{name}` in /usr/bin/time's output"))
    };
    Ok(Measured {
        wall,
        cpu_s: field("User time (seconds):")? + field("System time (seconds):")?,
        rss_kib: field("Maximum resident set size (kbytes):")? as u64,
    })
}

/// Runs `what` to completion and parses its standard output as JSON; a
/// failure is an error with its stderr.
pub fn output_json(cmd: &mut Command, what: &str) -> Result<serde_json::Value> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).with_context(|| format!("{what} printed no JSON"))
}

pub fn dir_size(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|it| {
            it.filter_map(|e| e.ok())
                .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
                .sum()
        })
        .unwrap_or(0)
}

/// Peak resident memory of a child, sampled from /proc while it runs.
/// Its standard output goes to `stdout`.
pub fn run_peak_rss(cmd: &mut Command, stdout: Stdio) -> Result<(Duration, u64)> {
    let start = Instant::now();
    let mut child = cmd.stdout(stdout).stderr(Stdio::piped()).spawn()?;
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    loop {
        if let Ok(s) = std::fs::read_to_string(&status_path) {
            for line in s.lines() {
                if let Some(v) = line.strip_prefix("VmHWM:") {
                    let kb: u64 = v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
                    peak = peak.max(kb * 1024);
                }
            }
        }
        if let Some(st) = child.try_wait()? {
            if !st.success() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                bail!("replay failed: {}", err.trim());
            }
            return Ok((start.elapsed(), peak));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

type Bench = fn(&Ctx) -> Result<()>;

const BENCHES: [(&str, Bench); 12] = [
    ("trace-format", trace_format::run),
    ("collector", collector::run),
    ("replayer", replayer::run),
    ("replay-scale", scale::run),
    ("analysis", analysis::run),
    ("replay-fidelity", fidelity::run),
    ("scale-fidelity", scale_fidelity::run),
    ("time-fidelity", time_fidelity::run),
    ("object-storage", objects::run),
    ("request-capture", request_capture::run),
    ("dlio-roundtrip", dlio_roundtrip::run),
    ("plan-scale", plan_scale::run),
];

/// Refuses names that are not benchmarks, before anything is built.
pub fn check_names(names: &[String]) -> Result<()> {
    for n in names {
        if !BENCHES.iter().any(|(b, _)| b == n) {
            let all: Vec<&str> = BENCHES.iter().map(|(b, _)| *b).collect();
            anyhow::bail!("no benchmark `{n}` (there are: {})", all.join(", "));
        }
    }
    Ok(())
}

/// Every benchmark (or those named), in order; one failing is reported and
/// the others still run.
pub fn run_all(ctx: &Ctx, only: Option<&[String]>) -> Result<()> {
    let mut failed = Vec::new();
    for (name, f) in BENCHES {
        if only.is_some_and(|o| !o.iter().any(|n| n == name)) {
            continue;
        }
        if let Ok(mut lines) = ctx.lines.lock() {
            lines.clear();
        }
        let outcome = f(ctx);
        if let Err(e) = &outcome {
            println!("bench {name}: FAILED: {e:#}");
            failed.push(name);
        }
        // Written as each benchmark ends, so a later one failing keeps
        // what was measured.
        let lines = ctx.lines.lock().map(|l| l.clone()).unwrap_or_default();
        let section = record::Section {
            name,
            lines: &lines,
            failed: outcome.err().map(|e| format!("{e:#}")),
        };
        if let Err(e) = record::write(&ctx.root, &section) {
            println!("bench {name}: its figures were not written: {e:#}");
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        anyhow::bail!("benchmarks failed: {}", failed.join(", "))
    }
}
