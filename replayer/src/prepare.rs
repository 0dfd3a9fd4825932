//! Creates the files the replay will read, at the sizes the trace needs, with
//! incompressible data (storage that compresses or deduplicates must not
//! flatter the result), several files at a time. Files already present at
//! least as large are kept. Afterwards the files are dropped from this node's
//! page cache so the replay reads them from storage, as the traced job did.
//! `--drop-caches` goes further and drops the whole node's caches (metadata
//! too), the one step of a replay that needs privilege.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use serde::Serialize;

use crate::confine::{normalise, Confined};
use crate::engine::{Engine, Psync};
use crate::error::{ReplayError, ReplayResult};
use crate::remap::{data_path, rank_path, RankMap};
use crate::survey::Survey;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrepareMode {
    Auto,
    Only,
    Skip,
}

impl std::str::FromStr for PrepareMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(PrepareMode::Auto),
            "only" => Ok(PrepareMode::Only),
            "skip" => Ok(PrepareMode::Skip),
            _ => Err(format!("`{s}` is not a prepare mode (auto, only, skip)")),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct PrepareStats {
    pub files_created: u64,
    pub files_present: u64,
    pub bytes_written: u64,
    pub duration_s: f64,
}

/// One file to make: where, and how big.
#[derive(Debug, Clone)]
pub struct PrepareTask {
    pub rel: PathBuf,
    pub size: u64,
}

/// Every data file the world of `world` ranks reads, replica by replica, and
/// every rank's own copy of a file the trace both reads and writes (state
/// read back, a checkpoint resumed in place); the task list is the same on
/// every process, which takes its share by index.
pub fn tasks(survey: &Survey, map: &RankMap, world: u32) -> Vec<PrepareTask> {
    let mut out = Vec::new();
    for info in survey
        .paths
        .iter()
        .filter(|i| i.written && i.read_extent > 0)
    {
        let Some(n) = normalise(&info.path) else {
            continue;
        };
        for t in (0..world).filter(|&t| info.readers.contains(&map.source_rank(t))) {
            out.push(PrepareTask {
                rel: rank_path(t, &n),
                size: info.read_extent,
            });
        }
    }
    for replica in 0..map.replicas(world) {
        for info in &survey.paths {
            if info.written || info.read_extent == 0 {
                continue;
            }
            let needed = info.readers.iter().any(|r| {
                map.sources
                    .iter()
                    .position(|s| s == r)
                    .is_some_and(|si| map.replica_has_source(world, replica, si))
            });
            if let (true, Some(n)) = (needed, normalise(&info.path)) {
                out.push(PrepareTask {
                    rel: data_path(replica, &n),
                    size: info.read_extent,
                });
            }
        }
    }
    out
}

const CHUNK: usize = 1 << 20;

const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";
const CAP_SYS_ADMIN: u32 = 21;

fn has_cap_sys_admin() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
}

fn privilege_error(why: &str) -> ReplayError {
    ReplayError::Privilege(format!(
        "--drop-caches needs root (CAP_SYS_ADMIN) to write {DROP_CACHES}: {why}; \
         run as root, or without --drop-caches (prepared data files are still evicted)"
    ))
}

/// Fails unless this process may drop the node's caches.
pub fn check_can_drop_caches() -> ReplayResult<()> {
    if !has_cap_sys_admin() {
        return Err(privilege_error("this process lacks CAP_SYS_ADMIN"));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(DROP_CACHES)
        .map(drop)
        .map_err(|e| privilege_error(&e.to_string()))
}

/// Writes dirty pages back, then drops the page cache, dentries and inodes.
pub fn drop_caches() -> ReplayResult<()> {
    // SAFETY: sync(2) takes no arguments.
    unsafe { libc::sync() };
    std::fs::write(DROP_CACHES, b"3").map_err(|e| privilege_error(&e.to_string()))
}

/// Prepares tasks `i` with `i % share.1 == share.0`, with `threads` files at a time.
pub fn prepare(
    conf: &Confined,
    all: &[PrepareTask],
    share: (u32, u32),
    threads: usize,
) -> ReplayResult<PrepareStats> {
    let mine: Vec<&PrepareTask> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| *i as u32 % share.1 == share.0)
        .map(|(_, t)| t)
        .collect();
    let start = Instant::now();
    let next = AtomicUsize::new(0);
    let created = AtomicU64::new(0);
    let present = AtomicU64::new(0);
    let written = AtomicU64::new(0);
    let first_error: Mutex<Option<ReplayError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for t in 0..threads.max(1) {
            let (next, created, present, written, first_error, mine) =
                (&next, &created, &present, &written, &first_error, &mine);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(0x1e0 + t as u64);
                let mut buf = vec![0u8; CHUNK];
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= mine.len() || first_error.lock().expect("lock").is_some() {
                        return;
                    }
                    match make_file(conf, mine[i], &mut rng, &mut buf) {
                        Ok(0) => present.fetch_add(1, Ordering::Relaxed),
                        Ok(n) => {
                            written.fetch_add(n, Ordering::Relaxed);
                            created.fetch_add(1, Ordering::Relaxed)
                        }
                        Err(e) => {
                            first_error.lock().expect("lock").get_or_insert(e);
                            return;
                        }
                    };
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().expect("lock") {
        return Err(e);
    }
    Ok(PrepareStats {
        files_created: created.into_inner(),
        files_present: present.into_inner(),
        bytes_written: written.into_inner(),
        duration_s: start.elapsed().as_secs_f64(),
    })
}

/// Returns the bytes written (0 when the file was already there).
fn make_file(
    conf: &Confined,
    t: &PrepareTask,
    rng: &mut SmallRng,
    buf: &mut [u8],
) -> ReplayResult<u64> {
    let io = |what, e| ReplayError::io(what, conf.display(&t.rel), e);
    let have = conf.file_size(&t.rel).map_err(|e| io("checking", e))?;
    if have.is_some_and(|h| h >= t.size) {
        if let Ok(fd) = conf.open(&t.rel, libc::O_RDONLY, 0) {
            // SAFETY: fadvise on an open descriptor.
            unsafe { libc::posix_fadvise(fd.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
        return Ok(0);
    }
    if let Some(parent) = t.rel.parent() {
        conf.create_dirs(parent)
            .map_err(|e| io("creating directory for", e))?;
    }
    let fd = conf
        .open(
            &t.rel,
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
            0o644,
        )
        .map_err(|e| io("creating", e))?;
    let mut off = 0u64;
    let mut eng = Psync;
    while off < t.size {
        let n = ((t.size - off) as usize).min(buf.len());
        rng.fill_bytes(&mut buf[..n]);
        let w = eng
            .write_at(fd.as_raw_fd(), &buf[..n], off)
            .map_err(|e| io("writing", e))?;
        off += w as u64;
    }
    eng.sync(fd.as_raw_fd(), true)
        .map_err(|e| io("syncing", e))?;
    // SAFETY: fadvise on an open descriptor.
    unsafe { libc::posix_fadvise(fd.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    Ok(t.size)
}
