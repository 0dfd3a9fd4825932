//! Whether this machine can capture, and running a job under the collector.

use std::path::Path;
use std::process::{Command, Output};

use crate::bins::bin;

/// `Ok` when the collector can load its probes here, else why not (not root,
/// no BTF, a kernel that refuses the programs...). Found by capturing `true`,
/// so whatever stops the collector is reported in its own words.
pub fn probe_support(scratch: &Path) -> Result<(), String> {
    if !iorepro_format::host::is_root() {
        return Err("not root: capturing needs root (or CAP_BPF + CAP_PERFMON)".into());
    }
    let out = Command::new(bin("iorepro-collect"))
        .arg("--out")
        .arg(scratch.join("probe-check"))
        .args(["--", "true"])
        .output()
        .map_err(|e| format!("cannot run iorepro-collect: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "iorepro-collect cannot capture on this machine ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether the calling test can capture here: `true`, or, when it cannot
/// ([`probe_support`]'s reason), `false` after [`crate::skip::cannot_run`]
/// (a failure under CI). The test returns when this is `false`.
pub fn can_capture(scratch: &Path) -> bool {
    match probe_support(scratch) {
        Ok(()) => true,
        Err(why) => {
            crate::skip::cannot_run(why);
            false
        }
    }
}

/// Runs `command` under `iorepro-collect --out trace --path-prefix ...`.
pub fn capture(trace: &Path, prefixes: &[&Path], command: &[String]) -> Output {
    let mut cmd = Command::new(bin("iorepro-collect"));
    cmd.arg("--out").arg(trace);
    for p in prefixes {
        cmd.arg("--path-prefix").arg(p);
    }
    cmd.arg("--").args(command);
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}
