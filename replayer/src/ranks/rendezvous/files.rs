//! Processes started by a launcher without MPI (torchrun, a bare srun) meet
//! through files in a rendezvous directory: `--rendezvous-dir`, a shared path
//! off the target, or `<target>/.iorepro-rendezvous/<job>` by default. All
//! paths are resolved through [`Confined`].
//!
//! Polling is O(N) per round, not O(N²): at barrier `s` every rank creates
//! one empty file `b<s>/r<rank>.<value>` (the value travels in its name);
//! rank 0 alone watches the arrivals, with one directory read per round, and
//! then writes the release `b<s>.go` holding the largest value; every other
//! rank polls that one file and the abort note. Results are gathered the
//! same way: each rank writes `reports/r<rank>.json`, rank 0 reads the
//! directory until all are there. The pause between rounds grows with the
//! world size, which keeps the directory's total metadata load about level
//! as ranks are added.
//!
//! Every wait has a timeout whose error names the ranks that never arrived.
//! A rank that fails leaves an abort note that stops the others at their
//! next wait. A rank killed outright leaves none; its announced identity lets
//! rank 0 (and the others, for rank 0) on the same node see it is gone at once.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::liveness::{pid_space, Identity};
use super::{missing_list, Gathered, Rendezvous};
use crate::error::{ReplayError, ReplayResult};
use crate::io::confine::Confined;
use crate::report::stats::RankResult;
use crate::report::summary::RendezvousInfo;

const ABORT_FILE: &str = "abort";
const REPORTS_DIR: &str = "reports";
/// How often a waiting rank checks that the ranks it waits for still live.
const LIVENESS_EVERY: Duration = Duration::from_millis(250);
const FIRST_PAUSE: Duration = Duration::from_micros(50);

/// The longest pause between polling rounds: 100 µs per rank, from 1 ms to
/// 50 ms. Every rank makes two metadata calls per round, so the directory
/// sees about 20,000 calls a second from 10 to 500 ranks, and the release of
/// a barrier reaches every rank within that pause.
fn pause_cap(world: u32) -> Duration {
    (Duration::from_micros(100) * world).clamp(Duration::from_millis(1), Duration::from_millis(50))
}

/// How a wait for all ranks ended when not every rank arrived.
enum WaitEnd {
    Aborted,
    TimedOut(Vec<u32>),
    /// Ranks whose process is gone, each with a description of it.
    Lost(Vec<(u32, String)>),
}

fn lost_list(lost: &[(u32, String)]) -> String {
    lost.iter()
        .map(|(r, who)| format!("rank {r} ({who})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One wait's clock: the growing pause, the timeout, the liveness checks.
struct Poll {
    start: Instant,
    pause: Duration,
    cap: Duration,
    last_liveness: Instant,
}

impl Poll {
    fn new(world: u32) -> Poll {
        let now = Instant::now();
        Poll {
            start: now,
            pause: FIRST_PAUSE,
            cap: pause_cap(world),
            last_liveness: now,
        }
    }

    fn liveness_due(&mut self) -> bool {
        let due = self.last_liveness.elapsed() >= LIVENESS_EVERY;
        if due {
            self.last_liveness = Instant::now();
        }
        due
    }

    fn sleep(&mut self) {
        std::thread::sleep(self.pause);
        self.pause = (self.pause * 2).min(self.cap);
    }
}

/// `r<rank>` or `r<rank>.<rest>` (temporary files start with a dot).
fn parse_entry(name: &str) -> Option<(u32, &str)> {
    let body = name.strip_prefix('r')?;
    let (rank, rest) = body.split_once('.').unwrap_or((body, ""));
    Some((rank.parse().ok()?, rest))
}

/// The rendezvous of one rank (one process) in a directory shared by all.
pub struct FileRendezvous {
    conf: Arc<Confined>,
    dir: PathBuf,
    rank: u32,
    world: u32,
    timeout: Duration,
    space: String,
    /// Announcements read so far (they never change).
    known: Mutex<HashMap<u32, Identity>>,
    /// Rank 0 holds every report: the directory goes when this is dropped.
    gathered_all: std::sync::atomic::AtomicBool,
}

impl FileRendezvous {
    pub fn new(
        conf: Arc<Confined>,
        dir: PathBuf,
        rank: u32,
        world: u32,
        timeout: Duration,
    ) -> ReplayResult<Self> {
        conf.create_dirs(&dir)
            .map_err(|e| ReplayError::io("creating rendezvous directory", conf.display(&dir), e))?;
        Ok(FileRendezvous {
            conf,
            dir,
            rank,
            world,
            timeout,
            space: pid_space(),
            known: Mutex::default(),
            gathered_all: Default::default(),
        })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn exists(&self, name: &str) -> bool {
        matches!(self.conf.file_size(&self.path(name)), Ok(Some(_)))
    }

    fn io_error(&self, what: &'static str, name: &str, e: std::io::Error) -> ReplayError {
        ReplayError::io(what, self.conf.display(&self.path(name)), e)
    }

    /// Writes `name` under a temporary name and renames it, so readers never
    /// see half a file.
    fn write_file(&self, name: &str, body: &[u8]) -> ReplayResult<()> {
        let fin = self.path(name);
        let tmp = match fin.parent() {
            Some(p) => p.join(format!(
                ".{}.tmp",
                fin.file_name().unwrap_or_default().display()
            )),
            None => PathBuf::from(format!(".{name}.tmp")),
        };
        let io = |e| self.io_error("writing rendezvous file", name, e);
        let fd = self
            .conf
            .open(&tmp, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644)
            .map_err(io)?;
        std::fs::File::from(fd).write_all(body).map_err(io)?;
        self.conf.rename(&tmp, &fin).map_err(io)
    }

    fn read_file(&self, name: &str) -> std::io::Result<String> {
        let fd = self.conf.open(&self.path(name), libc::O_RDONLY, 0)?;
        let mut s = String::new();
        std::fs::File::from(fd).read_to_string(&mut s)?;
        Ok(s)
    }

    fn abort_message(&self) -> Option<String> {
        self.exists(ABORT_FILE).then(|| {
            self.read_file(ABORT_FILE)
                .unwrap_or_else(|_| "a rank failed".into())
        })
    }

    /// Tells the other ranks which process this rank is, so that they can
    /// tell a rank that is slow from one that is dead.
    pub fn announce(&self) -> ReplayResult<()> {
        let me = Identity::of_process(std::process::id());
        self.write_file(&format!("alive.r{}", self.rank), me.to_text().as_bytes())
    }

    /// `Some(description)` if `rank` announced a process on this node that no
    /// longer runs.
    fn lost(&self, rank: u32) -> Option<String> {
        let mut known = self.known.lock().expect("rendezvous lock");
        let who = match known.entry(rank) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                // Not announced yet: nothing to check until it is.
                let text = self.read_file(&format!("alive.r{rank}")).ok()?;
                e.insert(Identity::parse(&text)?)
            }
        };
        who.lost(&self.space)
    }

    /// The ranks present in directory `sub` (entries `r<rank>[.<rest>]`),
    /// each with the rest of its name.
    fn present(&self, sub: &str) -> BTreeMap<u32, String> {
        self.conf
            .list_dir(&self.path(sub))
            .unwrap_or_default()
            .iter()
            .filter_map(|n| {
                let (r, rest) = parse_entry(n.to_str()?)?;
                (r < self.world).then(|| (r, rest.to_string()))
            })
            .collect()
    }

    /// Rank 0 reads directory `sub` until every rank not in `skip` is there,
    /// or the abort note (when `honour_abort`), or a rank is found dead, or
    /// the timeout.
    fn await_all(
        &self,
        sub: &str,
        honour_abort: bool,
        skip: &[u32],
    ) -> Result<BTreeMap<u32, String>, WaitEnd> {
        let mut poll = Poll::new(self.world);
        loop {
            let present = self.present(sub);
            let missing: Vec<u32> = (0..self.world)
                .filter(|r| !skip.contains(r) && !present.contains_key(r))
                .collect();
            if missing.is_empty() {
                return Ok(present);
            }
            if honour_abort && self.exists(ABORT_FILE) {
                return Err(WaitEnd::Aborted);
            }
            if poll.liveness_due() {
                let lost: Vec<(u32, String)> = missing
                    .iter()
                    .filter_map(|&r| self.lost(r).map(|who| (r, who)))
                    .collect();
                if !lost.is_empty() {
                    // Look again: a rank may have arrived just before it exited.
                    let present = self.present(sub);
                    let lost: Vec<_> = lost
                        .into_iter()
                        .filter(|(r, _)| !present.contains_key(r))
                        .collect();
                    if !lost.is_empty() {
                        return Err(WaitEnd::Lost(lost));
                    }
                }
            }
            if poll.start.elapsed() > self.timeout {
                return Err(WaitEnd::TimedOut(missing));
            }
            poll.sleep();
        }
    }

    /// Any other rank waits for rank 0's release of barrier `seq`.
    fn await_release(&self, seq: u64) -> Result<i64, WaitEnd> {
        let go = format!("b{seq}.go");
        let mut poll = Poll::new(self.world);
        loop {
            if let Ok(text) = self.read_file(&go) {
                if let Ok(v) = text.trim().parse() {
                    return Ok(v);
                }
            }
            if self.exists(ABORT_FILE) {
                return Err(WaitEnd::Aborted);
            }
            if poll.liveness_due() {
                if let Some(who) = self.lost(0) {
                    return Err(WaitEnd::Lost(vec![(0, who)]));
                }
            }
            if poll.start.elapsed() > self.timeout {
                // Only now, once: which ranks rank 0 is still waiting for.
                let present = self.present(&format!("b{seq}"));
                let missing: Vec<u32> = (0..self.world)
                    .filter(|r| !present.contains_key(r))
                    .collect();
                return Err(WaitEnd::TimedOut(missing));
            }
            poll.sleep();
        }
    }

    /// Waits until rank 0 has removed `name` (once it holds every report and
    /// has printed them), gives up when rank 0 is gone or at the timeout.
    fn await_taken(&self, name: &str) {
        let mut poll = Poll::new(self.world);
        while self.exists(name) && poll.start.elapsed() < self.timeout {
            if poll.liveness_due() && self.lost(0).is_some() {
                return;
            }
            poll.sleep();
        }
    }

    /// Rank 0 collects every rank's result; ranks that never published are
    /// named in the returned problem line, and what was gathered is still returned.
    fn collect_reports(&self) -> Gathered {
        // A dead rank will not report; the live ones still may.
        let mut gone: Vec<(u32, String)> = Vec::new();
        let waited = loop {
            let skip: Vec<u32> = gone.iter().map(|g| g.0).collect();
            match self.await_all(REPORTS_DIR, false, &skip) {
                Err(WaitEnd::Lost(lost)) => gone.extend(lost),
                other => break other,
            }
        };
        let mut results = Vec::new();
        let mut problems = Vec::new();
        for (r, _) in self.present(REPORTS_DIR) {
            let text = self
                .read_file(&format!("{REPORTS_DIR}/r{r}.json"))
                .map_err(|e| e.to_string());
            match text.and_then(|t| RankResult::from_json(&t)) {
                Ok(res) => results.push(res),
                Err(e) => problems.push(format!("the report of rank {r} is unreadable: {e}")),
            }
        }
        if !gone.is_empty() {
            problems.push(format!(
                "no report from {}: the process ended without one (killed?)",
                lost_list(&gone)
            ));
        }
        match waited {
            Ok(_) => self
                .gathered_all
                .store(true, std::sync::atomic::Ordering::Relaxed),
            Err(WaitEnd::TimedOut(missing)) => problems.push(format!(
                "gathering results timed out after {:?}: no report from ranks {}",
                self.timeout,
                missing_list(&missing)
            )),
            Err(WaitEnd::Lost(_) | WaitEnd::Aborted) => {}
        }
        Gathered {
            results: Some(results),
            problem: (!problems.is_empty()).then(|| problems.join("; ")),
        }
    }

    /// Removes the rendezvous directory once every rank has published (none
    /// is still polling it), and `.iorepro-rendezvous` on the target when
    /// no other job uses it.
    fn cleanup(&self) {
        let entries = self.conf.list_dir(&self.dir).unwrap_or_default();
        for name in entries {
            let rel = self.dir.join(&name);
            if self.conf.unlink(&rel).is_err() {
                for inner in self.conf.list_dir(&rel).unwrap_or_default() {
                    let _ = self.conf.unlink(&rel.join(inner));
                }
                let _ = self.conf.remove_dir(&rel);
            }
        }
        let _ = self.conf.remove_dir(&self.dir);
        if let Some(parent) = self.dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            let _ = self.conf.remove_dir(parent);
        }
    }
}

impl Drop for FileRendezvous {
    fn drop(&mut self) {
        if *self.gathered_all.get_mut() {
            self.cleanup();
        }
    }
}

impl Rendezvous for FileRendezvous {
    fn barrier_max(&self, rank: u32, seq: u64, what: &str, value: i64) -> ReplayResult<i64> {
        debug_assert_eq!(rank, self.rank);
        let sub = format!("b{seq}");
        let arrival = format!("{sub}/r{rank}.{value}");
        self.conf
            .create_dirs(&self.path(&sub))
            .map_err(|e| self.io_error("creating rendezvous directory", &sub, e))?;
        self.conf
            .open(&self.path(&arrival), libc::O_WRONLY | libc::O_CREAT, 0o644)
            .map_err(|e| self.io_error("writing rendezvous file", &arrival, e))?;
        let waited = if rank == 0 {
            self.await_all(&sub, true, &[]).and_then(|present| {
                let largest = present
                    .values()
                    .filter_map(|v| v.parse::<i64>().ok())
                    .fold(value, i64::max);
                self.write_file(&format!("{sub}.go"), largest.to_string().as_bytes())
                    .map_err(|e| {
                        // The others cannot be released: tell them why.
                        self.abort(rank, &format!("rank 0: {e}"));
                        WaitEnd::Aborted
                    })?;
                Ok(largest)
            })
        } else {
            self.await_release(seq)
        };
        match waited {
            Ok(v) => Ok(v),
            Err(WaitEnd::Aborted) => {
                Err(ReplayError::Aborted(self.abort_message().unwrap_or_default()))
            }
            Err(WaitEnd::Lost(lost)) => {
                let msg = format!(
                    "barrier `{what}`: {} will never arrive: the process ended (killed?)",
                    lost_list(&lost)
                );
                // Ranks on other nodes cannot see the process; the note tells them.
                self.abort(rank, &msg);
                Err(ReplayError::Rendezvous(msg))
            }
            Err(WaitEnd::TimedOut(missing)) => Err(ReplayError::Rendezvous(format!(
                "barrier `{what}` timed out after {:?} waiting for ranks {} (rendezvous directory {})",
                self.timeout,
                missing_list(&missing),
                self.conf.display(&self.dir).display()
            ))),
        }
    }

    fn abort(&self, _rank: u32, message: &str) {
        if !self.exists(ABORT_FILE) {
            let _ = self.write_file(ABORT_FILE, message.as_bytes());
        }
    }

    fn gather(&self, local: Vec<RankResult>) -> ReplayResult<Gathered> {
        self.conf
            .create_dirs(&self.path(REPORTS_DIR))
            .map_err(|e| self.io_error("creating rendezvous directory", REPORTS_DIR, e))?;
        for r in &local {
            self.write_file(
                &format!("{REPORTS_DIR}/r{}.json", r.rank),
                r.to_json().as_bytes(),
            )?;
        }
        if self.rank != 0 {
            if local.iter().any(|r| !r.errors.is_empty()) {
                // This process will exit non-zero, and a launcher such as
                // mpirun then ends the job: not before rank 0 has the report.
                self.await_taken(&format!("{REPORTS_DIR}/r{}.json", self.rank));
            }
            return Ok(Gathered {
                results: None,
                problem: None,
            });
        }
        Ok(self.collect_reports())
    }

    fn info(&self) -> RendezvousInfo {
        RendezvousInfo {
            mechanism: "files",
            dir: Some(self.conf.display(&self.dir)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(world: u32, timeout: Duration) -> (tempfile::TempDir, Vec<Arc<FileRendezvous>>) {
        let d = tempfile::tempdir().unwrap();
        let conf = Arc::new(Confined::open_root(d.path()).unwrap());
        let ranks = (0..world)
            .map(|r| {
                Arc::new(
                    FileRendezvous::new(conf.clone(), PathBuf::from("rdv/job"), r, world, timeout)
                        .unwrap(),
                )
            })
            .collect();
        (d, ranks)
    }

    #[test]
    fn barriers_release_every_rank_with_the_largest_value() {
        let (_d, ranks) = pair(3, Duration::from_secs(10));
        let handles: Vec<_> = ranks
            .iter()
            .zip([5_000i64, 7_000, 6_000])
            .map(|(r, v)| {
                let r = r.clone();
                std::thread::spawn(move || {
                    r.barrier(r.rank, 0, "start").unwrap();
                    r.barrier_max(r.rank, 1, "ckpt", v).unwrap()
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), 7_000);
        }
    }

    #[test]
    fn a_barrier_times_out_naming_the_missing_and_an_abort_stops_the_others() {
        let (_d, ranks) = pair(3, Duration::from_millis(60));
        let err = ranks[0]
            .barrier(0, 0, "checkpoint 1 start")
            .unwrap_err()
            .to_string();
        assert!(err.contains("ranks 1, 2"), "{err}");
        // A non-zero rank names the missing ranks too (rank 0 arrived above).
        let err = ranks[1].barrier(1, 0, "x").unwrap_err().to_string();
        assert!(err.contains("ranks 2"), "{err}");
        ranks[2].abort(2, "rank 2: disk full");
        let err = ranks[1].barrier(1, 1, "y").unwrap_err().to_string();
        assert!(err.contains("disk full"), "{err}");
        let err = ranks[0].barrier(0, 1, "y").unwrap_err().to_string();
        assert!(err.contains("disk full"), "{err}");
    }

    #[test]
    fn a_dead_rank_is_named_before_the_timeout() {
        let (_d, ranks) = pair(2, Duration::from_secs(60));
        ranks[0].announce().unwrap();
        // Rank 1 announced a process that has since exited.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = Identity::of_process(child.id());
        child.wait().unwrap();
        ranks[1]
            .write_file("alive.r1", dead.to_text().as_bytes())
            .unwrap();
        let t = Instant::now();
        let err = ranks[0].barrier(0, 0, "start").unwrap_err().to_string();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(err.contains(&format!("rank 1 (pid {}", dead.pid)), "{err}");
        // The others are told through the abort note.
        assert!(ranks[0]
            .abort_message()
            .unwrap()
            .contains("will never arrive"));
        let g = ranks[0].gather(vec![RankResult::default()]).unwrap();
        assert_eq!(g.results.unwrap().len(), 1);
        assert!(g.problem.unwrap().contains("no report from rank 1"));
    }

    #[test]
    fn results_are_gathered_on_rank_0_and_the_directory_removed() {
        let (d, ranks) = pair(2, Duration::from_secs(10));
        let one = ranks[1]
            .gather(vec![RankResult {
                rank: 1,
                ..Default::default()
            }])
            .unwrap();
        assert!(one.results.is_none());
        let all = ranks[0]
            .gather(vec![RankResult::default()])
            .unwrap()
            .results
            .unwrap();
        let mut got: Vec<u32> = all.iter().map(|r| r.rank).collect();
        got.sort();
        assert_eq!(got, vec![0, 1]);
        assert!(
            d.path().join("rdv/job").exists(),
            "kept until rank 0 is done"
        );
        drop(ranks);
        assert!(!d.path().join("rdv").exists(), "cleaned up");
    }

    #[test]
    fn entries_name_their_rank() {
        assert_eq!(parse_entry("r12.-5"), Some((12, "-5")));
        assert_eq!(parse_entry("r3"), Some((3, "")));
        assert_eq!(parse_entry(".r3.json.tmp"), None);
        assert_eq!(parse_entry("alive"), None);
    }
}
