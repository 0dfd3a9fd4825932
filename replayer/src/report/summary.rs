//! The replay report: merged from every rank's [`RankResult`], printed as a
//! table for people or as JSON (SPEC §5 keys) for scripts. Throughput is
//! bytes over the slowest rank's time; a phase's time is its slowest rank's.

use std::collections::{BTreeMap, BTreeSet};

use iorepro_format::Op;
use iorepro_telemetry::tally::KindFigures;
use serde::Serialize;

use crate::io::call_tally::OpStats;
use crate::io::engine::DirectIo;
use crate::io::prepare::PrepareStats;
use crate::plan::survey::Survey;
use crate::report::latency::{lat, Latency};
use crate::report::stats::{sum_known, RankResult};
use iorepro_analysis::phases::PhaseKind;

use iorepro_format::units::{per_s, GIB};

#[derive(Debug, Clone, Serialize)]
pub struct OpReport {
    pub count: u64,
    pub bytes: u64,
    /// Calls that failed (as the traced ones did, or not).
    pub failed: u64,
    /// Calls whose success or failure was not the traced call's.
    pub differed: u64,
    pub iops: f64,
    pub gib_s: f64,
    pub lat_us: Latency,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    pub kind: PhaseKind,
    pub duration_s: f64,
    pub trace_duration_s: f64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub gib_s: f64,
    /// What the ranks caused the storage to read and write in the phase,
    /// as the kernel counts it (see [`super::storage`]).
    pub storage_read_bytes: Option<u64>,
    pub storage_write_bytes: Option<u64>,
    pub ops: u64,
    pub slowest_rank: Option<u32>,
    /// False when `--phases` left this phase out.
    pub replayed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RankReport {
    pub rank: u32,
    pub source_rank: i32,
    pub node: u32,
    pub host: String,
    pub duration_s: f64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub gib_s: f64,
    pub stall_s: f64,
}

/// A figure's middle and worst value over a set of events.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub p50: f64,
    pub max: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Option<Spread> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Spread {
            p50: v[(v.len() - 1) / 2],
            max: v[v.len() - 1],
        })
    }
}

/// How the ranks met and what it cost them.
#[derive(Debug, Clone, Serialize)]
pub struct RendezvousReport {
    /// `threads`, `files` or `mpi`.
    pub mechanism: &'static str,
    /// The rendezvous directory (files only).
    pub dir: Option<std::path::PathBuf>,
    /// Barriers each rank met.
    pub barriers: usize,
    /// Seconds each rank spent waiting in barriers, over the ranks (this
    /// includes waiting for slower ranks, which is the replay's own imbalance).
    pub barrier_wait_s: Option<Spread>,
    /// From the last rank's arrival at a barrier until every rank had left
    /// it, in ms, over the barriers: the mechanism's own cost, plus the wait
    /// for a CPU when ranks outnumber cores.
    pub barrier_release_ms: Option<Spread>,
    /// The same for each barrier, in order (the first is the start of the run).
    pub release_each_ms: Vec<f64>,
    /// From the last rank handing its result over until rank 0 held them all.
    pub gather_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TraceTotals {
    pub events: u64,
    pub ranks: u32,
    pub duration_s: f64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub ranks: u32,
    pub nodes: u32,
    pub duration_s: f64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_gib_s: f64,
    pub write_gib_s: f64,
    /// How many of the bytes read the storage served, and how many it was
    /// sent, as the kernel counts them (see [`super::storage`]).
    pub storage: super::storage::StorageReport,
    /// How far I/O put the most delayed rank behind its schedule (0 with `afap`).
    pub stall_s: f64,
    /// Mean fraction of time a GPU would have been computing (`null` with `afap`).
    pub gpu_busy: Option<f64>,
    pub timing: String,
    pub engine: String,
    /// `off`, `reads` or `all`: which aligned data calls went O_DIRECT.
    pub direct: String,
    /// Each file read was dropped from the page cache at its close
    /// (`--evict-reads`).
    #[serde(default)]
    pub evict_reads: bool,
    pub ops: BTreeMap<String, OpReport>,
    /// Calls on the name space (open, stat, access, mkdir, rmdir, listings,
    /// unlink, rename, link, symlink; not close), over all ranks; not those
    /// that stood for a traced object request (a GET's open, a HEAD's stat).
    pub metadata_ops: u64,
    /// The same per second of the replay: the load a metadata server saw.
    pub metadata_ops_per_s: f64,
    /// Calls of any kind whose success or failure was not the traced call's.
    pub results_differed: u64,
    /// The first few of them in words (a few per rank, at most ten).
    pub result_differences: Vec<String>,
    pub phases: Vec<PhaseReport>,
    pub per_rank: Vec<RankReport>,
    pub trace: TraceTotals,
    pub prepare: Option<PrepareStats>,
    /// What the replay left out of the trace, by role and by reason.
    pub left_out: crate::plan::scope::LeftOut,
    pub rendezvous: RendezvousReport,
    /// Spread across ranks of the start of their first checkpoint write after
    /// the checkpoint barrier (compute time the trace puts before it taken
    /// out), in ms, over the checkpoint phases; `null` without any.
    pub checkpoint_skew_ms: Option<Spread>,
    pub tolerated_errors: u64,
    pub errors: Vec<String>,
    /// The traced copies (`sendfile`, `copy_file_range`, `splice`): made as
    /// the calls they were, or as their halves.
    pub copies: super::stats::CopyCounts,
    /// How many times the traced job read its dataset (each file's reads,
    /// on the whole), as the scaling model counts them; `null` without a dataset.
    pub epochs: Option<u32>,
    /// Per epoch and per checkpoint, as MLPerf Storage reports a run
    /// (see [`super::training`]).
    pub training: super::training::Training,
    /// The requests to an object-storage target (`null` for a directory).
    pub requests: Option<super::request_table::RequestsReport>,
    /// The answer in one look (see [`super::verdict`]); set once the
    /// report is built, from the plan too.
    pub verdict: Option<super::verdict::Verdict>,
    /// Every rank's latencies merged, per op kind (for formats that want
    /// more than the percentiles above).
    #[serde(skip)]
    pub latency_ns: BTreeMap<String, hdrhistogram::Histogram<u64>>,
    /// Every rank's reads per window, for the verdict's read burst.
    #[serde(skip)]
    pub read_timelines: Vec<super::burst::ReadTimeline>,
    /// The table shows the run's details too (`--explain`): how the ranks
    /// met.
    #[serde(skip)]
    pub explain: bool,
}

/// How the run was configured, for the report header.
pub struct RunInfo {
    pub ranks: u32,
    pub nodes: u32,
    pub timing: String,
    pub afap: bool,
    pub engine: String,
    pub direct: DirectIo,
    pub evict_reads: bool,
    /// The target is a bucket.
    pub bucket: bool,
    pub phase_selected: Vec<bool>,
    pub rendezvous: RendezvousInfo,
    /// When rank 0 held every result (Unix ns).
    pub gather_done_unix_ns: i64,
}

/// How the ranks met, in the report: `threads`, `files` (with its
/// directory) or `mpi` (each mechanism of [`crate::ranks::rendezvous`] says
/// which it is).
#[derive(Debug, Clone, Serialize)]
pub struct RendezvousInfo {
    pub mechanism: &'static str,
    pub dir: Option<std::path::PathBuf>,
}

fn rendezvous_report(info: &RunInfo, results: &[RankResult]) -> RendezvousReport {
    let barriers = results.iter().map(|r| r.barriers.len()).max().unwrap_or(0);
    let waits = results
        .iter()
        .map(|r| {
            r.barriers
                .iter()
                .map(|b| (b.leave_unix_ns - b.arrive_unix_ns).max(0) as f64 / 1e9)
                .sum()
        })
        .collect();
    let release: Vec<f64> = (0..barriers)
        .filter_map(|k| {
            let stamps: Vec<_> = results.iter().filter_map(|r| r.barriers.get(k)).collect();
            let last_arrival = stamps.iter().map(|b| b.arrive_unix_ns).max()?;
            let last_leave = stamps.iter().map(|b| b.leave_unix_ns).max()?;
            Some((last_leave - last_arrival).max(0) as f64 / 1e6)
        })
        .collect();
    let last_handed = results.iter().map(|r| r.gather_unix_ns).max().unwrap_or(0);
    RendezvousReport {
        mechanism: info.rendezvous.mechanism,
        dir: info.rendezvous.dir.clone(),
        barriers,
        barrier_wait_s: Spread::of(waits),
        barrier_release_ms: Spread::of(release.clone()),
        release_each_ms: release,
        gather_s: if last_handed > 0 {
            (info.gather_done_unix_ns - last_handed).max(0) as f64 / 1e9
        } else {
            0.0
        },
    }
}

/// Per checkpoint phase, the spread of the ranks' first writes.
fn checkpoint_skew(survey: &Survey, results: &[RankResult]) -> Option<Spread> {
    let spreads = survey
        .phases
        .iter()
        .enumerate()
        .filter(|(_, p)| p.kind == PhaseKind::Checkpoint)
        .filter_map(|(i, _)| {
            let starts: Vec<i64> = results
                .iter()
                .filter_map(|r| r.phases.get(i)?.first_write_unix_ns)
                .collect();
            let (lo, hi) = (starts.iter().min()?, starts.iter().max()?);
            (starts.len() >= 2).then(|| (hi - lo) as f64 / 1e6)
        })
        .collect();
    Spread::of(spreads)
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Each op kind's figures, merged over the ranks, over a replay of
/// `duration_s`.
fn op_reports(merged: &BTreeMap<String, OpStats>, duration_s: f64) -> BTreeMap<String, OpReport> {
    merged
        .iter()
        .map(|(k, s)| {
            let o = &s.figures;
            let r = OpReport {
                count: o.count,
                bytes: o.bytes,
                failed: s.failed,
                differed: s.differed,
                iops: per_s(o.count as f64, duration_s),
                gib_s: per_s(o.bytes as f64 / GIB, duration_s),
                lat_us: lat(&o.latency_ns),
            };
            (k.clone(), r)
        })
        .collect()
}

/// Each phase of the trace: its time (the slowest rank's) and bytes.
fn phase_reports(info: &RunInfo, survey: &Survey, results: &[RankResult]) -> Vec<PhaseReport> {
    survey
        .phases
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let of = |r: &RankResult| r.phases.get(i).cloned().unwrap_or_default();
            let slowest = results.iter().max_by_key(|r| of(r).duration_ns);
            let duration_s = slowest.map_or(0.0, |r| secs(of(r).duration_ns));
            let read_bytes: u64 = results.iter().map(|r| of(r).read_bytes).sum();
            let write_bytes: u64 = results.iter().map(|r| of(r).write_bytes).sum();
            PhaseReport {
                kind: p.kind,
                duration_s,
                trace_duration_s: secs((p.end_unix_ns - p.start_unix_ns).max(0) as u64),
                read_bytes,
                write_bytes,
                gib_s: per_s((read_bytes + write_bytes) as f64 / GIB, duration_s),
                storage_read_bytes: sum_known(results.iter().map(|r| of(r).storage_read_bytes)),
                storage_write_bytes: sum_known(results.iter().map(|r| of(r).storage_write_bytes)),
                ops: results.iter().map(|r| of(r).ops).sum(),
                slowest_rank: slowest.map(|r| r.rank),
                replayed: info.phase_selected.get(i).copied().unwrap_or(true),
            }
        })
        .collect()
}

/// Each rank's time, bytes and stall (none with `afap`).
fn rank_reports(afap: bool, results: &[RankResult]) -> Vec<RankReport> {
    results
        .iter()
        .map(|r| RankReport {
            rank: r.rank,
            source_rank: r.source_rank,
            node: r.node,
            host: r.host.clone(),
            duration_s: secs(r.elapsed_ns),
            read_bytes: r.read_bytes(),
            write_bytes: r.write_bytes(),
            gib_s: per_s(
                (r.read_bytes() + r.write_bytes()) as f64 / GIB,
                secs(r.elapsed_ns),
            ),
            stall_s: if afap { 0.0 } else { secs(r.stall_ns()) },
        })
        .collect()
}

/// Every error once, root causes first: a rank that stopped because
/// another failed says so, after the failure itself.
fn root_causes_first(results: &[RankResult], extra_errors: &[String]) -> Vec<String> {
    let mut all: Vec<&String> = results
        .iter()
        .flat_map(|r| &r.errors)
        .chain(extra_errors)
        .collect();
    all.sort_by_key(|e| e.contains("stopped because another rank failed"));
    let mut errors: Vec<String> = Vec::new();
    for e in all {
        if !errors.contains(e) {
            errors.push(e.clone());
        }
    }
    errors
}

/// Every rank's figures per op kind, merged: the report's tables and its
/// latency histograms both read from this one merge.
fn merge_ops(results: &[RankResult]) -> BTreeMap<String, OpStats> {
    let mut merged: BTreeMap<String, OpStats> = BTreeMap::new();
    for r in results {
        for (k, o) in &r.ops {
            merged.entry(k.clone()).or_default().merge(o);
        }
    }
    merged
}

/// Calls on the name space over all ranks. The opens, stats and listings a
/// request stood for are the store's requests, not calls on a file system's
/// name space, so they are taken out.
fn metadata_ops(merged: &BTreeMap<String, OpStats>, results: &[RankResult]) -> u64 {
    merged
        .iter()
        .filter(|(k, _)| Op::parse(k).is_metadata())
        .map(|(_, o)| o.figures.count)
        .sum::<u64>()
        .saturating_sub(results.iter().map(|r| r.request_metadata_calls).sum())
}

/// The mean fraction of its time each rank spent computing: what a GPU would
/// have been busy. Without a schedule (`afap`) there is no compute to count.
fn gpu_busy(afap: bool, results: &[RankResult]) -> Option<f64> {
    (!afap && !results.is_empty()).then(|| {
        let busy = |r: &RankResult| match r.elapsed_ns {
            0 => 0.0,
            t => r.compute_ns as f64 / t as f64,
        };
        results.iter().map(busy).sum::<f64>() / results.len() as f64
    })
}

/// The nodes the run was told of, or else the hosts the ranks ran on (one
/// at least: a run on this machine alone).
fn node_count(info: &RunInfo, results: &[RankResult]) -> u32 {
    if info.nodes != 0 {
        return info.nodes;
    }
    let hosts: BTreeSet<&str> = results.iter().map(|r| r.host.as_str()).collect();
    hosts.len().max(1) as u32
}

/// The trace's own totals, for the capture-over-replay comparison.
fn trace_totals(survey: &Survey) -> TraceTotals {
    TraceTotals {
        events: survey.events,
        ranks: survey.sources.len() as u32,
        duration_s: secs((survey.end_ns - survey.start_ns).max(0) as u64),
        read_bytes: survey.read_bytes,
        write_bytes: survey.write_bytes,
    }
}

impl Report {
    pub fn build(
        info: &RunInfo,
        survey: &Survey,
        results: &[RankResult],
        prepare: Option<PrepareStats>,
        extra_errors: Vec<String>,
    ) -> Report {
        let duration_s = results
            .iter()
            .map(|r| secs(r.elapsed_ns))
            .fold(0.0, f64::max);
        let merged = merge_ops(results);
        let ops = op_reports(&merged, duration_s);
        let metadata_ops = metadata_ops(&merged, results);
        let results_differed = merged.values().map(|o| o.differed).sum();
        let per_rank = rank_reports(info.afap, results);
        let read_bytes: u64 = results.iter().map(|r| r.read_bytes()).sum();
        let write_bytes: u64 = results.iter().map(|r| r.write_bytes()).sum();
        Report {
            ranks: info.ranks,
            nodes: node_count(info, results),
            duration_s,
            read_bytes,
            write_bytes,
            read_gib_s: per_s(read_bytes as f64 / GIB, duration_s),
            write_gib_s: per_s(write_bytes as f64 / GIB, duration_s),
            storage: super::storage::StorageReport::of(results, read_bytes, info.bucket),
            stall_s: per_rank.iter().map(|r| r.stall_s).fold(0.0, f64::max),
            gpu_busy: gpu_busy(info.afap, results),
            timing: info.timing.clone(),
            engine: info.engine.clone(),
            direct: info.direct.name().to_string(),
            evict_reads: info.evict_reads,
            ops,
            metadata_ops,
            metadata_ops_per_s: per_s(metadata_ops as f64, duration_s),
            results_differed,
            result_differences: results
                .iter()
                .flat_map(|r| r.differences.iter().cloned())
                .take(10)
                .collect(),
            phases: phase_reports(info, survey, results),
            per_rank,
            trace: trace_totals(survey),
            prepare,
            left_out: survey.left_out.clone(),
            rendezvous: rendezvous_report(info, results),
            checkpoint_skew_ms: checkpoint_skew(survey, results),
            epochs: None,
            training: super::training::Training::build(
                &survey.phases,
                &info.phase_selected,
                results,
                &survey.meetings,
                info.afap,
            ),
            requests: None,
            tolerated_errors: results.iter().map(|r| r.tolerated_errors).sum(),
            errors: root_causes_first(results, &extra_errors),
            copies: results.iter().fold(Default::default(), |mut all, r| {
                all.add(&r.copies);
                all
            }),
            latency_ns: merged
                .into_iter()
                .map(|(k, o)| (k, o.figures.latency_ns))
                .collect(),
            verdict: None,
            explain: false,
            read_timelines: results.iter().map(|r| r.read_timeline.clone()).collect(),
        }
    }
}
