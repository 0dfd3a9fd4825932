//! Puts the target in the state the traced job found: the files the replay
//! will read, at the sizes the trace needs, with incompressible data
//! (storage that compresses or deduplicates must not flatter the result);
//! the directories and files that existed (see [`crate::plan::presence`]); and,
//! in each rank's own copy, nothing where the trace creates a path anew.
//! Several tasks run at a time. Files already present at least as large
//! are kept. Afterwards the files are dropped from this node's
//! page cache so the replay reads them from storage, as the traced job did.
//! `--drop-caches` goes further and drops the whole node's caches (metadata
//! too), the one step of a replay that needs privilege.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use serde::Serialize;

use crate::error::{ReplayError, ReplayResult, CREATING_DIRECTORY};
use crate::io::confine::Confined;
use crate::io::engine::{Engine, Psync};
use crate::io::paths::{resolve, Place};
use crate::plan::presence::Presence;
use crate::plan::rank_map::RankMap;
use crate::plan::survey::{PathInfo, Survey};

/// `--prepare`: `auto`, `only` or `skip`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PrepareMode {
    Auto,
    Only,
    Skip,
}

/// How the target is prepared: `--prepare`, `--prepare-threads` and
/// `--drop-caches`.
#[derive(Debug, Clone, Copy)]
pub struct PrepareOptions {
    pub mode: PrepareMode,
    /// Files prepared at a time by each process.
    pub threads: usize,
    /// Drop the node's caches before the replay (privileged).
    pub drop_caches: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct PrepareStats {
    pub files_created: u64,
    pub files_present: u64,
    pub bytes_written: u64,
    /// Directories that existed when the traced job began, made beneath the target.
    #[serde(default)]
    pub dirs_made: u64,
    /// Paths an earlier replay left where the trace creates them anew, removed.
    #[serde(default)]
    pub paths_cleared: u64,
    pub duration_s: f64,
    /// Of a bucket: the requests preparing it made, by kind (a HEAD to
    /// check each object, the uploads, what clearing listed and deleted),
    /// which a store's own counts hold beside the replay's `requests`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// Removes what an earlier replay left at a path the trace creates.
    Clear,
    /// A directory that existed when the job began.
    Dir,
    /// A file that existed (or that the replay reads), at least as large as
    /// the trace reads of it.
    File,
}

/// Steps done in order by one worker, each on a trace path (by id), all
/// in one copy of the trace's paths.
#[derive(Debug, Clone)]
pub struct PrepareTask {
    pub place: Place,
    pub steps: Vec<(Step, u32)>,
}

/// How a path's copy must be when the replay starts, if it matters.
fn start_step(info: &PathInfo) -> Option<Step> {
    if info.presence == Presence::Before || info.read_extent > 0 {
        Some(if info.is_dir { Step::Dir } else { Step::File })
    } else if info.presence == Presence::Absent {
        Some(Step::Clear)
    } else {
        None
    }
}

/// Everything the world of `world` ranks needs in place before it starts:
/// for each target rank, its own copy of the name space the trace changes
/// (what an earlier replay left there cleared first, then the directories
/// and files that existed when the job began); for each replica of the
/// read-only data, the files the ranks read and the paths they find. The
/// task list is the same on every process, which takes its share by index.
pub fn tasks(survey: &Survey, map: &RankMap, world: u32) -> Vec<PrepareTask> {
    let mut out = Vec::new();
    for t in 0..world {
        let source = map.source_rank(t);
        let mut steps: Vec<(Step, u32)> = Vec::new();
        for (id, info) in survey.paths.iter().enumerate() {
            if !info.users.contains(source) || !prepared(info) {
                continue;
            }
            let changed = info.written.then(|| start_step(info)).flatten();
            if let Some(step) = changed {
                steps.push((step, id as u32));
            } else if info.holds_changed {
                steps.push((Step::Dir, id as u32));
            }
        }
        if !steps.is_empty() {
            // Clears first, then directories before the files in them.
            steps.sort_by(|a, b| {
                (a.0, &*survey.paths[a.1 as usize].path)
                    .cmp(&(b.0, &*survey.paths[b.1 as usize].path))
            });
            out.push(PrepareTask {
                place: Place::Rank(t),
                steps,
            });
        }
    }
    for replica in 0..map.replicas(world) {
        for (id, info) in survey.paths.iter().enumerate() {
            let shared = crate::plan::survey::shared_by_replicas(info);
            if info.written || !prepared(info) || shared && replica > 0 {
                continue;
            }
            let Some(step @ (Step::Dir | Step::File)) = start_step(info) else {
                continue;
            };
            let needed = shared
                || info.users.iter().any(|r| {
                    map.sources
                        .iter()
                        .position(|&s| s == r)
                        .is_some_and(|si| map.replica_has_source(world, replica, si))
                });
            if needed {
                out.push(PrepareTask {
                    place: Place::Replica(replica),
                    steps: vec![(step, id as u32)],
                });
            }
        }
    }
    out
}

/// Whether a path is put in place: one the replay keeps, or a directory
/// on the way to one (a file left out is never written, so prepare writes
/// what the replay reads and no more).
fn prepared(info: &PathInfo) -> bool {
    info.skip.is_none() || info.keeps && info.is_dir
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
    rustix::fs::sync();
    std::fs::write(DROP_CACHES, b"3").map_err(|e| privilege_error(&e.to_string()))
}

/// What the workers of [`prepare`] count.
#[derive(Default)]
pub struct Counters {
    pub created: AtomicU64,
    pub present: AtomicU64,
    pub written: AtomicU64,
    pub dirs: AtomicU64,
    pub cleared: AtomicU64,
    /// Files done (created or found), for progress.
    pub files: Arc<AtomicU64>,
}

/// How one preparing thread does a step on the copy of a path at `rel`.
pub(crate) trait StepDoer {
    fn step(
        &mut self,
        step: Step,
        rel: &Path,
        info: &PathInfo,
        counters: &Counters,
    ) -> ReplayResult<()>;
}

/// Runs tasks `i` with `i % share.1 == share.0`, `threads` at a time, each
/// thread's steps through the doer `start` makes for it (from its index).
pub(crate) fn run_tasks<D: StepDoer>(
    survey: &Survey,
    all: &[PrepareTask],
    share: (u32, u32),
    threads: usize,
    counters: &Counters,
    start: impl Fn(usize) -> ReplayResult<D> + Sync,
) -> ReplayResult<PrepareStats> {
    let mine: Vec<&PrepareTask> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| *i as u32 % share.1 == share.0)
        .map(|(_, t)| t)
        .collect();
    let began = Instant::now();
    let next = AtomicUsize::new(0);
    let first_error: Mutex<Option<ReplayError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for t in 0..threads.max(1) {
            let (next, first_error, mine, start) = (&next, &first_error, &mine, &start);
            s.spawn(move || {
                let mut doer = match start(t) {
                    Ok(d) => d,
                    Err(e) => {
                        first_error.lock().expect("lock").get_or_insert(e);
                        return;
                    }
                };
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= mine.len() || first_error.lock().expect("lock").is_some() {
                        return;
                    }
                    let task = mine[i];
                    for &(step, id) in &task.steps {
                        let info = &survey.paths[id as usize];
                        let Some(rel) = resolve(&info.path, task.place) else {
                            continue;
                        };
                        if let Err(e) = doer.step(step, &rel, info, counters) {
                            first_error.lock().expect("lock").get_or_insert(e);
                            return;
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().expect("lock") {
        return Err(e);
    }
    Ok(PrepareStats {
        files_created: counters.created.load(Ordering::Relaxed),
        files_present: counters.present.load(Ordering::Relaxed),
        bytes_written: counters.written.load(Ordering::Relaxed),
        dirs_made: counters.dirs.load(Ordering::Relaxed),
        paths_cleared: counters.cleared.load(Ordering::Relaxed),
        duration_s: began.elapsed().as_secs_f64(),
        requests: BTreeMap::new(),
    })
}

/// The files of tasks `all` this process prepares (of its `share`), for progress.
pub fn file_count(all: &[PrepareTask], share: (u32, u32)) -> u64 {
    all.iter()
        .enumerate()
        .filter(|(i, _)| *i as u32 % share.1 == share.0)
        .flat_map(|(_, t)| &t.steps)
        .filter(|(step, _)| *step == Step::File)
        .count() as u64
}

/// Prepares tasks `i` with `i % share.1 == share.0` beneath a directory
/// target, `threads` at a time.
pub(crate) fn prepare(
    conf: &Confined,
    survey: &Survey,
    all: &[PrepareTask],
    share: (u32, u32),
    threads: usize,
    counters: &Counters,
) -> ReplayResult<PrepareStats> {
    run_tasks(survey, all, share, threads, counters, |t| {
        Ok(InDirectory {
            conf,
            rng: SmallRng::seed_from_u64(0x1e0 + t as u64),
            buf: vec![0u8; CHUNK],
        })
    })
}

/// A preparing thread on a directory target.
struct InDirectory<'a> {
    conf: &'a Confined,
    rng: SmallRng,
    buf: Vec<u8>,
}

impl StepDoer for InDirectory<'_> {
    fn step(
        &mut self,
        step: Step,
        rel: &Path,
        info: &PathInfo,
        counters: &Counters,
    ) -> ReplayResult<()> {
        let conf = self.conf;
        let io = |what, e| ReplayError::io(what, conf.display(rel), e);
        match step {
            Step::Clear => {
                if conf.remove_all(rel).map_err(|e| io("clearing", e))? {
                    counters.cleared.fetch_add(1, Ordering::Relaxed);
                }
            }
            Step::Dir => {
                conf.create_dirs(rel)
                    .map_err(|e| io(CREATING_DIRECTORY, e))?;
                counters.dirs.fetch_add(1, Ordering::Relaxed);
            }
            Step::File => {
                let n = make_file(conf, rel, info.read_extent, &mut self.rng, &mut self.buf)?;
                counters.file_done(n > 0, n);
            }
        }
        Ok(())
    }
}

impl Counters {
    /// A file prepared: made with `written` bytes, or found already there.
    pub fn file_done(&self, created: bool, written: u64) {
        if created {
            self.written.fetch_add(written, Ordering::Relaxed);
            self.created.fetch_add(1, Ordering::Relaxed);
        } else {
            self.present.fetch_add(1, Ordering::Relaxed);
        }
        self.files.fetch_add(1, Ordering::Relaxed);
    }
}

/// Returns the bytes written (0 when the file was already there).
fn make_file(
    conf: &Confined,
    rel: &Path,
    size: u64,
    rng: &mut SmallRng,
    buf: &mut [u8],
) -> ReplayResult<u64> {
    let io = |what, e| ReplayError::io(what, conf.display(rel), e);
    let have = conf.file_size(rel).map_err(|e| io("checking", e))?;
    if have.is_some_and(|h| h >= size) {
        if let Ok(fd) = conf.open(rel, libc::O_RDONLY, 0) {
            let _ = rustix::fs::fadvise(&fd, 0, None, rustix::fs::Advice::DontNeed);
        }
        return Ok(0);
    }
    if let Some(parent) = rel.parent() {
        conf.create_dirs(parent)
            .map_err(|e| io("creating directory for", e))?;
    }
    let fd = conf
        .open(rel, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644)
        .map_err(|e| io("creating", e))?;
    let mut off = 0u64;
    let mut eng = Psync;
    while off < size {
        let n = ((size - off) as usize).min(buf.len());
        rng.fill_bytes(&mut buf[..n]);
        let w = eng
            .write_at(fd.as_raw_fd(), &buf[..n], off)
            .map_err(|e| io("writing", e))?;
        off += w as u64;
    }
    eng.sync(fd.as_raw_fd(), true)
        .map_err(|e| io("syncing", e))?;
    let _ = rustix::fs::fadvise(&fd, 0, None, rustix::fs::Advice::DontNeed);
    Ok(size)
}
