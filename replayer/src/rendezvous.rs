//! Where ranks meet: barriers (run start, checkpoint start and end) and the
//! gathering of results. Threads of one process meet in memory; processes
//! started by a launcher meet through files in a directory on the target
//! (created and polled through [`Confined`]). Every wait has a timeout whose
//! error names the ranks that never arrived, and a rank that fails leaves an
//! abort note that stops the others at their next wait instead of letting
//! them hang. A rank killed outright leaves no note; each process announces
//! its pid, so a rank on the same node that waits for a dead one says so at
//! once rather than at the timeout (when the launcher does not end the run
//! itself, as mpirun does).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::confine::Confined;
use crate::error::{ReplayError, ReplayResult};
use crate::stats::RankResult;

pub trait Rendezvous: Send + Sync {
    /// Waits until every rank has reached barrier number `seq`; `what` names it in errors.
    fn barrier(&self, rank: u32, seq: u64, what: &str) -> ReplayResult<()> {
        self.barrier_max(rank, seq, what, 0).map(|_| ())
    }
    /// A barrier at which each rank brings a value (how far through the
    /// trace it is) and all leave with the largest: the trace time at which
    /// the last rank was ready.
    fn barrier_max(&self, rank: u32, seq: u64, what: &str, value: i64) -> ReplayResult<i64>;
    /// Tells every other rank to stop at its next wait.
    fn abort(&self, rank: u32, message: &str);
}

fn missing_list(missing: &[u32]) -> String {
    let shown: Vec<String> = missing.iter().take(16).map(|r| r.to_string()).collect();
    let more = missing.len().saturating_sub(16);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

#[derive(Default)]
struct ThreadState {
    arrived: BTreeMap<u64, BTreeSet<u32>>,
    largest: BTreeMap<u64, i64>,
    aborted: Option<String>,
}

/// Barriers between the rank threads of one process.
pub struct ThreadRendezvous {
    ranks: Vec<u32>,
    timeout: Duration,
    state: Mutex<ThreadState>,
    cv: Condvar,
}

impl ThreadRendezvous {
    pub fn new(ranks: Vec<u32>, timeout: Duration) -> Self {
        ThreadRendezvous {
            ranks,
            timeout,
            state: Mutex::default(),
            cv: Condvar::new(),
        }
    }
}

impl Rendezvous for ThreadRendezvous {
    fn barrier_max(&self, rank: u32, seq: u64, what: &str, value: i64) -> ReplayResult<i64> {
        let n = self.ranks.len();
        let mut st = self.state.lock().expect("rendezvous lock");
        st.arrived.entry(seq).or_default().insert(rank);
        let largest = st.largest.entry(seq).or_insert(value);
        *largest = (*largest).max(value);
        if st.arrived[&seq].len() >= n {
            self.cv.notify_all();
        }
        let (st, res) = self
            .cv
            .wait_timeout_while(st, self.timeout, |s| {
                s.aborted.is_none() && s.arrived[&seq].len() < n
            })
            .expect("rendezvous lock");
        if let Some(m) = &st.aborted {
            return Err(ReplayError::Aborted(m.clone()));
        }
        if res.timed_out() {
            let missing: Vec<u32> = self
                .ranks
                .iter()
                .copied()
                .filter(|r| !st.arrived[&seq].contains(r))
                .collect();
            return Err(ReplayError::Rendezvous(format!(
                "barrier `{what}` timed out after {:?} waiting for ranks {}",
                self.timeout,
                missing_list(&missing)
            )));
        }
        Ok(st.largest[&seq])
    }

    fn abort(&self, _rank: u32, message: &str) {
        let mut st = self.state.lock().expect("rendezvous lock");
        st.aborted.get_or_insert_with(|| message.to_string());
        self.cv.notify_all();
    }
}

/// Barriers and gathering between processes through files under
/// `<target>/.iorepro-rendezvous/<job>/`.
pub struct DirRendezvous {
    conf: Arc<Confined>,
    dir: PathBuf,
    world: u32,
    timeout: Duration,
}

const ABORT_FILE: &str = "abort";
/// How often a waiting rank checks that the ranks it waits for still live.
const LIVENESS_EVERY: Duration = Duration::from_millis(250);

/// How a wait for all ranks ended when not every rank arrived.
enum WaitEnd {
    Aborted,
    TimedOut(Vec<u32>),
    /// Ranks whose process is gone, each with a description of it.
    Lost(Vec<(u32, String)>),
}

/// A process's identity that survives pid reuse: host, pid and start time.
fn process_identity(pid: u32) -> Option<(u64, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command: state is the 1st, start time the 20th.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((start, state))
}

fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Where a pid means the same process: this boot of this machine and this
/// pid namespace (host names can repeat across containers and machines).
fn pid_space() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let ns = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    format!("{} {ns}", boot.trim())
}

fn lost_list(lost: &[(u32, String)]) -> String {
    lost.iter()
        .map(|(r, who)| format!("rank {r} ({who})"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl DirRendezvous {
    pub fn new(
        conf: Arc<Confined>,
        dir: PathBuf,
        world: u32,
        timeout: Duration,
    ) -> ReplayResult<Self> {
        conf.create_dirs(&dir)
            .map_err(|e| ReplayError::io("creating rendezvous directory", conf.display(&dir), e))?;
        Ok(DirRendezvous {
            conf,
            dir,
            world,
            timeout,
        })
    }

    fn exists(&self, name: &str) -> bool {
        matches!(self.conf.file_size(&self.dir.join(name)), Ok(Some(_)))
    }

    fn write_file(&self, name: &str, body: &[u8]) -> ReplayResult<()> {
        // Written under a temporary name and renamed, so readers never see half a file.
        let tmp = self.dir.join(format!("{name}.tmp"));
        let fin = self.dir.join(name);
        let io = |e| ReplayError::io("writing rendezvous file", self.conf.display(&fin), e);
        let fd = self
            .conf
            .open(&tmp, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644)
            .map_err(io)?;
        std::fs::File::from(fd).write_all(body).map_err(io)?;
        self.conf.rename(&tmp, &fin).map_err(io)
    }

    fn read_file(&self, name: &str) -> std::io::Result<String> {
        let fd = self.conf.open(&self.dir.join(name), libc::O_RDONLY, 0)?;
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
    pub fn announce(&self, rank: u32) -> ReplayResult<()> {
        let pid = std::process::id();
        let start = process_identity(pid).map_or(0, |(s, _)| s);
        self.write_file(
            &format!("alive.r{rank}"),
            format!("{}\n{pid}\n{start}\n{}\n", this_host(), pid_space()).as_bytes(),
        )
    }

    /// `Some(description)` if `rank` announced a process on this node that no
    /// longer runs (exited, killed, or a zombie waiting for its launcher).
    fn lost(&self, rank: u32, space: &str) -> Option<String> {
        let text = self.read_file(&format!("alive.r{rank}")).ok()?;
        let mut lines = text.lines();
        let (h, pid, start) = (lines.next()?, lines.next()?, lines.next()?);
        let (pid, start): (u32, u64) = (pid.parse().ok()?, start.parse().ok()?);
        if lines.next()? != space {
            return None; // another node or container: only the timeout can tell
        }
        match process_identity(pid) {
            Some((s, state)) if s == start && state != 'Z' && state != 'X' => None,
            _ => Some(format!("pid {pid} on {h}")),
        }
    }

    /// Polls until `name(r)` exists for every rank, or the abort note, or a
    /// rank is found dead, or the timeout.
    fn wait_all(
        &self,
        name: impl Fn(u32) -> String,
        honour_abort: bool,
        skip: &[u32],
    ) -> Result<(), WaitEnd> {
        let start = Instant::now();
        let space = pid_space();
        let mut missing: Vec<u32> = (0..self.world).filter(|r| !skip.contains(r)).collect();
        let mut pause = Duration::from_micros(500);
        let mut last_liveness = Instant::now();
        loop {
            missing.retain(|&r| !self.exists(&name(r)));
            if missing.is_empty() {
                return Ok(());
            }
            if honour_abort && self.exists(ABORT_FILE) {
                return Err(WaitEnd::Aborted);
            }
            if last_liveness.elapsed() >= LIVENESS_EVERY {
                last_liveness = Instant::now();
                let lost: Vec<(u32, String)> = missing
                    .iter()
                    .filter_map(|&r| self.lost(r, &space).map(|who| (r, who)))
                    .collect();
                // Look again: a rank may have arrived just before it exited.
                let lost: Vec<(u32, String)> = lost
                    .into_iter()
                    .filter(|(r, _)| !self.exists(&name(*r)))
                    .collect();
                if !lost.is_empty() {
                    return Err(WaitEnd::Lost(lost));
                }
            }
            if start.elapsed() > self.timeout {
                return Err(WaitEnd::TimedOut(missing));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    /// Publishes this rank's result (every rank, success or not).
    pub fn publish(&self, result: &RankResult) -> ReplayResult<()> {
        self.write_file(
            &format!("report.r{}.json", result.rank),
            result.to_json().as_bytes(),
        )
    }

    /// Rank 0 collects every rank's result; ranks that never published are
    /// named in the returned error line, and what was gathered is still returned.
    pub fn gather(&self) -> (Vec<RankResult>, Option<String>) {
        // A dead rank will not report; the live ones still may.
        let mut gone: Vec<(u32, String)> = Vec::new();
        let waited = loop {
            let skip: Vec<u32> = gone.iter().map(|g| g.0).collect();
            match self.wait_all(|r| format!("report.r{r}.json"), false, &skip) {
                Err(WaitEnd::Lost(lost)) => gone.extend(lost),
                other => break other,
            }
        };
        let mut results = Vec::new();
        let mut problems = Vec::new();
        for r in 0..self.world {
            let text = self
                .read_file(&format!("report.r{r}.json"))
                .map_err(|e| e.to_string());
            if let Ok(res) = text.and_then(|t| RankResult::from_json(&t)) {
                results.push(res);
            }
        }
        if !gone.is_empty() {
            problems.push(format!(
                "no report from {}: the process ended without one (killed?)",
                lost_list(&gone)
            ));
        }
        match waited {
            Ok(()) => self.cleanup(),
            Err(WaitEnd::TimedOut(missing)) => problems.push(format!(
                "gathering results timed out after {:?}: no report from ranks {}",
                self.timeout,
                missing_list(&missing)
            )),
            Err(WaitEnd::Lost(_) | WaitEnd::Aborted) => {}
        }
        (results, (!problems.is_empty()).then(|| problems.join("; ")))
    }

    /// Removes the rendezvous directory once every rank has published (so
    /// none is still polling it).
    fn cleanup(&self) {
        let Ok(dir) = self
            .conf
            .open(&self.dir, libc::O_RDONLY | libc::O_DIRECTORY, 0)
        else {
            return;
        };
        let listing = Path::new("/proc/self/fd").join(dir.as_raw_fd().to_string());
        if let Ok(entries) = std::fs::read_dir(&listing) {
            for e in entries.flatten() {
                let _ = self.conf.unlink(&self.dir.join(e.file_name()));
            }
        }
        if let Some(parent) = self.dir.parent() {
            if let (Ok(pfd), Some(name)) = (
                self.conf.open(parent, libc::O_PATH | libc::O_DIRECTORY, 0),
                self.dir.file_name(),
            ) {
                if let Ok(c) = std::ffi::CString::new(name.as_encoded_bytes()) {
                    // SAFETY: an open directory fd and a valid C string.
                    unsafe { libc::unlinkat(pfd.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) };
                }
            }
        }
    }
}

impl Rendezvous for DirRendezvous {
    fn barrier_max(&self, rank: u32, seq: u64, what: &str, value: i64) -> ReplayResult<i64> {
        self.write_file(&format!("b{seq}.r{rank}"), value.to_string().as_bytes())?;
        match self.wait_all(|r| format!("b{seq}.r{r}"), true, &[]) {
            Ok(()) => Ok((0..self.world)
                .filter_map(|r| self.read_file(&format!("b{seq}.r{r}")).ok()?.parse().ok())
                .fold(value, i64::max)),
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_barrier_times_out_naming_the_missing() {
        let r = ThreadRendezvous::new(vec![0, 1, 2], Duration::from_millis(50));
        let err = r.barrier(1, 0, "start").unwrap_err().to_string();
        assert!(err.contains("ranks 0, 2"), "{err}");
    }

    #[test]
    fn thread_barrier_hands_every_rank_the_largest_value() {
        let r = Arc::new(ThreadRendezvous::new(vec![0, 1, 2], Duration::from_secs(5)));
        let handles: Vec<_> = [(0u32, 30i64), (1, 90), (2, 60)]
            .into_iter()
            .map(|(rank, v)| {
                let r = r.clone();
                std::thread::spawn(move || r.barrier_max(rank, 0, "ckpt", v).unwrap())
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), 90);
        }
    }

    #[test]
    fn dir_barrier_releases_and_times_out() {
        let d = tempfile::tempdir().unwrap();
        let conf = Arc::new(Confined::open_root(d.path()).unwrap());
        let rdv = Arc::new(
            DirRendezvous::new(conf, PathBuf::from("rdv/job"), 2, Duration::from_secs(5)).unwrap(),
        );
        let other = rdv.clone();
        let t = std::thread::spawn(move || other.barrier(1, 0, "start"));
        rdv.barrier(0, 0, "start").unwrap();
        t.join().unwrap().unwrap();
        // Both leave a value barrier with the larger value.
        let other = rdv.clone();
        let t = std::thread::spawn(move || other.barrier_max(1, 1, "ckpt", 7_000));
        assert_eq!(rdv.barrier_max(0, 1, "ckpt", 5_000).unwrap(), 7_000);
        assert_eq!(t.join().unwrap().unwrap(), 7_000);
        let short = DirRendezvous::new(
            rdv.conf.clone(),
            PathBuf::from("rdv/job2"),
            3,
            Duration::from_millis(30),
        )
        .unwrap();
        let err = short
            .barrier(0, 0, "checkpoint 1 start")
            .unwrap_err()
            .to_string();
        assert!(err.contains("ranks 1, 2"), "{err}");
        short.abort(0, "rank 0: disk full");
        let err = short.barrier(1, 1, "x").unwrap_err().to_string();
        assert!(err.contains("disk full"), "{err}");
    }

    #[test]
    fn a_dead_rank_is_named_before_the_timeout() {
        let d = tempfile::tempdir().unwrap();
        let conf = Arc::new(Confined::open_root(d.path()).unwrap());
        let rdv =
            DirRendezvous::new(conf, PathBuf::from("rdv/job"), 2, Duration::from_secs(60)).unwrap();
        rdv.announce(0).unwrap();
        // Rank 1 announced a process that has since exited.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = process_identity(pid).map_or(0, |(s, _)| s);
        child.wait().unwrap();
        rdv.write_file(
            "alive.r1",
            format!("{}\n{pid}\n{start}\n{}\n", this_host(), pid_space()).as_bytes(),
        )
        .unwrap();
        let t = Instant::now();
        let err = rdv.barrier(0, 0, "start").unwrap_err().to_string();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(err.contains(&format!("rank 1 (pid {pid}")), "{err}");
        // The others are told through the abort note.
        assert!(rdv.abort_message().unwrap().contains("will never arrive"));
        rdv.publish(&RankResult::default()).unwrap();
        let (_, problem) = rdv.gather();
        assert!(problem.unwrap().contains("no report from rank 1"));
    }
}
