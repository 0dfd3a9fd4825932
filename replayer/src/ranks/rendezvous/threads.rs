//! Barriers between the rank threads of one process: a mutex, a condition
//! variable, and the set of ranks that arrived at each barrier.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use super::{missing_list, Gathered, Rendezvous};
use crate::error::{ReplayError, ReplayResult};
use crate::report::stats::RankResult;
use crate::report::summary::RendezvousInfo;

#[derive(Default)]
struct ThreadState {
    arrived: BTreeMap<u64, BTreeSet<u32>>,
    largest: BTreeMap<u64, i64>,
    aborted: Option<String>,
}

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

    fn gather(&self, local: Vec<RankResult>) -> ReplayResult<Gathered> {
        Ok(Gathered {
            results: Some(local),
            problem: None,
        })
    }

    fn info(&self) -> RendezvousInfo {
        RendezvousInfo {
            mechanism: "threads",
            dir: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

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
}
