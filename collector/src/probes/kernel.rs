//! What the host must provide before any program is loaded, checked or set
//! up here so that a kernel that cannot run the capture says why in a
//! sentence (no BTF, which Linux it is) instead of failing deep in the loader.

use std::path::Path;

use rustix::mount::MountFlags;
use rustix::process::{Resource, Rlimit};

use crate::error::{CollectError, CollectResult};

/// `uname -r`.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Everything a capture's loading needs from the host before it starts:
/// BTF, a mounted tracefs and, on old kernels, room under the memlock limit.
pub(super) fn prepare() -> CollectResult<()> {
    if let Some(why) = forced_failure() {
        return Err(CollectError::Kernel(why));
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(CollectError::Kernel(format!(
            "this kernel ({}) has no BTF (/sys/kernel/btf/vmlinux): iorepro-collect needs \
             Linux 5.10 or later built with CONFIG_DEBUG_INFO_BTF=y",
            kernel_release()
        )));
    }
    ensure_tracefs()?;
    raise_memlock();
    Ok(())
}

/// `IOREPRO_FORCE_LOAD_FAILURE=WHY` makes loading fail with WHY, as a
/// kernel that refuses the programs would: how the tests check what a
/// failed start leaves behind on a kernel that loads them.
fn forced_failure() -> Option<String> {
    std::env::var("IOREPRO_FORCE_LOAD_FAILURE")
        .ok()
        .filter(|v| !v.is_empty())
}

/// Tracepoints are found through tracefs, which a minimal system may not mount.
pub(super) fn ensure_tracefs() -> CollectResult<()> {
    let root = Path::new("/sys/kernel/tracing");
    if root.join("events").exists() || Path::new("/sys/kernel/debug/tracing/events").exists() {
        return Ok(());
    }
    rustix::mount::mount("nodev", root, "tracefs", MountFlags::empty(), None)
        .map_err(|e| CollectError::io(root, e.into()))
}

/// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK.
pub(super) fn raise_memlock() {
    let unlimited = Rlimit {
        current: None,
        maximum: None,
    };
    // Failure only matters on old kernels.
    let _ = rustix::process::setrlimit(Resource::Memlock, unlimited);
}
