//! The replay report: merged from every rank's [`RankResult`], printed as a
//! table for people or as JSON (SPEC §5 keys) for scripts. Throughput is
//! bytes over the slowest rank's time; a phase's time is its slowest rank's.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;

use crate::prepare::PrepareStats;
use crate::stats::{OpStats, RankResult};
use crate::survey::Survey;
use iorepro_traces::analysis::phases::PhaseKind;

const GIB: f64 = (1u64 << 30) as f64;

#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct OpReport {
    pub count: u64,
    pub bytes: u64,
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
    /// How far I/O put the most delayed rank behind its schedule (0 with `afap`).
    pub stall_s: f64,
    /// Mean fraction of time a GPU would have been computing (`null` with `afap`).
    pub gpu_busy: Option<f64>,
    pub timing: String,
    pub engine: String,
    pub direct: bool,
    pub ops: BTreeMap<String, OpReport>,
    pub phases: Vec<PhaseReport>,
    pub per_rank: Vec<RankReport>,
    pub trace: TraceTotals,
    pub prepare: Option<PrepareStats>,
    pub tolerated_errors: u64,
    pub errors: Vec<String>,
}

/// How the run was configured, for the report header.
pub struct RunInfo {
    pub ranks: u32,
    pub nodes: u32,
    pub timing: String,
    pub afap: bool,
    pub engine: String,
    pub direct: bool,
    pub phase_selected: Vec<bool>,
}

fn lat(h: &hdrhistogram::Histogram<u64>) -> Latency {
    let us = |v: u64| v as f64 / 1e3;
    Latency {
        p50: us(h.value_at_quantile(0.5)),
        p90: us(h.value_at_quantile(0.9)),
        p99: us(h.value_at_quantile(0.99)),
        p999: us(h.value_at_quantile(0.999)),
        max: us(h.max()),
    }
}

fn per_s(x: f64, secs: f64) -> f64 {
    if secs > 0.0 {
        x / secs
    } else {
        0.0
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
        let secs = |ns: u64| ns as f64 / 1e9;
        let duration_s = results
            .iter()
            .map(|r| secs(r.elapsed_ns))
            .fold(0.0, f64::max);
        let mut merged: BTreeMap<String, OpStats> = BTreeMap::new();
        for r in results {
            for (k, o) in &r.ops {
                merged.entry(k.clone()).or_default().merge(o);
            }
        }
        let ops = merged
            .iter()
            .map(|(k, o)| {
                let r = OpReport {
                    count: o.count,
                    bytes: o.bytes,
                    iops: per_s(o.count as f64, duration_s),
                    gib_s: per_s(o.bytes as f64 / GIB, duration_s),
                    lat_us: lat(&o.latency_ns),
                };
                (k.clone(), r)
            })
            .collect();
        let phases = survey
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
                    ops: results.iter().map(|r| of(r).ops).sum(),
                    slowest_rank: slowest.map(|r| r.rank),
                    replayed: info.phase_selected.get(i).copied().unwrap_or(true),
                }
            })
            .collect();
        let per_rank: Vec<RankReport> = results
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
                stall_s: if info.afap { 0.0 } else { secs(r.stall_ns()) },
            })
            .collect();
        let read_bytes: u64 = results.iter().map(|r| r.read_bytes()).sum();
        let write_bytes: u64 = results.iter().map(|r| r.write_bytes()).sum();
        let gpu_busy = (!info.afap && !results.is_empty()).then(|| {
            results
                .iter()
                .map(|r| {
                    if r.elapsed_ns > 0 {
                        r.compute_ns as f64 / r.elapsed_ns as f64
                    } else {
                        0.0
                    }
                })
                .sum::<f64>()
                / results.len() as f64
        });
        let mut errors: Vec<String> = Vec::new();
        // Root causes first: a rank that stopped because another failed says so.
        let mut all: Vec<&String> = results
            .iter()
            .flat_map(|r| &r.errors)
            .chain(&extra_errors)
            .collect();
        all.sort_by_key(|e| e.contains("stopped because another rank failed"));
        for e in all {
            if !errors.contains(e) {
                errors.push(e.clone());
            }
        }
        let hosts: BTreeSet<&str> = results.iter().map(|r| r.host.as_str()).collect();
        Report {
            ranks: info.ranks,
            nodes: if info.nodes == 0 {
                hosts.len().max(1) as u32
            } else {
                info.nodes
            },
            duration_s,
            read_bytes,
            write_bytes,
            read_gib_s: per_s(read_bytes as f64 / GIB, duration_s),
            write_gib_s: per_s(write_bytes as f64 / GIB, duration_s),
            stall_s: per_rank.iter().map(|r| r.stall_s).fold(0.0, f64::max),
            gpu_busy,
            timing: info.timing.clone(),
            engine: info.engine.clone(),
            direct: info.direct,
            ops,
            phases,
            per_rank,
            trace: TraceTotals {
                events: survey.events,
                ranks: survey.sources.len() as u32,
                duration_s: secs((survey.end_ns - survey.start_ns).max(0) as u64),
                read_bytes: survey.read_bytes,
                write_bytes: survey.write_bytes,
            },
            prepare,
            tolerated_errors: results.iter().map(|r| r.tolerated_errors).sum(),
            errors,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serialises")
    }

    /// The human-readable report.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let gib = |b: u64| b as f64 / GIB;
        let _ = writeln!(
            s,
            "replay: {} ranks on {} node(s) from {} trace ranks, timing {}, engine {}{}",
            self.ranks,
            self.nodes,
            self.trace.ranks,
            self.timing,
            self.engine,
            if self.direct { ", O_DIRECT" } else { "" }
        );
        let _ = writeln!(
            s,
            "took {:.3} s (trace {:.3} s): read {:.3} GiB at {:.3} GiB/s, wrote {:.3} GiB at {:.3} GiB/s",
            self.duration_s,
            self.trace.duration_s,
            gib(self.read_bytes),
            self.read_gib_s,
            gib(self.write_bytes),
            self.write_gib_s
        );
        if let Some(busy) = self.gpu_busy {
            let _ = writeln!(
                s,
                "stall {:.3} s on the most delayed rank; GPUs busy {:.1} % of the time",
                self.stall_s,
                busy * 100.0
            );
        }
        if let Some(p) = &self.prepare {
            let _ = writeln!(
                s,
                "prepared {} file(s) ({:.3} GiB) in {:.2} s, {} already present",
                p.files_created,
                gib(p.bytes_written),
                p.duration_s,
                p.files_present
            );
        }
        let _ = writeln!(
            s,
            "\n{:<4} {:<11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
            "#", "phase", "time s", "trace s", "read GiB", "write GiB", "GiB/s", "slowest"
        );
        for (i, p) in self.phases.iter().enumerate() {
            if !p.replayed {
                let _ = writeln!(
                    s,
                    "{:<4} {:<11} {:>10} {:>10.3} (not replayed)",
                    i,
                    p.kind.as_str(),
                    "-",
                    p.trace_duration_s
                );
                continue;
            }
            let _ = writeln!(
                s,
                "{:<4} {:<11} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>8}",
                i,
                p.kind.as_str(),
                p.duration_s,
                p.trace_duration_s,
                gib(p.read_bytes),
                gib(p.write_bytes),
                p.gib_s,
                p.slowest_rank.map_or("-".into(), |r| r.to_string())
            );
        }
        let _ = writeln!(
            s,
            "\n{:<10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "op", "count", "IOPS", "GiB/s", "p50 us", "p90 us", "p99 us", "p99.9 us", "max us"
        );
        for (k, o) in &self.ops {
            let l = &o.lat_us;
            let _ = writeln!(
                s,
                "{:<10} {:>10} {:>10.0} {:>10.3} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                k, o.count, o.iops, o.gib_s, l.p50, l.p90, l.p99, l.p999, l.max
            );
        }
        let _ = writeln!(
            s,
            "\n{:<6} {:>6} {:>5} {:>10} {:>10} {:>10}",
            "rank", "source", "node", "time s", "GiB/s", "stall s"
        );
        const SHOWN: usize = 32;
        for r in self.per_rank.iter().take(SHOWN) {
            let _ = writeln!(
                s,
                "{:<6} {:>6} {:>5} {:>10.3} {:>10.3} {:>10.3}",
                r.rank, r.source_rank, r.node, r.duration_s, r.gib_s, r.stall_s
            );
        }
        if self.per_rank.len() > SHOWN {
            let mut v: Vec<f64> = self.per_rank.iter().map(|r| r.gib_s).collect();
            v.sort_by(f64::total_cmp);
            let _ = writeln!(
                s,
                "... {} more ranks; GiB/s per rank min {:.3} median {:.3} max {:.3}",
                self.per_rank.len() - SHOWN,
                v[0],
                v[v.len() / 2],
                v[v.len() - 1]
            );
        }
        if self.tolerated_errors > 0 {
            let _ = writeln!(s, "\n{} op(s) could not be replayed and were skipped (no descriptor or file to act on)", self.tolerated_errors);
        }
        for e in &self.errors {
            let _ = writeln!(s, "error: {e}");
        }
        s
    }
}
