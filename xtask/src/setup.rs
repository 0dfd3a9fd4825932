//! Installs what the project needs on a fresh Debian 12 machine. Every step
//! checks first, so a second run is quick and changes nothing.

use std::path::Path;
use std::process::Command;

use crate::host::is_root;
use anyhow::{bail, Context, Result};

/// Debian packages: LLVM for bpf-linker (the `BPF_LINKER_LLVM` version), fio / strace / Open MPI as test and
/// benchmark partners, compression libraries for the linker build, liburing for
/// the test job that drives io_uring itself, libclang for the replayer's
/// `mpi` feature (bindgen reads Open MPI's headers), and Slurm, munge and
/// Prometheus for the tests of `deploy/`.
const APT_PACKAGES: &[&str] = &[
    "llvm-22-dev",
    "libpolly-22-dev",
    "libzstd-dev",
    "zlib1g-dev",
    "fio",
    "strace",
    "openmpi-bin",
    "libopenmpi-dev",
    "libclang-14-dev",
    "clang-14",
    "gzip",
    "time",
    "liburing-dev",
    // The production tests: a single-node Slurm cluster (slurmctld, slurmd,
    // munge) and a Prometheus server that scrapes a replay.
    "slurm-wlm",
    "munge",
    "prometheus",
    // The collector's kernel matrix: VMs booted by virtme-ng (QEMU, busybox
    // for its initramfs, depmod for the kernels' modules).
    "qemu-system-x86",
    "busybox-static",
    "kmod",
    // The static binaries (`cargo xtask dist`): musl's C compiler for the C
    // inside the zstd crate.
    "musl-tools",
    // A real S3 store for the object-storage tests: Ceph's RADOS Gateway
    // over one monitor and one in-memory OSD (`tests/servers/rgw.py`).
    "radosgw",
    "ceph-mon",
    "ceph-osd",
    // The gateway's TLS certificate, made by the fixture.
    "openssl",
    // A replay whose clock is an hour off, for the store to refuse.
    "faketime",
    // The HTML reports' test renders them in a real browser (headless).
    "chromium",
];

/// The libclang that generates the MPI bindings: the `mpi` crate's bindgen
/// fails on Open MPI's headers with libclang 22, so builds use 14 even when
/// a newer one is installed.
const MPI_LIBCLANG: &str = "/usr/lib/llvm-14/lib";

/// Python test partners, at exact versions (their APIs move: DuckDB 2.0
/// changed some): DuckDB and pyarrow read our Parquet; numpy drives the mmap
/// tests; PyTorch (CPU) runs the real training job of the end-to-end tests;
/// virtme-ng boots the kernel matrix; moto's S3 server (with Flask, which
/// its server needs) is the object store of the replay's tests, and boto3
/// the client the object-storage bench line compares with; PyTorch
/// Lightning and Pillow run the framework job.
/// (distribution, version)
const PY_PACKAGES: &[(&str, &str)] = &[
    ("duckdb", "2.0.0"),
    ("pyarrow", "26.0.1"),
    ("numpy", "2.4.6"),
    ("torch", "2.15.0"),
    // Boots the kernel matrix's VMs (collector/tests/kernel_matrix.rs).
    ("virtme-ng", "1.42"),
    ("moto", "5.2.1"),
    ("flask", "3.1.3"),
    ("flask-cors", "6.0.2"),
    ("boto3", "1.43.11"),
    // A second S3 client whose requests the collector must see
    // (collector/tests/object_requests.rs): s3fs on aiobotocore, which
    // holds botocore to its own range; botocore pinned within boto3's.
    ("s3fs", "2026.9.0"),
    ("aiobotocore", "3.10.0"),
    ("botocore", "1.43.117"),
    // A third, on the AWS Common Runtime's HTTP client: the S3 connector
    // for PyTorch (collector/tests/object_requests.rs).
    ("s3torchconnector", "1.5.0"),
    ("s3torchconnectorclient", "1.5.0"),
    // A job whose loop, checkpoints and logs are a framework's
    // (tests/tests/framework_job.rs): PyTorch Lightning, and Pillow to
    // decode its images.
    ("lightning", "2.6.6"),
    ("pillow", "13.0.0"),
];

/// bpf-linker, exactly, and the LLVM it is built against: the pinned nightly's
/// LLVM (ebpf/rust-toolchain.toml) must be this one.
const BPF_LINKER_VERSION: &str = "0.13.0";
const BPF_LINKER_LLVM: &str = "22";
/// cargo-fuzz, exactly, for `cargo xtask test --fuzz`.
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// PATH with cargo's bin dir and bpf-linker's LLVM first, for bpf-linker and
/// its build.
pub fn tool_path() -> String {
    let home = std::env::var("CARGO_HOME").unwrap_or_else(|_| {
        format!(
            "{}/.cargo",
            std::env::var("HOME").unwrap_or_else(|_| "/root".into())
        )
    });
    let old = std::env::var("PATH").unwrap_or_default();
    format!("{home}/bin:/usr/lib/llvm-{BPF_LINKER_LLVM}/bin:{old}")
}

/// `LIBCLANG_PATH` for cargo calls that build the `mpi` feature: the
/// caller's own when set, else libclang 14 where set-up installs it.
pub fn libclang_path() -> Option<String> {
    std::env::var("LIBCLANG_PATH").ok().or_else(|| {
        Path::new(MPI_LIBCLANG)
            .exists()
            .then(|| MPI_LIBCLANG.into())
    })
}

pub fn run(root: &Path) -> Result<()> {
    apt()?;
    munge()?;
    ebpf_toolchain(root)?;
    static_target()?;
    python()?;
    dlio()?;
    crate::kernels::fetch(root)?;
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

/// The munge key Slurm's daemons and clients authenticate with. The Slurm
/// tests start their own single-node cluster (slurmctld, slurmd, and munged
/// when none answers) from a configuration of their own, so nothing here
/// touches /etc/slurm or starts a service.
fn munge() -> Result<()> {
    let key = Path::new("/etc/munge/munge.key");
    if key.exists() || !is_root() {
        return Ok(());
    }
    println!("setup: creating the munge key");
    sh(Command::new("mungekey").args(["--create", "--keyfile", "/etc/munge/munge.key"]))?;
    sh(Command::new("chown").args(["munge:munge", "/etc/munge/munge.key"]))?;
    sh(Command::new("chmod").args(["0400", "/etc/munge/munge.key"]))
}

/// The standard library of the static build's target, for the pinned
/// toolchain (rust-toolchain.toml, which rustup applies in the workspace).
pub fn static_target() -> Result<()> {
    let target = crate::dist::STATIC_TARGET;
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == target)
        })
        .unwrap_or(false);
    if installed {
        return Ok(());
    }
    println!("setup: adding the Rust target {target} (static binaries)");
    sh(Command::new("rustup").args(["target", "add", target]))
}

/// Where the kernel-side programs pin their nightly.
const EBPF_TOOLCHAIN_FILE: &str = "ebpf/rust-toolchain.toml";

/// The dated nightly named in `ebpf/rust-toolchain.toml`: the one place it is
/// written down.
pub fn pinned_nightly(root: &Path) -> Result<String> {
    let file = root.join(EBPF_TOOLCHAIN_FILE);
    let text = std::fs::read_to_string(&file).with_context(|| file.display().to_string())?;
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("channel"))
        .filter_map(|rest| rest.trim_start().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_string())
        .find(|v| v.starts_with("nightly-"))
        .with_context(|| format!("{}: no `channel = \"nightly-YYYY-MM-DD\"`", file.display()))
}

/// The pinned nightly with rust-src (the eBPF programs build `core` from
/// source) and bpf-linker: what `cargo xtask build-ebpf` needs. The collector
/// itself needs neither: it embeds the committed object.
pub fn ebpf_toolchain(root: &Path) -> Result<()> {
    let nightly = pinned_nightly(root)?;
    install_nightly(&nightly)?;
    bpf_linker()
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
    println!(
        "setup: building bpf-linker {BPF_LINKER_VERSION} against LLVM {BPF_LINKER_LLVM} (a few minutes)"
    );
    sh(Command::new("cargo").args([
        "install",
        "bpf-linker",
        "--locked",
        "--version",
        &format!("={BPF_LINKER_VERSION}"),
        "--no-default-features",
        "--features",
        &format!("llvm-{BPF_LINKER_LLVM}"),
    ]))
}

fn python() -> Result<()> {
    let missing: Vec<String> = PY_PACKAGES
        .iter()
        .filter(|(dist, version)| {
            // The installed version, without a local tag such as `+cpu`.
            let probe =
                format!("import importlib.metadata as m; print(m.version('{dist}').split('+')[0])");
            Command::new("python3")
                .args(["-c", &probe])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim() != *version)
                .unwrap_or(true)
        })
        .map(|(dist, version)| format!("{dist}=={version}"))
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

/// DLIO 2.0.0, MLPerf Storage's benchmark, which the exported workloads are
/// checked by running (tests/tests/dlio_roundtrip.rs): in a venv of its own,
/// `$HOME/` and this path (where tests/src/dlio.rs looks), that sees the
/// system's PyTorch and numpy. Installed without its declared dependencies,
/// which pull TensorFlow, torchvision and torchaudio that a PyTorch loader
/// over npz files never uses; its profiler factory imports TensorFlow at
/// start-up for a profiler that is off, so that import is moved into the
/// branch that uses it.
const DLIO_VENV: &str = ".cache/iorepro/dlio-2.0.0";
const DLIO: &str = "dlio-benchmark==2.0.0";
/// What DLIO imports besides PyTorch and numpy, at the versions it was
/// checked with.
const DLIO_NEEDS: &[&str] = &[
    "mpi4py==4.1.2",
    "hydra-core==1.3.8",
    "omegaconf==2.3.1",
    "h5py==3.16.0",
    "pandas==3.1.1",
    "psutil==7.2.2",
    "pydftracer==1.0.2",
];
/// The profiler factory's module-level TensorFlow import, and where it goes
/// (the file's lines end in CR LF; Python takes a lone LF as well).
const DLIO_TF_IMPORT: &str = "from dlio_benchmark.profiler.tf_profiler import TFProfiler";
const DLIO_TF_USE: &str = "            return TFProfiler.get_instance()";

fn dlio() -> Result<()> {
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    let venv = Path::new(&home).join(DLIO_VENV);
    let py = venv.join("bin/python");
    let ready = Command::new(&py)
        .args(["-c", "import dlio_benchmark.main"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ready {
        return Ok(());
    }
    println!("setup: installing {DLIO} in {}", venv.display());
    sh(Command::new("python3")
        .args(["-m", "venv", "--system-site-packages"])
        .arg(&venv))?;
    let pip = |args: &[&str]| {
        sh(Command::new(&py)
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .args(args))
    };
    pip(&["--no-deps", DLIO])?;
    pip(DLIO_NEEDS)?;
    let out = Command::new(&py)
        .args([
            "-c",
            "import dlio_benchmark, os; print(os.path.dirname(dlio_benchmark.__file__))",
        ])
        .output()?;
    let factory =
        Path::new(String::from_utf8_lossy(&out.stdout).trim()).join("profiler/profiler_factory.py");
    let text = std::fs::read_to_string(&factory)
        .with_context(|| format!("reading {}", factory.display()))?;
    // At a line's start: the module-level import (the moved one is indented).
    let top = format!("\n{DLIO_TF_IMPORT}");
    if text.contains(&top) {
        let lazy = format!("            {DLIO_TF_IMPORT}\n{DLIO_TF_USE}");
        let text = text.replacen(&top, "\n", 1).replacen(DLIO_TF_USE, &lazy, 1);
        std::fs::write(&factory, text)?;
    }
    sh(Command::new(&py).args(["-c", "import dlio_benchmark.main"]))
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
    let nightly = pinned_nightly(root)?;
    install_nightly(&nightly)?;
    let toolchain = format!("+{nightly}");
    let has_fuzz = Command::new("cargo")
        .args(["fuzz", "--version"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(CARGO_FUZZ_VERSION))
        .unwrap_or(false);
    if !has_fuzz {
        sh(Command::new("cargo").args([
            "install",
            "cargo-fuzz",
            "--locked",
            "--version",
            &format!("={CARGO_FUZZ_VERSION}"),
        ]))?;
    }
    let build = [
        toolchain.as_str(),
        "fuzz",
        "build",
        "--sanitizer",
        FUZZ_SANITIZER,
    ];
    let started = std::time::Instant::now();
    sh(Command::new("cargo").args(build).current_dir(root))?;
    println!(
        "fuzz: targets built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let out = Command::new("cargo")
        .args([toolchain.as_str(), "fuzz", "list"])
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
        cmd.args([
            toolchain.as_str(),
            "fuzz",
            "run",
            "--sanitizer",
            FUZZ_SANITIZER,
            t,
        ])
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

/// The pinned nightly (minimal profile, with rust-src), installed by its
/// dated name: never the floating `nightly`, which rustup moves to the newest.
fn install_nightly(nightly: &str) -> Result<()> {
    let has_src = Command::new("rustup")
        .args(["component", "list", "--installed", "--toolchain", nightly])
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("rust-src"))
        .unwrap_or(false);
    if has_src {
        return Ok(());
    }
    println!(
        "setup: installing Rust {nightly} with rust-src (the eBPF programs build core from source)"
    );
    sh(Command::new("rustup").args([
        "toolchain",
        "install",
        nightly,
        "--profile",
        "minimal",
        "--component",
        "rust-src",
    ]))
}
