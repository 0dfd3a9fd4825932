//! `process_starts` in `manifest.json`: when each traced process that made a
//! row began (its fork), and its parent. A process's first row says when it
//! first touched a file, not when it began: a DataLoader worker is forked,
//! imports and sets itself up before its first open, and a job's epoch counts
//! that time. The rows cannot hold it (a fork is no file call), so the
//! collector writes it beside them.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// One process's start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessStart {
    /// The node it ran on, as the rows' `host` names it. One node's own
    /// capture leaves it out (its manifest's `hosts` names the one node);
    /// a trace of several nodes (`merge`, `host=*` partitions) fills it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub pid: i32,
    /// The process that forked it.
    pub parent: i32,
    /// When it was forked (Unix ns, the rows' clock).
    pub forked_unix_ns: i64,
}

impl ProcessStart {
    /// Whether this start is of process `pid` on `host`.
    pub fn is_of(&self, host: &str, pid: i32) -> bool {
        self.pid == pid && self.host.as_deref().is_none_or(|h| h == host)
    }
}

/// The starts a manifest records (`starts`, of a trace of `hosts`), each
/// naming its host where the trace is one node's (so that several traces'
/// starts can be put together).
pub fn with_hosts<'a>(
    hosts: &'a [String],
    starts: &'a [ProcessStart],
) -> impl Iterator<Item = ProcessStart> + 'a {
    let only_host = match hosts {
        [h] => Some(h.clone()),
        _ => None,
    };
    starts.iter().map(move |s| ProcessStart {
        host: s.host.clone().or_else(|| only_host.clone()),
        ..s.clone()
    })
}

/// The starts of several traces (each its hosts and its starts), as one
/// trace made of their rows records them.
pub fn of_all<'a>(
    parts: impl IntoIterator<Item = (&'a [String], &'a [ProcessStart])>,
) -> Vec<ProcessStart> {
    let mut all: Vec<ProcessStart> = parts
        .into_iter()
        .flat_map(|(hosts, starts)| with_hosts(hosts, starts))
        .collect();
    all.sort_by(|a, b| (&a.host, a.pid, a.forked_unix_ns).cmp(&(&b.host, b.pid, b.forked_unix_ns)));
    all.dedup();
    all
}

/// The starts by pid, for finding many processes' forks: a whole capture
/// can hold a hundred thousand.
pub struct Forks(HashMap<i32, Vec<ProcessStart>>);

impl Forks {
    pub fn new(starts: &[ProcessStart]) -> Forks {
        let mut by_pid: HashMap<i32, Vec<ProcessStart>> = HashMap::new();
        for s in starts {
            by_pid.entry(s.pid).or_default().push(s.clone());
        }
        Forks(by_pid)
    }

    /// The fork of process `pid` on `host` that began the process whose
    /// first row is at `first_row_ns`: the latest fork of that pid at or
    /// before it (a pid can be reused in a long capture).
    pub fn before(&self, host: &str, pid: i32, first_row_ns: i64) -> Option<i64> {
        self.0
            .get(&pid)?
            .iter()
            .filter(|s| s.is_of(host, pid) && s.forked_unix_ns <= first_row_ns)
            .map(|s| s.forked_unix_ns)
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(host: Option<&str>, pid: i32, at: i64) -> ProcessStart {
        ProcessStart {
            host: host.map(str::to_string),
            pid,
            parent: 1,
            forked_unix_ns: at,
        }
    }

    #[test]
    fn a_nodes_own_starts_take_its_host_when_traces_are_put_together() {
        let (n1, n2) = (vec!["n1".to_string()], vec!["n2".to_string()]);
        let (a, b) = ([start(None, 10, 5)], [start(None, 10, 7)]);
        let all = of_all([(n1.as_slice(), a.as_slice()), (n2.as_slice(), b.as_slice())]);
        assert_eq!(
            all,
            vec![start(Some("n1"), 10, 5), start(Some("n2"), 10, 7)]
        );
        let forks = Forks::new(&all);
        assert_eq!(forks.before("n2", 10, 100), Some(7));
        assert_eq!(forks.before("n3", 10, 100), None);
        assert_eq!(forks.before("n1", 11, 100), None);
    }

    #[test]
    fn a_reused_pid_is_the_process_forked_last_before_its_first_row() {
        let forks = Forks::new(&[start(None, 10, 5), start(None, 10, 50)]);
        assert_eq!(forks.before("any", 10, 40), Some(5));
        assert_eq!(forks.before("any", 10, 60), Some(50));
        assert_eq!(forks.before("any", 10, 4), None);
    }
}
