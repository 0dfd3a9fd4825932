//! What the page cache spares the storage at N (`--cache`): the plan's
//! what-if times each epoch by the bytes that reach the storage, and the
//! traced node's cache is a property of that node, not of the job.
//!
//! - `none` (the default): no cache between the ranks and the storage;
//!   every read reaches it, as on nodes whose memory cannot hold their
//!   share of the data (MLPerf Storage's rule of a dataset five times
//!   the nodes' memory).
//! - `cold`: the caches start empty: the first epoch reads everything from
//!   the storage, later epochs take from it the share the traced job's did.
//! - `as-traced`: every epoch takes from the storage the share the traced
//!   job's did, the first included (a traced node that held the data
//!   before the job started).
//!
//! The shares come from the trace's `storage_bytes` (see
//! `iorepro_format::schema::COL_STORAGE_BYTES`), phase by phase; a trace
//! that does not say can be planned with `none` only.

use serde::Serialize;

use iorepro_analysis::phases::Phase;

use crate::error::{ReplayError, ReplayResult};

/// `--cache`: how much of the reads at N the page cache serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum CacheMode {
    /// Every read reaches the storage.
    #[default]
    None,
    /// The first epoch's reads all reach the storage, later epochs' as traced.
    Cold,
    /// Every epoch's reads reach the storage as the traced job's did.
    AsTraced,
}

impl CacheMode {
    /// A mode that needs the trace's word, on a trace without it, is a usage
    /// error that says why.
    pub fn check(self, phases: &[Phase]) -> ReplayResult<()> {
        if self == CacheMode::None || phases.iter().any(|p| p.storage_read_bytes.is_some()) {
            return Ok(());
        }
        Err(ReplayError::Usage(
            "--cache cold and as-traced take the traced job's share of reads from storage, and \
             this trace does not say it (captured without the page-cache hook, or by another \
             tool): plan with --cache none"
                .into(),
        ))
    }

    /// The bytes that reach the storage in each phase, of `read_at_n`
    /// read in it at N; `first_epoch` the phases of the first epoch.
    pub fn from_storage(
        self,
        phases: &[Phase],
        read_at_n: &[u64],
        first_epoch: Option<(usize, usize)>,
    ) -> Vec<u64> {
        read_at_n
            .iter()
            .enumerate()
            .map(|(i, &bytes)| {
                let cold = first_epoch.is_some_and(|(a, b)| (a..=b).contains(&i));
                match self {
                    CacheMode::None => bytes,
                    CacheMode::Cold if cold => bytes,
                    CacheMode::Cold | CacheMode::AsTraced => {
                        (bytes as f64 * traced_share(&phases[i])).round() as u64
                    }
                }
            })
            .collect()
    }

    /// The verdict's line on where the plan's reads come from.
    pub fn reads_from(self, phases: &[Phase]) -> String {
        let traced = traced_percent(phases).unwrap_or(100.0);
        match self {
            CacheMode::None => {
                "the plan takes every read to reach the storage (--cache none)".into()
            }
            CacheMode::Cold => format!(
                "the plan takes the first epoch's reads to reach the storage, later epochs' as \
                 traced (the traced job: {traced:.0} % from storage; --cache cold)"
            ),
            CacheMode::AsTraced => format!(
                "the plan takes each epoch's reads to reach the storage as traced ({traced:.0} % \
                 from storage; --cache as-traced)"
            ),
        }
    }
}

/// The share of the traced job's reads its storage served (percent), where
/// the trace says.
pub fn traced_percent(phases: &[Phase]) -> Option<f64> {
    let said: Vec<&Phase> = phases
        .iter()
        .filter(|p| p.storage_read_bytes.is_some())
        .collect();
    let read: u64 = said.iter().map(|p| p.read_bytes).sum();
    if said.is_empty() || read == 0 {
        return None;
    }
    let stored: u64 = said.iter().filter_map(|p| p.storage_read_bytes).sum();
    Some(100.0 * (stored as f64 / read as f64).min(1.0))
}

/// The share of a phase's reads the traced storage served: all of them
/// where the phase does not say or read nothing.
fn traced_share(p: &Phase) -> f64 {
    match p.storage_read_bytes {
        Some(b) if p.read_bytes > 0 => (b as f64 / p.read_bytes as f64).min(1.0),
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iorepro_analysis::phases::PhaseKind;

    fn phase(read: u64, stored: Option<u64>) -> Phase {
        Phase {
            kind: PhaseKind::Read,
            start_s: 0.0,
            end_s: 1.0,
            read_bytes: read,
            write_bytes: 0,
            max_writers: 0,
            metadata_calls: 0,
            storage_read_bytes: stored,
            start_unix_ns: 0,
            end_unix_ns: 0,
        }
    }

    #[test]
    fn each_mode_takes_its_share_of_the_reads_at_n() {
        // Two epochs: the first from storage, the second from memory.
        let phases = [phase(100, Some(100)), phase(100, Some(0))];
        let at_n = [400, 400];
        let first = Some((0, 0));
        assert_eq!(
            CacheMode::None.from_storage(&phases, &at_n, first),
            [400, 400]
        );
        assert_eq!(
            CacheMode::Cold.from_storage(&phases, &at_n, first),
            [400, 0]
        );
        // A node that held the data: even the first epoch from memory.
        let warm = [phase(100, Some(0)), phase(100, Some(0))];
        assert_eq!(
            CacheMode::AsTraced.from_storage(&warm, &at_n, first),
            [0, 0]
        );
        assert_eq!(CacheMode::Cold.from_storage(&warm, &at_n, first), [400, 0]);
    }

    #[test]
    fn a_trace_that_does_not_say_plans_with_none_only() {
        let blind = [phase(100, None)];
        assert!(CacheMode::None.check(&blind).is_ok());
        assert!(CacheMode::AsTraced.check(&blind).is_err());
        assert!(CacheMode::Cold.check(&[phase(100, Some(5))]).is_ok());
    }
}
