//! The traced processes: their rank, inherited from the parent at fork and
//! re-read from the environment at exec, and finding a running job's tree.

use iorepro_format::launchers;
use rustc_hash::FxHashMap;

#[derive(Default)]
pub struct ProcTable {
    procs: FxHashMap<u32, Proc>,
    /// Starts of processes whose pid was since reused, that made rows.
    earlier_starts: Vec<Started>,
}

/// What the table keeps of a traced process.
#[derive(Clone, Copy, Default)]
struct Proc {
    rank: Option<i32>,
    /// Its fork, when the capture saw it.
    forked: Option<Started>,
    /// Whether it made a row: only those processes' starts are written.
    made_rows: bool,
}

/// A fork the capture saw: the parent, and when (the kernel's monotonic ns).
#[derive(Clone, Copy)]
pub struct Started {
    pub tgid: u32,
    pub parent: u32,
    pub at_ns: u64,
}

impl ProcTable {
    /// A process seen for the first time (root of the job, or found by a scan).
    pub fn adopt(&mut self, tgid: u32, inherited: Option<i32>) {
        let rank = rank_from_environ(tgid).or(inherited);
        self.procs.entry(tgid).or_default().rank = rank;
    }

    pub fn set_rank(&mut self, tgid: u32, rank: Option<i32>) {
        self.procs.entry(tgid).or_default().rank = rank;
    }

    /// A process forked at `at_ns`: it inherits its parent's rank.
    pub fn on_fork(&mut self, child: u32, parent: u32, at_ns: u64) {
        let rank = self.rank(parent);
        let made_rows = match self.procs.get(&child) {
            // The pid is reused: the process that had it is gone.
            Some(Proc {
                forked: Some(s),
                made_rows: true,
                ..
            }) => {
                self.earlier_starts.push(*s);
                false
            }
            // Rows decoded before their process's fork (or a reused pid of a
            // process found running): the rows may be this process's.
            Some(p) => p.forked.is_none() && p.made_rows,
            None => false,
        };
        let forked = Some(Started {
            tgid: child,
            parent,
            at_ns,
        });
        self.procs.insert(
            child,
            Proc {
                rank,
                forked,
                made_rows,
            },
        );
    }

    /// A new program may set its own rank; otherwise it keeps its parent's.
    pub fn on_exec(&mut self, tgid: u32) {
        if let Some(r) = rank_from_environ(tgid) {
            self.procs.entry(tgid).or_default().rank = Some(r);
        }
    }

    /// Whether the process has been seen (forked, adopted or looked up).
    pub fn knows(&self, tgid: u32) -> bool {
        self.procs.contains_key(&tgid)
    }

    /// The rank of a traced process; one not seen yet (a cgroup member) is
    /// looked up on first use.
    pub fn rank(&mut self, tgid: u32) -> Option<i32> {
        self.entry(tgid).rank
    }

    /// The rank of the process that made a row, noting that it made one.
    pub fn rank_of_row(&mut self, tgid: u32) -> Option<i32> {
        if let Some(p) = self.procs.get_mut(&tgid) {
            p.made_rows = true;
            return p.rank;
        }
        let p = self.entry(tgid);
        p.made_rows = true;
        p.rank
    }

    fn entry(&mut self, tgid: u32) -> &mut Proc {
        if !self.procs.contains_key(&tgid) {
            let rank = rank_from_environ(tgid)
                .or_else(|| parent_of(tgid).and_then(|p| self.procs.get(&p).and_then(|p| p.rank)));
            self.procs.insert(
                tgid,
                Proc {
                    rank,
                    ..Proc::default()
                },
            );
        }
        self.procs.get_mut(&tgid).expect("inserted above")
    }

    /// The forks seen of the processes that made rows, oldest first.
    pub fn starts(&self) -> Vec<Started> {
        let mut all: Vec<Started> = self
            .procs
            .values()
            .filter(|p| p.made_rows)
            .filter_map(|p| p.forked)
            .chain(self.earlier_starts.iter().copied())
            .collect();
        all.sort_by_key(|s| (s.at_ns, s.tgid));
        all
    }
}

/// Rank from `/proc/PID/environ`, the environment the program started with.
pub fn rank_from_environ(tgid: u32) -> Option<i32> {
    let env = std::fs::read(format!("/proc/{tgid}/environ")).ok()?;
    rank_from_env_block(&env)
}

pub fn rank_from_env_block(env: &[u8]) -> Option<i32> {
    let vars: Vec<(&[u8], &[u8])> = env
        .split(|&b| b == 0)
        .filter_map(|kv| {
            let eq = kv.iter().position(|&b| b == b'=')?;
            Some((&kv[..eq], &kv[eq + 1..]))
        })
        .collect();
    launchers::rank_from(|name| {
        let (_, v) = vars.iter().find(|(k, _)| *k == name.as_bytes())?;
        std::str::from_utf8(v).ok().map(str::to_string)
    })
}

/// Parent tgid from /proc/PID/stat (the field after the parenthesised comm).
pub fn parent_of(tgid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{tgid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `root` and all its living descendants, parents before children.
pub fn descendants(root: u32) -> Vec<u32> {
    let mut children: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(ppid) = parent_of(pid) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c);
        }
        i += 1;
    }
    out
}

/// Whether a process still exists (zombies count as gone).
pub fn alive(tgid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{tgid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_variables_of_the_launchers_table() {
        assert_eq!(
            rank_from_env_block(b"A=1\0SLURM_PROCID=7\0RANK=3\0"),
            Some(3)
        );
        // Slurm's rank is inherited by an mpirun inside the allocation.
        assert_eq!(
            rank_from_env_block(b"OMPI_COMM_WORLD_RANK=5\0SLURM_PROCID=0\0"),
            Some(5)
        );
        assert_eq!(rank_from_env_block(b"RANKS=1\0XRANK=2\0"), None);
        assert_eq!(rank_from_env_block(b"RANK=abc\0PMI_RANK=4\0"), Some(4));
    }

    #[test]
    fn only_the_starts_of_processes_that_made_rows_are_kept_a_reused_pid_included() {
        let mut t = ProcTable::default();
        t.set_rank(100, Some(3));
        t.on_fork(200, 100, 1_000);
        t.on_fork(201, 100, 2_000);
        assert_eq!(t.rank_of_row(200), Some(3));
        // 200 ends and its pid comes back for a process that makes no row.
        t.on_fork(200, 201, 3_000);
        let starts: Vec<(u32, u32, u64)> = t
            .starts()
            .iter()
            .map(|s| (s.tgid, s.parent, s.at_ns))
            .collect();
        assert_eq!(starts, vec![(200, 100, 1_000)]);
        assert_eq!(t.rank(200), Some(3));
    }

    #[test]
    fn own_process_tree_is_found() {
        let me = std::process::id();
        assert!(alive(me));
        assert_eq!(descendants(me)[0], me);
        assert!(parent_of(me).is_some());
    }
}
