//! The kernels of the collector's matrix: Debian's own kernel packages (they
//! carry BTF), fetched from Debian's archive and unpacked under
//! `target/kernels/SUITE/`, where `collector/tests/kernel_matrix.rs` boots
//! each one in a VM (QEMU and virtme-ng, installed by setup).
//!
//! Each suite's kernel is the one its `linux-image-amd64` names when it is
//! first fetched; a suite already unpacked is left as it is, so setup stays
//! quick and the matrix stable on a machine. The archive is read through a
//! temporary sources list and package lists of its own, in a temporary
//! directory removed afterwards: the machine's own apt configuration is
//! neither read nor changed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The matrix: the oldest kernel the collector supports (Debian 11's 5.10),
/// Debian 12's 6.1 (io_uring's tracepoint before its rename) and the
/// newest Debian 12 backports (6.12, also Debian 13's), besides whatever
/// the host runs.
pub const SUITES: &[&str] = &["bullseye", "bookworm", "bookworm-backports"];

const ARCHIVE: &str = "http://deb.debian.org/debian";
const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// Where the kernels are unpacked.
pub fn dir(root: &Path) -> PathBuf {
    root.join("target/kernels")
}

/// Fetches and unpacks every suite's kernel that is not there yet.
pub fn fetch(root: &Path) -> Result<()> {
    let missing: Vec<&str> = SUITES
        .iter()
        .copied()
        .filter(|s| vmlinuz(&dir(root).join(s)).is_none())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let tmp = tempfile::Builder::new()
        .prefix("iorepro-kernels-")
        .tempdir()?;
    let t = tmp.path();
    for sub in ["lists/partial", "cache/archives/partial", "debs"] {
        std::fs::create_dir_all(t.join(sub))?;
    }
    let sources: String = missing
        .iter()
        .map(|s| format!("deb [signed-by={KEYRING}] {ARCHIVE} {s} main\n"))
        .collect();
    std::fs::write(t.join("sources.list"), sources)?;
    let apt_opts = [
        format!("Dir::Etc::SourceList={}", t.join("sources.list").display()),
        "Dir::Etc::SourceParts=/dev/null".into(),
        format!("Dir::State::Lists={}", t.join("lists").display()),
        format!("Dir::Cache={}", t.join("cache").display()),
    ];
    let apt = |tool: &str| {
        let mut c = Command::new(tool);
        for o in &apt_opts {
            c.args(["-o", o]);
        }
        c.current_dir(t.join("debs"));
        c
    };
    println!(
        "setup: fetching Debian's kernels for the collector's kernel matrix ({})",
        missing.join(", ")
    );
    run(apt("apt-get").args(["update", "-q"]))?;
    for suite in &missing {
        // The suite's current kernel: the image its metapackage depends on.
        let out = apt("apt-cache")
            .args(["show", &format!("linux-image-amd64/{suite}")])
            .output()
            .context("running apt-cache")?;
        let text = String::from_utf8_lossy(&out.stdout);
        let package = text
            .lines()
            .find_map(|l| l.strip_prefix("Depends:"))
            .and_then(|d| d.split([',', '(']).next())
            .map(str::trim)
            .filter(|p| p.starts_with("linux-image-"))
            .with_context(|| format!("no linux-image-amd64 in Debian {suite}"))?
            .to_string();
        run(apt("apt-get").args(["download", "-q", &format!("{package}/{suite}")]))?;
        let deb = std::fs::read_dir(t.join("debs"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{package}_")))
            })
            .with_context(|| format!("{package} was not downloaded"))?;
        let into = dir(root).join(suite);
        let partial = dir(root).join(format!("{suite}.partial"));
        let _ = std::fs::remove_dir_all(&partial);
        std::fs::create_dir_all(&partial)?;
        run(Command::new("dpkg").arg("-x").arg(&deb).arg(&partial))?;
        // virtme-ng loads the guest's modules (9p, virtio) from here.
        if let Some(kver) = vmlinuz(&partial).and_then(|v| release_of(&v)) {
            run(Command::new("depmod")
                .args(["-a", "-b"])
                .arg(&partial)
                .arg(&kver))?;
        }
        std::fs::write(partial.join("PACKAGE"), format!("{package} ({suite})\n"))?;
        let _ = std::fs::remove_dir_all(&into);
        std::fs::rename(&partial, &into)?;
        std::fs::remove_file(&deb)?;
        println!("setup: {package} unpacked in {}", into.display());
    }
    Ok(())
}

/// The kernel image under an unpacked package.
pub fn vmlinuz(unpacked: &Path) -> Option<PathBuf> {
    std::fs::read_dir(unpacked.join("boot"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
}

fn release_of(vmlinuz: &Path) -> Option<String> {
    let name = vmlinuz.file_name()?.to_str()?;
    Some(name.strip_prefix("vmlinuz-")?.to_string())
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}
