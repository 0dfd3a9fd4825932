//! Installs what the project needs on a fresh Debian 12 machine. Every step
//! checks first, so a second run is quick and changes nothing.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Debian packages: LLVM 22 for bpf-linker, fio / strace / Open MPI as test and
/// benchmark partners, compression libraries for the linker build.
const APT_PACKAGES: &[&str] = &[
    "llvm-22-dev",
    "libpolly-22-dev",
    "libzstd-dev",
    "zlib1g-dev",
    "fio",
    "strace",
    "openmpi-bin",
    "libopenmpi-dev",
    "gzip",
    "time",
];

/// Python test partners: DuckDB and pyarrow read our Parquet; numpy drives the
/// mmap tests; PyTorch (CPU) runs the real training job of the end-to-end tests.
/// (import name, pip requirement)
const PY_PACKAGES: &[(&str, &str)] = &[
    ("duckdb", "duckdb"),
    ("pyarrow", "pyarrow"),
    ("numpy", "numpy"),
    ("torch", "torch==2.15.0"),
];

const BPF_LINKER_VERSION: &str = "0.13";

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// PATH with cargo's bin dir and LLVM 22 first, for bpf-linker and its build.
pub fn tool_path() -> String {
    let home = std::env::var("CARGO_HOME").unwrap_or_else(|_| {
        format!(
            "{}/.cargo",
            std::env::var("HOME").unwrap_or_else(|_| "/root".into())
        )
    });
    let old = std::env::var("PATH").unwrap_or_default();
    format!("{home}/bin:/usr/lib/llvm-22/bin:{old}")
}

pub fn run(_root: &Path) -> Result<()> {
    apt()?;
    rust_toolchain()?;
    bpf_linker()?;
    python()?;
    tracefs();
    println!("setup: done");
    Ok(())
}

fn sh(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .env("PATH", tool_path())
        .status()
        .with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

fn succeeds(cmd: &mut Command) -> bool {
    cmd.env("PATH", tool_path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn apt() -> Result<()> {
    let missing: Vec<&str> = APT_PACKAGES
        .iter()
        .copied()
        .filter(|p| {
            !Command::new("dpkg-query")
                .args(["-W", "-f=${Status}", p])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
                .unwrap_or(false)
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        bail!(
            "missing Debian packages {}: run `sudo apt-get install -y {}` or run setup as root",
            missing.join(" "),
            missing.join(" ")
        );
    }
    println!("setup: installing {}", missing.join(" "));
    sh(Command::new("apt-get").args(["update", "-q"]))?;
    sh(Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn rust_toolchain() -> Result<()> {
    let has_src = Command::new("rustup")
        .args(["component", "list", "--installed", "--toolchain", "nightly"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("rust-src"))
        .unwrap_or(false);
    if !has_src {
        println!("setup: installing nightly rust-src (eBPF programs build core from source)");
        install_nightly()?;
        sh(Command::new("rustup").args([
            "component",
            "add",
            "rust-src",
            "--toolchain",
            "nightly",
        ]))?;
    }
    Ok(())
}

fn bpf_linker() -> Result<()> {
    let ok = Command::new("bpf-linker")
        .env("PATH", tool_path())
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(BPF_LINKER_VERSION))
        .unwrap_or(false);
    if ok {
        return Ok(());
    }
    println!("setup: building bpf-linker {BPF_LINKER_VERSION} against LLVM 22 (a few minutes)");
    sh(Command::new("cargo").args([
        "install",
        "bpf-linker",
        "--locked",
        "--version",
        &format!("~{BPF_LINKER_VERSION}"),
        "--no-default-features",
        "--features",
        "llvm-22",
    ]))
}

fn python() -> Result<()> {
    let missing: Vec<&str> = PY_PACKAGES
        .iter()
        .filter(|(module, _)| {
            !succeeds(Command::new("python3").args(["-c", &format!("import {module}")]))
        })
        .map(|(_, req)| *req)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    println!(
        "setup: installing Python packages {} (PyTorch is large: minutes)",
        missing.join(" ")
    );
    sh(Command::new("python3")
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(&missing))
}

/// The collector needs tracefs for tracepoint ids; mount it if it is absent.
fn tracefs() {
    if Path::new("/sys/kernel/tracing/events").exists() || !is_root() {
        return;
    }
    let _ = Command::new("mount")
        .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
        .status();
}

/// Bounded fuzzing of the trace reader, manifest and workload parser: each
/// target runs `secs` seconds from its committed seeds (fuzz/seeds/TARGET) plus
/// what earlier runs found (fuzz/corpus/TARGET, git-ignored). A crash, panic,
/// hang (> 60 s on one input) or allocation past 2 GiB fails the run and leaves
/// the input in fuzz/artifacts/TARGET for a regression test.
pub fn fuzz(root: &Path, secs: u64) -> Result<()> {
    // AddressSanitizer checks the unsafe code inside arrow, parquet and zstd;
    // libFuzzer itself catches panics, hangs and huge allocations.
    const FUZZ_SANITIZER: &str = "address";
    let dir = root.join("fuzz");
    if !dir.exists() {
        bail!("no fuzz targets in {}", dir.display());
    }
    if !succeeds(Command::new("rustup").args(["run", "nightly", "rustc", "--version"])) {
        install_nightly()?;
    }
    if !succeeds(Command::new("cargo").args(["fuzz", "--version"])) {
        sh(Command::new("cargo").args(["install", "cargo-fuzz", "--locked"]))?;
    }
    let build = ["+nightly", "fuzz", "build", "--sanitizer", FUZZ_SANITIZER];
    let started = std::time::Instant::now();
    sh(Command::new("cargo").args(build).current_dir(root))?;
    println!(
        "fuzz: targets built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let out = Command::new("cargo")
        .args(["+nightly", "fuzz", "list"])
        .current_dir(root)
        .env("PATH", tool_path())
        .output()?;
    let list = String::from_utf8_lossy(&out.stdout);
    let targets: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if !out.status.success() || targets.is_empty() {
        bail!(
            "cargo fuzz list found no targets: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    for t in targets {
        let corpus = dir.join("corpus").join(t);
        std::fs::create_dir_all(&corpus).with_context(|| corpus.display().to_string())?;
        let seeds = dir.join("seeds").join(t);
        let mut cmd = Command::new("cargo");
        cmd.args(["+nightly", "fuzz", "run", "--sanitizer", FUZZ_SANITIZER, t])
            .arg(&corpus);
        if seeds.is_dir() {
            cmd.arg(&seeds);
        }
        cmd.args([
            "--",
            &format!("-max_total_time={secs}"),
            // A corrupt footer can make parquet walk 2^31 list elements without
            // reading them: finite (seconds) but ~30 s under AddressSanitizer.
            "-timeout=60",
            "-rss_limit_mb=2048",
            "-print_final_stats=1",
        ])
        .current_dir(root);
        println!("fuzz: {t} for {secs} s");
        sh(&mut cmd).with_context(|| {
            format!("fuzz target {t} failed; the input is in fuzz/artifacts/{t}/")
        })?;
    }
    Ok(())
}

/// The nightly toolchain (minimal profile): the eBPF programs and the fuzz
/// targets build with it.
fn install_nightly() -> Result<()> {
    sh(Command::new("rustup").args(["toolchain", "install", "nightly", "--profile", "minimal"]))
}
