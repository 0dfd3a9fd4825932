//! Compiles the kernel-side programs (ebpf/iorepro-ebpf, its own workspace,
//! built with nightly for the bpf target) into OUT_DIR, where `probes.rs`
//! embeds the object.

use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let ebpf_dir = manifest_dir.join("../ebpf/iorepro-ebpf").canonicalize()?;
    let common_dir = manifest_dir.join("../ebpf/iorepro-common").canonicalize()?;
    println!("cargo:rerun-if-changed={}", common_dir.display());
    // aya-build runs `cargo build --package` in the current directory; from
    // there cargo finds the eBPF crate's own workspace and profiles.
    std::env::set_current_dir(&ebpf_dir)?;
    let root = ebpf_dir.to_string_lossy().into_owned();
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "iorepro-ebpf",
            root_dir: &root,
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )
}
