//! What the host must provide before any program is loaded, checked or set
//! up here so that a kernel that cannot run the capture says why in a
//! sentence (no BTF, which Linux it is) instead of failing deep in the loader.

use std::path::Path;

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
    let r = unsafe {
        // SAFETY: constant NUL-terminated strings.
        libc::mount(
            c"nodev".as_ptr(),
            c"/sys/kernel/tracing".as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(CollectError::io(root, std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK.
pub(super) fn raise_memlock() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a plain struct argument; failure only matters on old kernels.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
}
