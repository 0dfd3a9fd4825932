//! The benchmarks' figures kept where the documentation links them:
//! `docs/BENCHMARKS.md`, below its description of each benchmark, one
//! section per benchmark with the machine, the date and what else the run
//! shared the machine with. A run of some benchmarks (`--only`) replaces
//! their sections and keeps the others'.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

/// Where the figures go, relative to the workspace root.
pub const FILE: &str = "docs/BENCHMARKS.md";
/// The heading under which the sections start; the description above it
/// is kept as it is.
const FIGURES: &str = "## Figures";

/// One benchmark's lines, as this run printed them.
pub struct Section<'a> {
    pub name: &'a str,
    pub lines: &'a [String],
    pub failed: Option<String>,
}

/// The first line of a command's output, or `unknown`.
fn first_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        })
        .filter(|l| !l.trim().is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The machine the figures were measured on, in one line.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{cores} cores ({cpu}), {mem_gib:.0} GiB, Linux {}",
        first_line("uname", &["-r"])
    )
}

/// What else ran while the benchmark did: the load average at its end.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn render(s: &Section, when: &str) -> String {
    let mut out = format!(
        "### {}\n\n{when} on {}; load average at its end {}.\n\n```text\n",
        s.name,
        machine(),
        load()
    );
    for l in s.lines {
        out.push_str(l);
        out.push('\n');
    }
    if let Some(e) = &s.failed {
        out.push_str(&format!("FAILED: {e}\n"));
    }
    out.push_str("```\n");
    out
}

/// Writes `section` into the figures of `root`'s [`FILE`], replacing the
/// benchmark's earlier section.
pub fn write(root: &Path, section: &Section) -> Result<()> {
    let path = root.join(FILE);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| "# Benchmarks\n".into());
    let (head, figures) = match text.find(FIGURES) {
        Some(i) => (&text[..i], &text[i + FIGURES.len()..]),
        None => (text.as_str(), ""),
    };
    // The sections already there, by name, in their order.
    let mut sections: Vec<(String, String)> = Vec::new();
    for chunk in figures.split("\n### ").skip(1) {
        let name = chunk.lines().next().unwrap_or("").trim().to_string();
        sections.push((name, format!("### {}", chunk.trim_end())));
    }
    let when = first_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let fresh = render(section, &when);
    match sections.iter_mut().find(|(n, _)| n == section.name) {
        Some(s) => s.1 = fresh.trim_end().to_string(),
        None => sections.push((section.name.to_string(), fresh.trim_end().to_string())),
    }
    let mut out = head.trim_end().to_string();
    out.push_str(&format!(
        "\n\n{FIGURES}\n\nWritten by `cargo xtask bench` as it ran; each section names its machine, \
         its date and the load beside it.\n"
    ));
    for (_, body) in &sections {
        out.push('\n');
        out.push_str(body);
        out.push('\n');
    }
    std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))
}
