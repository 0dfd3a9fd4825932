//! Requests inside TLS: the uprobes on OpenSSL (see the kernel side's
//! `tls`), attached to each OpenSSL library the traced processes map.
//!
//! The system's library is attached before the job starts, so its first
//! request is seen; a traced process's own copy (a virtual environment's,
//! conda's) is found in its memory map at the next sweeps (the first three
//! after the process is seen) and attached then. A library is attached
//! once, by its file (`/lib` and `/usr/lib` are one directory on most
//! systems, and a probe attached twice would see each call twice). Where
//! the programs cannot be loaded, or a process's TLS is linked in without
//! OpenSSL's symbols, the capture goes on and says so.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use aya::programs::uprobe::UProbeScope;
use aya::programs::UProbe;
use aya::Ebpf;

use super::programs::program;
use super::{Capabilities, Missing};

/// (program, OpenSSL function): each function's entry program; the one
/// return program [`RETURN`] goes on all four.
const ENTRIES: [(&str, &str); 4] = [
    ("tls_write", "SSL_write"),
    ("tls_write_ex", "SSL_write_ex"),
    ("tls_read", "SSL_read"),
    ("tls_read_ex", "SSL_read_ex"),
];
const RETURN: &str = "tls_return";

/// Where a distribution keeps its shared libraries.
const SYSTEM_DIRS: [&str; 6] = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

/// The sweeps a process's memory map is read at, from the first after it
/// is seen.
const SCANS: u8 = 3;

/// The OpenSSL libraries attached, and the processes looked at.
#[derive(Default)]
pub struct Tls {
    /// Loaded and ready to attach; false where the kernel refused them.
    loaded: bool,
    /// Attached libraries, by (device, inode).
    attached: HashSet<(u64, u64)>,
    /// Paths that failed to attach (not OpenSSL after all, no symbols):
    /// tried once.
    failed: HashSet<PathBuf>,
    scans: HashMap<u32, u8>,
}

impl Tls {
    /// Loads the programs and attaches them to the system's OpenSSL;
    /// records in `caps` what could not be done.
    pub fn start(ebpf: &mut Ebpf, caps: &mut Capabilities) -> Tls {
        let mut tls = Tls::default();
        let loaded = ENTRIES
            .iter()
            .map(|(name, _)| *name)
            .chain([RETURN])
            .try_for_each(|name| {
                let p: &mut UProbe = program(ebpf, name).map_err(|e| e.to_string())?;
                p.load()
                    .map_err(|e| format!("the kernel refused `{name}`: {e:#}"))
            });
        match loaded {
            Ok(()) => tls.loaded = true,
            Err(why) => {
                caps.missing.push(Missing {
                    what: "tls_requests",
                    effect: "object-storage requests over TLS (https://) not captured",
                    why,
                });
                return tls;
            }
        }
        let mut found = 0;
        for dir in SYSTEM_DIRS {
            for lib in openssl_in(Path::new(dir)) {
                found += tls.attach(ebpf, &lib) as usize;
            }
        }
        if found > 0 {
            caps.hooks.push("uprobe:libssl:SSL_write,SSL_read(_ex)");
        }
        tls
    }

    /// Looks for OpenSSL copies of their own in the maps of `pids` not
    /// yet looked at [`SCANS`] times, and attaches to any new one.
    pub fn sweep(&mut self, ebpf: &mut Ebpf, pids: &[u32]) {
        if !self.loaded {
            return;
        }
        // The processes gone are forgotten (a set: a whole capture may
        // trace a hundred thousand).
        let live: HashSet<u32> = pids.iter().copied().collect();
        self.scans.retain(|pid, _| live.contains(pid));
        for &pid in pids {
            let n = self.scans.entry(pid).or_insert(0);
            if *n >= SCANS {
                continue;
            }
            *n += 1;
            for lib in mapped_openssl(pid) {
                self.attach(ebpf, &lib);
            }
        }
    }

    /// Attaches the programs to `lib`, once per file; whether it is now
    /// (or was already) attached.
    fn attach(&mut self, ebpf: &mut Ebpf, lib: &Path) -> bool {
        let Ok(meta) = std::fs::metadata(lib) else {
            return false;
        };
        let id = (meta.dev(), meta.ino());
        if self.attached.contains(&id) {
            return true;
        }
        if self.failed.contains(lib) {
            return false;
        }
        let mut attach_all = || -> Result<(), String> {
            for (name, symbol) in ENTRIES {
                let p: &mut UProbe = program(ebpf, name).map_err(|e| e.to_string())?;
                p.attach(symbol, lib, UProbeScope::AllProcesses)
                    .map_err(|e| format!("{symbol}: {e:#}"))?;
                let r: &mut UProbe = program(ebpf, RETURN).map_err(|e| e.to_string())?;
                r.attach(symbol, lib, UProbeScope::AllProcesses)
                    .map_err(|e| format!("{symbol} (return): {e:#}"))?;
            }
            Ok(())
        };
        match attach_all() {
            Ok(()) => {
                self.attached.insert(id);
                true
            }
            Err(_) => {
                // An older OpenSSL without the `_ex` forms keeps what did
                // attach; a file that is no OpenSSL is not tried again.
                self.failed.insert(lib.to_path_buf());
                false
            }
        }
    }
}

/// Whether a file name is OpenSSL's library (`libssl.so.3`, a wheel's
/// `libssl-1a2b3c4d.so.3`).
fn is_openssl(name: &str) -> bool {
    name.starts_with("libssl.so") || name.starts_with("libssl-") && name.contains(".so")
}

fn openssl_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut libs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(is_openssl))
        .map(|e| e.path())
        .collect();
    libs.sort();
    libs
}

/// The OpenSSL libraries a process maps (as `/proc/PID/root` sees them, so
/// a container's own copy is found).
fn mapped_openssl(pid: u32) -> Vec<PathBuf> {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    let mut libs: Vec<PathBuf> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| {
            Path::new(p)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_openssl)
        })
        .map(|p| PathBuf::from(format!("/proc/{pid}/root{p}")))
        .collect();
    libs.sort();
    libs.dedup();
    libs
}

#[cfg(test)]
mod tests {
    use super::is_openssl;

    #[test]
    fn openssl_is_known_by_its_file_name() {
        assert!(is_openssl("libssl.so.3"));
        assert!(is_openssl("libssl.so.1.1"));
        assert!(is_openssl("libssl-8a1b2c3d.so.3"));
        assert!(!is_openssl("libssl3.so"));
        assert!(!is_openssl("libcrypto.so.3"));
    }
}
