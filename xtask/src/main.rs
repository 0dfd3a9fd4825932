//! Project automation: `cargo xtask setup | test | imports | build-ebpf | demo | dist | bench`.
//!
//! `setup` installs, idempotently, what a fresh machine lacks (the eBPF
//! toolchain, fio, Open MPI, Slurm, munge, Prometheus, the Python test
//! partners, QEMU and virtme-ng and the kernels of the collector's matrix); `test` runs setup and then every test, the root-only eBPF and
//! Slurm ones included; `imports` checks that no two files of a crate import
//! each other, round about or directly; `bench` prints the side-by-side benchmark lines;
//! `demo` is the README's tour in one command; `dist` builds the static
//! binaries a node without Rust runs.

mod args;
mod bench;
mod demo;
mod disk;
mod dist;
mod ebpf;
mod host;
mod imports;
mod kernels;
mod setup;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::host::is_root;
use anyhow::{bail, Context, Result};

use args::Cmd;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  setup              install what the project needs on this machine (idempotent)
  test [--no-setup] [--fuzz SECONDS]
                     run setup, format, import and lint checks, and every test
  imports [--rooms]  fail on an import circle between the files of a crate (through
                     use, pub use or an inline crate::/super::/self:: path); with
                     --rooms, also on an import a crate's lib.rs rule of rooms forbids
  build-ebpf         rebuild the kernel-side object (pinned nightly + bpf-linker) into
                     collector/bpf/iorepro.bpf.o, which the collector embeds
  demo               capture (or take a sample), analyze, replay at 8 ranks, plot
  dist               static binaries for nodes without Rust (musl: any glibc, or none), in
                     target/dist/ as a folder and a tarball
  bench [--quick] [--only NAME,...] [--analysis-rows N]
                     side-by-side benchmarks, one line each (NAME: trace-format,
                     collector, replayer, replay-scale, analysis, replay-fidelity,
                     scale-fidelity); the analysis trace has 200 M rows (2 M with
                     --quick, or N)";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = match args::parse(&args, bench::check_names) {
        Ok(cmd) => cmd,
        Err(e) => {
            eprintln!("Error: {e}");
            std::process::exit(args::USAGE_EXIT);
        }
    };
    if let Err(e) = run(cmd) {
        eprintln!("Error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cmd: Cmd) -> Result<()> {
    let root = workspace_root();
    std::env::set_current_dir(&root)?;
    match cmd {
        Cmd::Setup => setup::run(&root),
        Cmd::Test { setup, fuzz } => test(&root, setup, fuzz),
        Cmd::Imports { rooms } => imports::check(&root, rooms),
        Cmd::BuildEbpf => ebpf::build(&root),
        Cmd::Demo => demo::run(&root),
        Cmd::Dist => {
            setup::static_target()?;
            dist::build(&root).map(drop)
        }
        Cmd::Bench {
            quick,
            only,
            analysis_rows,
        } => bench_cmd(&root, quick, only, analysis_rows),
        Cmd::Help => {
            println!("{USAGE}");
            Ok(())
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// The replayer's MPI rendezvous, built and tested with everything else.
const MPI_FEATURE: &str = "iorepro-replayer/mpi";

/// Runs cargo with the toolchain environment set up (bpf-linker on PATH,
/// the libclang that the `mpi` feature's bindings need).
pub fn cargo(args: &[&str]) -> Result<()> {
    run_cargo(&mut cargo_command(args))
}

/// A cargo command with the toolchain environment set up, to adjust before
/// [`run_cargo`].
pub fn cargo_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(args).env("PATH", setup::tool_path());
    if let Some(libclang) = setup::libclang_path() {
        cmd.env("LIBCLANG_PATH", libclang);
    }
    cmd
}

/// Runs a cargo command to success.
pub fn run_cargo(cmd: &mut Command) -> Result<()> {
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let status = cmd
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !status.success() {
        bail!("cargo {} failed ({status})", args.join(" "));
    }
    Ok(())
}

fn test(root: &Path, do_setup: bool, fuzz: Option<u64>) -> Result<()> {
    if do_setup {
        setup::run(root)?;
    }
    if !is_root() {
        eprintln!("note: not root: the eBPF capture tests will say so and skip; run as root for the full suite");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    for short in disk::shortfalls(&target, &std::env::temp_dir()) {
        eprintln!("note: {short}");
    }
    // The collector embeds the committed object; it must be what its sources
    // build to with the pinned toolchain.
    ebpf::check(root)?;
    // Reads the sources only: a second, before anything is built.
    imports::check(root, false)?;
    cargo(&["fmt", "--all", "--check"])?;
    // Lint both builds of the replayer: with and without MPI.
    for features in [&[][..], &["--features", MPI_FEATURE][..]] {
        let mut args = vec!["clippy", "--workspace", "--all-targets"];
        args.extend(features);
        args.extend(["--", "-D", "warnings"]);
        cargo(&args)?;
    }
    // End-to-end tests run the binaries of other packages; build them first.
    // The tests run the MPI build (the files rendezvous is chosen per run).
    cargo(&["build", "--workspace", "--bins", "--features", MPI_FEATURE])?;
    // What a node without Rust runs: tests/tests/static_binaries.rs runs it
    // in a root with no C library.
    dist::build(root)?;
    cargo(&[
        "test",
        "--workspace",
        "--no-fail-fast",
        "--features",
        MPI_FEATURE,
    ])?;
    if let Some(secs) = fuzz {
        setup::fuzz(root, secs)?;
    }
    Ok(())
}

fn bench_cmd(
    root: &Path,
    quick: bool,
    only: Option<Vec<String>>,
    analysis_rows: Option<u64>,
) -> Result<()> {
    cargo(&[
        "build",
        "--release",
        "--workspace",
        "--bins",
        "--examples",
        "--features",
        MPI_FEATURE,
    ])?;
    let scratch = bench_scratch()?;
    let ctx = bench::Ctx {
        root: root.to_path_buf(),
        bin_dir: root.join("target/release"),
        scratch: scratch.path().to_path_buf(),
        quick,
        analysis_rows,
        lines: Default::default(),
    };
    bench::run_all(&ctx, only.as_deref())
}

/// Benchmarks need a disk-backed directory (O_DIRECT, realistic page cache),
/// so not a tmpfs /tmp.
fn bench_scratch() -> Result<tempfile::TempDir> {
    for base in ["/var/tmp", "/tmp"] {
        if let Ok(d) = tempfile::Builder::new()
            .prefix("iorepro-bench-")
            .tempdir_in(base)
        {
            return Ok(d);
        }
    }
    bail!("no writable scratch directory in /var/tmp or /tmp")
}
