//! Project automation: `cargo xtask setup | test | build-ebpf | demo | dist | bench`.
//!
//! `setup` installs, idempotently, what a fresh machine lacks (the eBPF
//! toolchain, fio, Open MPI, Slurm, munge, Prometheus, the Python test
//! partners, QEMU and virtme-ng and the kernels of the collector's matrix); `test` runs setup and then every test, the root-only eBPF and
//! Slurm ones included; `bench` prints the side-by-side benchmark lines;
//! `demo` is the README's tour in one command; `dist` builds the static
//! binaries a node without Rust runs.

mod bench;
mod demo;
mod dist;
mod ebpf;
mod kernels;
mod setup;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

const USAGE: &str = "usage: cargo xtask <command>

commands:
  setup              install what the project needs on this machine (idempotent)
  test [--no-setup] [--fuzz SECONDS]
                     run setup, format and lint checks, and every test
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
    if let Err(e) = run() {
        eprintln!("Error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    std::env::set_current_dir(&root)?;
    let command = args.first().map(String::as_str);
    // Only `test` and `bench` take options: a flag given to another command
    // is a mistake, not something to ignore.
    if let (Some(cmd @ ("setup" | "build-ebpf" | "demo" | "dist")), Some(extra)) =
        (command, args.get(1))
    {
        bail!("{cmd} takes no options (got `{extra}`)\n{USAGE}");
    }
    match command {
        Some("setup") => setup::run(&root),
        Some("test") => test(&root, &args[1..]),
        Some("build-ebpf") => ebpf::build(&root),
        Some("demo") => demo::run(&root),
        Some("dist") => {
            setup::static_target()?;
            dist::build(&root).map(drop)
        }
        Some("bench") => bench_cmd(&root, &args[1..]),
        Some("-h") | Some("--help") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown command `{other}`\n{USAGE}"),
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

fn test(root: &Path, args: &[String]) -> Result<()> {
    let mut fuzz: Option<u64> = None;
    let mut do_setup = true;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--no-setup" => do_setup = false,
            "--fuzz" => {
                fuzz = Some(
                    it.next()
                        .context("--fuzz takes a number of seconds")?
                        .parse()
                        .context("--fuzz takes a number of seconds")?,
                )
            }
            other => bail!("test: unknown option `{other}`"),
        }
    }
    if do_setup {
        setup::run(root)?;
    }
    if !setup::is_root() {
        eprintln!("note: not root: the eBPF capture tests will say so and skip; run as root for the full suite");
    }
    // The collector embeds the committed object; it must be what its sources
    // build to with the pinned toolchain.
    ebpf::check(root)?;
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

fn bench_cmd(root: &Path, args: &[String]) -> Result<()> {
    let mut quick = false;
    let mut only: Option<Vec<String>> = None;
    let mut analysis_rows: Option<u64> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--only" => {
                let names: Vec<String> = it
                    .next()
                    .context("--only takes benchmark names, comma-separated")?
                    .split(',')
                    .map(str::to_string)
                    .collect();
                bench::check_names(&names)?;
                only = Some(names);
            }
            "--analysis-rows" => {
                analysis_rows = Some(
                    it.next()
                        .and_then(|n| n.replace('_', "").parse().ok())
                        .context("--analysis-rows takes a number of rows")?,
                )
            }
            other => bail!("bench: unknown option `{other}`\n{USAGE}"),
        }
    }
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
