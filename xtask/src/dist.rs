//! `cargo xtask dist`: the three binaries built static, for nodes that have
//! no Rust and an older C library than the machine that builds them.
//!
//! Built as `x86_64-unknown-linux-musl`, the binaries carry their C library
//! inside: no program interpreter, no shared library, so they start on any
//! x86-64 Linux whatever its glibc (Ubuntu 20.04's 2.31, RHEL 8's 2.28)
//! or none at all. The collector's kernel-side object is embedded in it, as
//! in every build. The MPI rendezvous (the `mpi` feature) links the node's
//! own Open MPI and is left out: a static replay meets its ranks through a
//! shared directory or the launcher's environment.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::host::MIB;
use anyhow::{bail, Context, Result};

/// The Rust target of the static build.
pub const STATIC_TARGET: &str = "x86_64-unknown-linux-musl";

/// (package, binary) of what a node needs.
const BINARIES: [(&str, &str); 3] = [
    ("iorepro-collector", "iorepro-collect"),
    ("iorepro-traces", "iorepro-trace"),
    ("iorepro-replayer", "iorepro-replay"),
];

/// The folder the static binaries are put in, and the tarball's top folder.
pub const STATIC_DIR: &str = "iorepro-x86_64-linux-static";

/// Builds the static binaries and packs them: `target/dist/STATIC_DIR/`
/// (the binaries and their SHA256SUMS) and
/// `target/dist/iorepro-VERSION-x86_64-linux-static.tar.gz`.
pub fn build(root: &Path) -> Result<PathBuf> {
    let mut args = vec!["build", "--release", "--locked", "--target", STATIC_TARGET];
    for (package, bin) in BINARIES {
        args.extend(["-p", package, "--bin", bin]);
    }
    let started = std::time::Instant::now();
    // Symbols off: a node gets a few MB per binary instead of tens.
    crate::run_cargo(crate::cargo_command(&args).env("CARGO_PROFILE_RELEASE_STRIP", "symbols"))?;
    let built = root.join("target").join(STATIC_TARGET).join("release");
    let dist = root.join("target").join("dist");
    let dir = dist.join(STATIC_DIR);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| dir.display().to_string())?;
    }
    std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
    for (_, bin) in BINARIES {
        let from = built.join(bin);
        std::fs::copy(&from, dir.join(bin))
            .with_context(|| format!("copying {}", from.display()))?;
    }
    let names: Vec<&str> = BINARIES.iter().map(|(_, bin)| *bin).collect();
    let sums = run_in(&dir, Command::new("sha256sum").args(&names))?;
    std::fs::write(dir.join("SHA256SUMS"), sums)?;
    let tarball = dist.join(format!(
        "iorepro-{}-x86_64-linux-static.tar.gz",
        env!("CARGO_PKG_VERSION")
    ));
    run_in(
        &dist,
        Command::new("tar")
            .arg("czf")
            .arg(&tarball)
            .args(["--owner=0", "--group=0", STATIC_DIR]),
    )?;
    for bin in &names {
        let size = std::fs::metadata(dir.join(bin))?.len();
        println!("dist: {bin} {:.1} MiB", size as f64 / MIB);
    }
    println!(
        "dist: {} ({:.1} MiB) in {:.0} s",
        tarball.display(),
        std::fs::metadata(&tarball)?.len() as f64 / MIB,
        started.elapsed().as_secs_f64()
    );
    Ok(tarball)
}

/// Runs `cmd` in `dir`; its stdout, or an error with its stderr.
fn run_in(dir: &Path, cmd: &mut Command) -> Result<Vec<u8>> {
    let out = cmd
        .current_dir(dir)
        .output()
        .with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}
