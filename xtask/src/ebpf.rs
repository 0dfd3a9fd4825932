//! The kernel-side object: built from `ebpf/iorepro-ebpf` with the pinned
//! nightly and bpf-linker, committed as `collector/bpf/iorepro.bpf.o`, and
//! embedded by the collector, which therefore builds on stable Rust alone.
//!
//! The build is reproducible: the same sources, toolchain and linker give the
//! same bytes wherever the checkout or cargo's home lies. Cargo's `trim-paths`
//! writes every source path relative (the checkout) or by crate name (the
//! registry, the toolchain's library), and the eBPF workspace's root holds the
//! shared crate so that its build hash does not depend on the checkout's
//! absolute path either. "The committed object matches its sources" is
//! therefore judged by a plain byte compare of a fresh build against the
//! committed file (`cargo xtask test` does it).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::setup;

/// The committed object, relative to the workspace root.
pub const OBJECT: &str = "collector/bpf/iorepro.bpf.o";
/// The kernel-side workspace (the programs and their pinned toolchain),
/// relative to the host workspace root.
const WORKSPACE: &str = "ebpf";
/// The crate's binary target, which is the object.
const BIN: &str = "iorepro";
const TARGET: &str = "bpfel-unknown-none";

/// `cargo xtask build-ebpf`: rebuilds the object and writes the committed copy.
pub fn build(root: &Path) -> Result<()> {
    let built = compile(root)?;
    let dest = root.join(OBJECT);
    std::fs::create_dir_all(dest.parent().expect("object has a directory"))?;
    std::fs::copy(&built, &dest).with_context(|| dest.display().to_string())?;
    println!(
        "build-ebpf: wrote {} ({} bytes); commit it with its sources",
        OBJECT,
        std::fs::metadata(&dest)?.len()
    );
    Ok(())
}

/// Fails when the committed object is not what its sources build to now.
pub fn check(root: &Path) -> Result<()> {
    let built = compile(root)?;
    let fresh = std::fs::read(&built).with_context(|| built.display().to_string())?;
    let committed_path = root.join(OBJECT);
    let committed = std::fs::read(&committed_path)
        .with_context(|| format!("{OBJECT} is missing: run `cargo xtask build-ebpf`"))?;
    if fresh != committed {
        bail!(
            "{OBJECT} does not match its sources (a fresh build is {} bytes, the committed one {}): \
             run `cargo xtask build-ebpf` and commit the object",
            fresh.len(),
            committed.len()
        );
    }
    println!(
        "build-ebpf: {OBJECT} matches its sources ({} bytes)",
        fresh.len()
    );
    Ok(())
}

/// Builds the object into `target/ebpf` and returns its path. The flags are
/// those aya's own build helper uses: BTF for the loader, and the
/// architecture cfg by which aya-ebpf reads the saved registers.
fn compile(root: &Path) -> Result<PathBuf> {
    let nightly = setup::pinned_nightly(root)?;
    setup::ebpf_toolchain(root)?;
    let target_dir = root.join("target/ebpf");
    let rustflags = [
        "--cfg=bpf_target_arch=\"x86_64\"",
        "-Cdebuginfo=2",
        "-Clink-arg=--btf",
    ]
    .join("\x1f");
    println!("build-ebpf: building {WORKSPACE}/ with {nightly} and bpf-linker");
    let mut cmd = Command::new("rustup");
    cmd.args(["run", &nightly, "cargo", "build", "--release", "--locked"])
        .args(["--package", "iorepro-ebpf", "--bins", "--target", TARGET])
        .args(["-Z", "build-std=core", "-Z", "trim-paths"])
        .args(["--config", "profile.release.trim-paths=\"all\""])
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(root.join(WORKSPACE))
        .env("PATH", setup::tool_path())
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags);
    // The outer (stable) cargo's choices must not leak into the nightly build.
    for var in [
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTFLAGS",
        "CARGO",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .context("running rustup (is rustup installed?)")?;
    if !status.success() {
        bail!("building the eBPF programs failed ({status}); `cargo xtask setup` installs the toolchain");
    }
    Ok(target_dir.join(TARGET).join("release").join(BIN))
}
