//! The traced processes: their rank, inherited from the parent at fork and
//! re-read from the environment at exec, and finding a running job's tree.

use iorepro_format::launchers;
use rustc_hash::FxHashMap;

#[derive(Default)]
pub struct ProcTable {
    ranks: FxHashMap<u32, Option<i32>>,
}

impl ProcTable {
    /// A process seen for the first time (root of the job, or found by a scan).
    pub fn adopt(&mut self, tgid: u32, inherited: Option<i32>) {
        let rank = rank_from_environ(tgid).or(inherited);
        self.ranks.insert(tgid, rank);
    }

    pub fn set_rank(&mut self, tgid: u32, rank: Option<i32>) {
        self.ranks.insert(tgid, rank);
    }

    pub fn on_fork(&mut self, child: u32, parent: u32) {
        let rank = self.rank(parent);
        self.ranks.insert(child, rank);
    }

    /// A new program may set its own rank; otherwise it keeps its parent's.
    pub fn on_exec(&mut self, tgid: u32) {
        if let Some(r) = rank_from_environ(tgid) {
            self.ranks.insert(tgid, Some(r));
        }
    }

    /// Whether the process has been seen (forked, adopted or looked up).
    pub fn knows(&self, tgid: u32) -> bool {
        self.ranks.contains_key(&tgid)
    }

    pub fn on_exit(&mut self, tgid: u32) {
        self.ranks.remove(&tgid);
    }

    /// The rank of a traced process; one not seen yet (a cgroup member) is
    /// looked up on first use.
    pub fn rank(&mut self, tgid: u32) -> Option<i32> {
        if let Some(r) = self.ranks.get(&tgid) {
            return *r;
        }
        let r = rank_from_environ(tgid)
            .or_else(|| parent_of(tgid).and_then(|p| self.ranks.get(&p).copied().flatten()));
        self.ranks.insert(tgid, r);
        r
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
    fn own_process_tree_is_found() {
        let me = std::process::id();
        assert!(alive(me));
        assert_eq!(descendants(me)[0], me);
        assert!(parent_of(me).is_some());
    }
}
