//! What the collector benchmarks share (`collector` and `collector_rate`):
//! the compiled C jobs and their data file, the collector's command line,
//! and the manifest keys they read.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::Ctx;

/// The compiled benchmark jobs and their data file.
pub struct Jobs {
    pub pairs: PathBuf,
    pub stats: PathBuf,
    pub flood: PathBuf,
    pub data: PathBuf,
}

impl Jobs {
    /// Compiles the C jobs with `cc` and writes a cached data file of `mib` MiB.
    pub fn build(dir: &Path, mib: usize) -> Result<Jobs> {
        let compile = |name: &str, source: &str, extra: &[&str]| -> Result<PathBuf> {
            let src = dir.join(format!("{name}.c"));
            std::fs::write(&src, source)?;
            let bin = dir.join(name);
            let o = Command::new("cc")
                .args(["-O2", "-o"])
                .arg(&bin)
                .arg(&src)
                .args(extra)
                .output()
                .context("running cc (the benchmark jobs are C programs)")?;
            if !o.status.success() {
                bail!("cc {name}.c: {}", String::from_utf8_lossy(&o.stderr));
            }
            Ok(bin)
        };
        let data = dir.join("data.bin");
        // Incompressible, so nothing below the page cache flatters a read.
        let mut block = vec![0u8; 1 << 20];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut f = std::fs::File::create(&data)?;
        for _ in 0..mib {
            for b in block.chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b.copy_from_slice(&x.to_le_bytes());
            }
            f.write_all(&block)?;
        }
        drop(f);
        std::fs::read(&data)?; // into the page cache
        Ok(Jobs {
            pairs: compile("pairs", include_str!("jobs/pairs.c"), &[])?,
            stats: compile("stats", include_str!("jobs/stats.c"), &[])?,
            flood: compile("flood", include_str!("jobs/flood.c"), &["-pthread"])?,
            data,
        })
    }
}

/// `iorepro-collect --out OUT [extra...] --`, for the job to be appended.
pub fn collect_cmd(ctx: &Ctx, out: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(ctx.bin("iorepro-collect"));
    c.arg("--out").arg(out).args(extra).arg("--");
    c
}

/// The manifest keys these benchmarks read.
pub struct Manifest {
    pub events: u64,
    pub calls: u64,
    pub dropped_events: u64,
    pub extra: serde_json::Value,
}

impl Manifest {
    pub fn load(trace: &Path) -> Result<Manifest> {
        let path = trace.join("manifest.json");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)
            .with_context(|| format!("{}: not JSON", path.display()))?;
        let events = v["events"].as_u64().unwrap_or(0);
        Ok(Manifest {
            events,
            calls: v["calls"].as_u64().unwrap_or(events),
            dropped_events: v["dropped_events"].as_u64().unwrap_or(0),
            extra: v,
        })
    }
}
