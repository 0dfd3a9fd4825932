//! What each rank measured: per-op counts, bytes and latency histograms
//! (the live tally both binaries share, with the replay's failures beside
//! them), per-phase time and bytes, and when it met the others. Workers keep their
//! own and the report merges them; across processes they travel as JSON with
//! each histogram in HdrHistogram's compressed V2 encoding (base64), which
//! other HdrHistogram tools read too and which re-records exactly.

use std::collections::BTreeMap;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use iorepro_telemetry::tally::{latency_histogram, OpFigures};
use serde::{Deserialize, Serialize};

use super::burst::ReadTimeline;
use crate::io::call_tally::OpStats;
use crate::io::objects::RequestStats;
use crate::io::task_io::StorageBytes;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PhaseStats {
    /// Time this rank spent in the phase (for checkpoints: from the barrier to its last op).
    pub duration_ns: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub ops: u64,
    /// Checkpoint phases: when (Unix ns) this rank issued its first write,
    /// less the compute time its schedule put between the barrier and that
    /// write, so that across ranks only the replay's own skew remains.
    #[serde(default)]
    pub first_write_unix_ns: Option<i64>,
    /// Compute time the schedule kept in the phase (0 with `afap`).
    #[serde(default)]
    pub compute_ns: u64,
    /// Time the phase would have taken at the traced storage's speed.
    #[serde(default)]
    pub ideal_ns: u64,
    /// Dataset files opened (samples, for a loader reading one a file).
    #[serde(default)]
    pub samples: u64,
    /// Bytes read from checkpoint files (a job loading its state).
    #[serde(default)]
    pub checkpoint_read_bytes: u64,
    /// What came before the rank's first sample in the phase.
    #[serde(default)]
    pub lead: Option<Lead>,
    /// The rank's first training step after its first sample in the phase,
    /// for AU as MLPerf Storage computes it ([`crate::report::au`]).
    #[serde(default)]
    pub first_step: Option<FirstStep>,
    /// Bytes the rank caused the storage to read in the phase (read-ahead
    /// included), and to write (as it dirtied pages), as the kernel counts
    /// them for its thread ([`crate::io::task_io`]); what the page cache
    /// served is not in them. `None` where the rank's thread's count does
    /// not hold them: on a bucket, on a kernel without per-task I/O
    /// accounting, and once the rank's calls go through io_uring.
    #[serde(default)]
    pub storage_read_bytes: Option<u64>,
    #[serde(default)]
    pub storage_write_bytes: Option<u64>,
}

/// A rank's first step in a phase: the end of its first step's compute
/// (a compute gap of at least half the traced step's, after the phase's
/// first sample), from the phase's start, and that compute.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct FirstStep {
    pub end_ns: u64,
    pub compute_ns: u64,
}

/// The stretch of a phase before a rank opened its first sample (dataset
/// file): in the trace's first phase, the job's start-up (interpreter,
/// imports, process group) before its loader's first read, which the job's
/// own first epoch does not count.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Lead {
    /// From the phase's start to the first sample's open; where a loader's
    /// worker opened it (a process the rank's main one started in the
    /// phase), to that worker's fork (or, where the trace has no fork, its
    /// first call): its start is the epoch's.
    pub duration_ns: u64,
    /// Compute the schedule kept in it (up to the first call of the worker
    /// that opened the sample: a worker starting is no compute of the job's).
    pub compute_ns: u64,
    /// What it would have taken at the traced storage's speed.
    pub ideal_ns: u64,
    /// The traced process that opened the sample made its first call in
    /// the phase: the stretch is a loader's workers starting (a DataLoader
    /// without persistent workers forks them each epoch), which the job's
    /// epoch counts. Otherwise, after a save, it is what the job did
    /// between its save and its next epoch's first batch.
    #[serde(default)]
    pub loader_started: bool,
    /// How long before the phase's start the epoch began: the loader's
    /// worker that opened the first sample was forked in the stretch
    /// before the phase (the idle start-up before a first epoch), and its
    /// start is the epoch's.
    #[serde(default)]
    pub before_ns: u64,
    /// The stretch ends at the fork of the loader's worker that opened the
    /// sample, which the trace records: in a later epoch too, what came
    /// before the fork (the job's logging, an evaluation after its save)
    /// is not the epoch's.
    #[serde(default)]
    pub to_fork: bool,
}

impl Lead {
    /// A whole phase before the epoch's first sample.
    pub fn whole(p: &PhaseStats) -> Lead {
        Lead {
            duration_ns: p.duration_ns,
            compute_ns: p.compute_ns,
            ideal_ns: p.ideal_ns,
            ..Lead::default()
        }
    }

    /// This stretch before the epoch followed by `next`'s (the next
    /// phase's lead). What of this stretch `next` says is the epoch's
    /// ([`Lead::before_ns`], at most all of it) comes off; it ran at the
    /// traced pace, so off its ideal time too, but not off its compute:
    /// a loader's worker starting is no compute of the job's.
    pub fn then(&self, next: &Lead) -> Lead {
        let back = next.before_ns.min(self.duration_ns);
        Lead {
            duration_ns: self.duration_ns - back + next.duration_ns,
            compute_ns: self.compute_ns + next.compute_ns,
            ideal_ns: self.ideal_ns.saturating_sub(back) + next.ideal_ns,
            loader_started: next.loader_started,
            before_ns: next.before_ns - back,
            to_fork: next.to_fork,
        }
    }
}

/// When a rank reached a barrier and when it left it (Unix ns).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct BarrierStamp {
    pub arrive_unix_ns: i64,
    pub leave_unix_ns: i64,
}

/// Now, in nanoseconds since the Unix epoch: comparable across the processes
/// of a node, and across nodes as far as their clocks agree.
pub fn unix_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// The calling thread's CPU time so far (user and system), in ns: what a
/// rank's own work has cost, whatever other threads of the process did.
pub fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec it is given.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0;
    if ok {
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    } else {
        0
    }
}

/// Everything one target rank reports.
#[derive(Debug, Clone, Default)]
pub struct RankResult {
    pub rank: u32,
    pub source_rank: i32,
    pub node: u32,
    pub host: String,
    pub elapsed_ns: u64,
    /// Time the rank would have taken had every op run as fast as in the trace.
    pub ideal_ns: u64,
    /// Compute time kept from the trace's gaps (0 with `afap`).
    pub compute_ns: u64,
    /// The rank's own CPU time over its replay (its thread's, user and
    /// system: the kernel's work on its calls and sockets included).
    pub cpu_ns: u64,
    pub ops: BTreeMap<String, OpStats>,
    pub phases: Vec<PhaseStats>,
    /// Ops that failed in a way the replay tolerates (an unlink of a file never made).
    pub tolerated_errors: u64,
    pub errors: Vec<String>,
    /// The first few calls whose outcome differed from the trace's, in words.
    pub differences: Vec<String>,
    /// Every barrier this rank met, in order.
    pub barriers: Vec<BarrierStamp>,
    /// When this rank handed its result over to be gathered (Unix ns).
    pub gather_unix_ns: i64,
    /// Its requests, on an object-storage target.
    pub requests: RequestStats,
    /// The traced copies (`sendfile`, `copy_file_range`, `splice`) it made.
    pub copies: CopyCounts,
    /// Name-space calls (opens, stats, listings, unlinks) that stood for a
    /// traced request (a GET's open, a HEAD's stat): counted among their
    /// ops, but no metadata load the job put on a file system.
    pub request_metadata_calls: u64,
    /// Bytes it read per 100 ms window, for the read burst.
    pub read_timeline: ReadTimeline,
    /// On the first rank of each process only: what the process caused the
    /// storage to read and write while its ranks ran.
    pub process_storage: Option<ProcessStorage>,
}

/// What one process caused the storage to read and write while its ranks
/// ran, as the kernel counts it for the whole process: every thread's,
/// io_uring's workers included, less the thread that fed the ranks the
/// trace. The replay's totals where the ranks' own counts miss what
/// io_uring's workers did for them.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct ProcessStorage {
    pub bytes: StorageBytes,
    /// The ranks the process ran: the counts stand for the run's where
    /// every rank's process gave one.
    pub ranks: u32,
}

/// The sum of figures that may be unknown: unknown if any is.
pub fn sum_known(figures: impl IntoIterator<Item = Option<u64>>) -> Option<u64> {
    figures.into_iter().sum()
}

/// How a rank made the copies the kernel made for the job: as the call
/// each was, or as its halves, a read and a write (see `crate::execute`'s
/// copies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyCounts {
    /// Copies made as the call they were (both halves).
    pub made: u64,
    /// Halves made on their own, as a read or a write: one end was a pipe
    /// or a socket, the halves went to two ranks, the target refused the
    /// call, or the target is a bucket.
    pub split: u64,
}

impl CopyCounts {
    pub fn is_empty(&self) -> bool {
        self.made == 0 && self.split == 0
    }

    pub fn add(&mut self, other: &CopyCounts) {
        self.made += other.made;
        self.split += other.split;
    }
}

impl RankResult {
    pub fn read_bytes(&self) -> u64 {
        self.ops.get("read").map_or(0, |o| o.figures.bytes)
    }
    pub fn write_bytes(&self) -> u64 {
        self.ops.get("write").map_or(0, |o| o.figures.bytes)
    }
    pub fn stall_ns(&self) -> u64 {
        self.elapsed_ns.saturating_sub(self.ideal_ns)
    }
}

#[derive(Serialize, Deserialize)]
struct WireOp {
    count: u64,
    bytes: u64,
    #[serde(default)]
    failed: u64,
    #[serde(default)]
    differed: u64,
    /// The latency histogram, V2-deflate encoded, in base64.
    latency_ns: String,
}

#[derive(Serialize, Deserialize)]
struct WireRank {
    rank: u32,
    source_rank: i32,
    node: u32,
    host: String,
    elapsed_ns: u64,
    ideal_ns: u64,
    compute_ns: u64,
    #[serde(default)]
    cpu_ns: u64,
    ops: BTreeMap<String, WireOp>,
    phases: Vec<PhaseStats>,
    tolerated_errors: u64,
    errors: Vec<String>,
    #[serde(default)]
    differences: Vec<String>,
    barriers: Vec<BarrierStamp>,
    gather_unix_ns: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    requests: Option<WireRequests>,
    #[serde(default, skip_serializing_if = "CopyCounts::is_empty")]
    copies: CopyCounts,
    #[serde(default, skip_serializing_if = "is_zero")]
    request_metadata_calls: u64,
    #[serde(default)]
    read_timeline: ReadTimeline,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    process_storage: Option<ProcessStorage>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl WireOp {
    fn of(o: &OpStats) -> Self {
        WireOp {
            count: o.figures.count,
            bytes: o.figures.bytes,
            failed: o.failed,
            differed: o.differed,
            latency_ns: encode_histogram(&o.figures.latency_ns),
        }
    }

    fn into_stats(self) -> Result<OpStats, String> {
        Ok(OpStats {
            figures: OpFigures {
                count: self.count,
                bytes: self.bytes,
                latency_ns: decode_histogram(&self.latency_ns)?,
            },
            failed: self.failed,
            differed: self.differed,
        })
    }
}

fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .expect("a histogram serialises into memory");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn decode_histogram(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("latency histogram: {e}"))?;
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("latency histogram: {e:?}"))?;
    // Re-recorded into the standard bounds, so every rank's histogram merges.
    let mut out = latency_histogram();
    for v in h.iter_recorded() {
        out.saturating_record_n(v.value_iterated_to().max(1), v.count_at_value());
    }
    Ok(out)
}

impl RankResult {
    pub fn to_json(&self) -> String {
        let ops = self
            .ops
            .iter()
            .map(|(k, o)| (k.clone(), WireOp::of(o)))
            .collect();
        let w = WireRank {
            rank: self.rank,
            source_rank: self.source_rank,
            node: self.node,
            host: self.host.clone(),
            elapsed_ns: self.elapsed_ns,
            ideal_ns: self.ideal_ns,
            compute_ns: self.compute_ns,
            cpu_ns: self.cpu_ns,
            ops,
            phases: self.phases.clone(),
            tolerated_errors: self.tolerated_errors,
            errors: self.errors.clone(),
            differences: self.differences.clone(),
            barriers: self.barriers.clone(),
            gather_unix_ns: self.gather_unix_ns,
            requests: (!self.requests.is_empty()).then(|| WireRequests::of(&self.requests)),
            copies: self.copies,
            request_metadata_calls: self.request_metadata_calls,
            read_timeline: self.read_timeline.clone(),
            process_storage: self.process_storage,
        };
        serde_json::to_string(&w).expect("rank result serialises")
    }

    pub fn from_json(text: &str) -> Result<Self, String> {
        let w: WireRank = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let ops = w
            .ops
            .into_iter()
            .map(|(k, o)| Ok((k, o.into_stats()?)))
            .collect::<Result<_, String>>()?;
        Ok(RankResult {
            rank: w.rank,
            source_rank: w.source_rank,
            node: w.node,
            host: w.host,
            elapsed_ns: w.elapsed_ns,
            ideal_ns: w.ideal_ns,
            compute_ns: w.compute_ns,
            cpu_ns: w.cpu_ns,
            ops,
            phases: w.phases,
            tolerated_errors: w.tolerated_errors,
            errors: w.errors,
            differences: w.differences,
            barriers: w.barriers,
            gather_unix_ns: w.gather_unix_ns,
            requests: match w.requests {
                Some(r) => r.into_stats()?,
                None => RequestStats::default(),
            },
            copies: w.copies,
            request_metadata_calls: w.request_metadata_calls,
            read_timeline: w.read_timeline,
            process_storage: w.process_storage,
        })
    }
}

/// [`RequestStats`] between processes.
#[derive(Serialize, Deserialize)]
pub(super) struct WireRequests {
    kinds: BTreeMap<String, WireOp>,
    first_byte_ns: String,
    retries: u64,
    throttles: u64,
    without_request: BTreeMap<String, u64>,
    #[serde(default)]
    max_in_flight: u64,
}

impl WireRequests {
    fn of(s: &RequestStats) -> Self {
        WireRequests {
            kinds: s
                .kinds
                .iter()
                .map(|(k, o)| (k.clone(), WireOp::of(o)))
                .collect(),
            first_byte_ns: encode_histogram(&s.first_byte_ns),
            retries: s.retries,
            throttles: s.throttles,
            without_request: s.without_request.clone(),
            max_in_flight: s.max_in_flight,
        }
    }

    fn into_stats(self) -> Result<RequestStats, String> {
        Ok(RequestStats {
            kinds: self
                .kinds
                .into_iter()
                .map(|(k, w)| Ok((k, w.into_stats()?)))
                .collect::<Result<_, String>>()?,
            first_byte_ns: decode_histogram(&self.first_byte_ns)?,
            retries: self.retries,
            throttles: self.throttles,
            without_request: self.without_request,
            max_in_flight: self.max_in_flight,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_survive_the_wire() {
        let mut r = RankResult {
            rank: 3,
            host: "h".into(),
            request_metadata_calls: 7,
            cpu_ns: 12_345,
            process_storage: Some(ProcessStorage {
                bytes: StorageBytes {
                    read_bytes: 4096,
                    write_bytes: 8192,
                },
                ranks: 2,
            }),
            ..Default::default()
        };
        let op = r.ops.entry("read".into()).or_default();
        for i in 1..1000u64 {
            op.record(4096, i * 1000);
        }
        let back = RankResult::from_json(&r.to_json()).unwrap();
        assert_eq!((back.request_metadata_calls, back.cpu_ns), (7, 12_345));
        let process = back.process_storage.unwrap();
        assert_eq!((process.bytes.write_bytes, process.ranks), (8192, 2));
        let (a, b) = (&r.ops["read"].figures, &back.ops["read"].figures);
        assert_eq!((a.count, a.bytes), (b.count, b.bytes));
        assert_eq!(a.latency_ns.len(), b.latency_ns.len());
        assert_eq!(
            a.latency_ns.value_at_quantile(0.99),
            b.latency_ns.value_at_quantile(0.99)
        );
        assert_eq!(a.latency_ns.max(), b.latency_ns.max());
        assert!(
            RankResult::from_json(&r.to_json().replace("latency_ns\":\"", "latency_ns\":\"!"))
                .is_err()
        );
    }
}
