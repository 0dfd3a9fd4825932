//! Who may load the programs: checked first, from the process's effective
//! capabilities, so that a refusal names what is missing (and what `--user`
//! adds) rather than surfacing as a bare EPERM from the bpf syscall.

use crate::error::{CollectError, CollectResult};

/// Refuses to start without the capabilities loading needs, naming the missing ones.
pub fn check_privileges(need_setuid: bool) -> CollectResult<()> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |bit: u32| eff & (1u64 << bit) != 0;
    const CAP_SETGID: u32 = 6;
    const CAP_SETUID: u32 = 7;
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let mut missing = Vec::new();
    if !has(CAP_SYS_ADMIN) {
        if !has(CAP_BPF) {
            missing.push("CAP_BPF");
        }
        if !has(CAP_PERFMON) {
            missing.push("CAP_PERFMON");
        }
    }
    if need_setuid {
        if !has(CAP_SETUID) {
            missing.push("CAP_SETUID");
        }
        if !has(CAP_SETGID) {
            missing.push("CAP_SETGID");
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(CollectError::Privilege(format!(
            "iorepro-collect needs root or CAP_BPF + CAP_PERFMON{}; this process lacks {}",
            if need_setuid {
                " + CAP_SETUID + CAP_SETGID (for --user)"
            } else {
                ""
            },
            missing.join(", ")
        )))
    }
}
