//! The verdict: the answer a user came for, in at most ten lines, last on
//! the screen after every replay and every plan. At N ranks on M nodes:
//! does the storage keep the job fed (each epoch's time and AU against
//! MLPerf Storage's bar), how hard the reads hit it, what each save cost
//! the ranks, and what bandwidth the job at N needs. Every figure is in
//! `--json` under `verdict`; the scaling model behind them prints with
//! `--explain`.
//!
//! A replay's figures are its own measurements; a plan's come from the
//! scaling model (on storage of `--bandwidth`, or on storage that keeps up).

use std::fmt::Write as _;

use serde::Serialize;

use super::burst::ReadTimeline;
use super::storage::StorageReport;
use super::training::Training;
use crate::plan::scale::forecast::CheckpointPlan;
use crate::plan::scale::Forecast;
use iorepro_analysis::phases::PhaseKind;
use iorepro_format::units::{fmt_bytes, GIB};

/// The share of a run the saves may take for the write bandwidth the
/// verdict names.
pub const SAVE_SHARE_PERCENT: f64 = 5.0;

/// The share of the bytes read that memory served (the page cache), as the
/// kernel counts the storage's, past which the verdict says the replay's
/// read figures are the page cache's. The job at scale reads a dataset
/// larger than its nodes' memory, from cold caches: a replay that found a
/// fifth of its bytes in memory no longer timed the storage that job
/// meets. Below it, what memory serves (metadata, the overlap of
/// read-ahead, a small file read twice) is too little to turn an epoch's
/// verdict.
pub const CACHE_SERVED_WARN_PERCENT: f64 = 20.0;

/// Epochs and saves listed one by one; past them, a summary line.
const LISTED: usize = 4;

#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// `replay` (measured) or `plan` (modelled).
    pub of: &'static str,
    pub ranks: u32,
    pub nodes: u32,
    /// The target replayed into (`null` for a plan).
    pub target: Option<String>,
    /// The storage's bandwidth a plan assumed (GiB/s; `null`: fed).
    pub bandwidth_gib_s: Option<f64>,
    pub au_threshold_percent: f64,
    pub epochs: Vec<EpochVerdict>,
    pub read_burst: ReadBurst,
    /// Where the reads were served from, in words.
    pub reads_from: String,
    /// The share of the bytes read that memory served, not the storage,
    /// as the kernel counts the storage's (`null` for a plan, or where not
    /// counted).
    pub cache_served_percent: Option<f64>,
    pub saves: Vec<SaveVerdict>,
    /// Saves the trace holds, and those made at N.
    pub saves_traced: usize,
    pub saves_made: usize,
    /// The saves' share of the run (their time over the epochs' and
    /// theirs), in percent; `null` without saves or epochs.
    pub saves_share_percent: Option<f64>,
    /// The read bandwidth (GiB/s) at which every epoch's AU reaches the
    /// threshold, from the plan.
    pub read_gib_s_for_au: Option<f64>,
    /// The write bandwidth (GiB/s) at which the saves take at most
    /// [`SAVE_SHARE_PERCENT`] of the run; `null` where no bandwidth does
    /// (the saves' own work alone takes more) or there are no saves.
    pub write_gib_s_for_saves: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EpochVerdict {
    pub duration_s: f64,
    /// AU as MLPerf Storage computes it (`null` without compute: `afap`).
    pub au_percent: Option<f64>,
    pub pass: Option<bool>,
}

/// The read rate the storage was asked for.
#[derive(Debug, Clone, Serialize)]
pub struct ReadBurst {
    /// All ranks together, and the busiest rank, GiB/s.
    pub gib_s: f64,
    pub per_rank_gib_s: f64,
    /// The window the peak is over (s); `null` for a plan's mean demand
    /// over its read phases at the traced pace.
    pub window_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SaveVerdict {
    pub bytes: u64,
    pub duration_s: f64,
    pub gib_s: f64,
    /// How long the save held ranks from training, and whether all of
    /// them (they met at it) or only its writers.
    pub stall_s: f64,
    pub all_ranks: bool,
}

/// A save's cost apart from its bytes at the storage's rate (state
/// serialised, work between writes, copies into the page cache), and its
/// bytes: from the plan.
fn save_costs(forecast: &Forecast) -> (f64, u64) {
    saves_made(forecast).fold((0.0, 0), |(fixed, bytes), c| {
        let besides = c.besides.as_ref().map_or(0, |b| b.bytes);
        (
            fixed + c.before_first_write_s + c.between_writes_s + c.into_page_cache_s,
            bytes + c.bytes + besides,
        )
    })
}

/// The plan's saves the job at N makes: its checkpoint phases that write,
/// less those a step-bound job at N does not make. The verdict's saves and
/// the write bandwidth they need are counted over the same ones.
fn saves_made(forecast: &Forecast) -> impl Iterator<Item = &CheckpointPlan> {
    forecast.checkpoints.iter().filter(|c| {
        c.kind == PhaseKind::Checkpoint && c.bytes > 0 && !forecast.saves.dropped.contains(&c.phase)
    })
}

/// The write bandwidth (GiB/s) for saves of `fixed_s` and `bytes` to take
/// at most [`SAVE_SHARE_PERCENT`] of a run whose epochs take `epochs_s`.
fn write_need(fixed_s: f64, bytes: u64, epochs_s: f64) -> Option<f64> {
    let share = SAVE_SHARE_PERCENT / 100.0;
    let allowed_s = epochs_s * share / (1.0 - share) - fixed_s;
    (bytes > 0 && allowed_s > 0.0).then(|| bytes as f64 / allowed_s / GIB)
}

fn share(saves_s: f64, epochs_s: f64) -> Option<f64> {
    (saves_s > 0.0 && epochs_s > 0.0).then(|| 100.0 * saves_s / (saves_s + epochs_s))
}

fn epoch(duration_s: f64, au_percent: Option<f64>, threshold: f64) -> EpochVerdict {
    EpochVerdict {
        duration_s,
        au_percent,
        pass: au_percent.map(|a| a >= threshold),
    }
}

/// What a replay measured that its verdict reads.
pub struct Measured<'a> {
    pub ranks: u32,
    pub nodes: u32,
    pub training: &'a Training,
    /// `--direct`'s word (`off`, `reads`, `all`) and `--evict-reads`.
    pub direct: &'a str,
    pub evict_reads: bool,
    /// The target is a bucket: every read is a request to the store.
    pub bucket: bool,
    /// What the storage served, as the kernel counts it.
    pub storage: &'a StorageReport,
    pub read_timelines: &'a [ReadTimeline],
}

impl Verdict {
    /// A replay's: what it measured, with the plan's bandwidth needs.
    pub fn of_replay(report: &Measured, forecast: &Forecast, target: String) -> Verdict {
        let t = report.training;
        let threshold = forecast.au_threshold_percent;
        let epochs: Vec<EpochVerdict> = t
            .epochs
            .iter()
            .map(|e| epoch(e.duration_s, e.au_percent, threshold))
            .collect();
        let saves: Vec<SaveVerdict> = t
            .checkpoints
            .iter()
            .map(|c| SaveVerdict {
                bytes: c.write_bytes,
                duration_s: c.duration_s,
                gib_s: c.gib_s,
                stall_s: c.duration_s,
                all_ranks: c.met,
            })
            .collect();
        let epochs_s: f64 = epochs.iter().map(|e| e.duration_s).sum();
        let saves_s: f64 = saves.iter().map(|s| s.duration_s).sum();
        let (fixed_s, bytes) = save_costs(forecast);
        let all = ReadTimeline::sum(report.read_timelines.iter());
        let busiest = report
            .read_timelines
            .iter()
            .map(ReadTimeline::peak_bytes_s)
            .fold(0.0, f64::max);
        Verdict {
            of: "replay",
            ranks: report.ranks,
            nodes: report.nodes,
            target: Some(target),
            bandwidth_gib_s: None,
            au_threshold_percent: threshold,
            epochs,
            read_burst: ReadBurst {
                gib_s: all.peak_bytes_s() / GIB,
                per_rank_gib_s: busiest / GIB,
                window_s: (all.window_ns > 0).then(|| all.window_ns as f64 / 1e9),
            },
            reads_from: match report.bucket {
                true => "the object store (every read a request)".into(),
                false => reads_from(report, forecast.traced_storage_percent),
            },
            cache_served_percent: report.storage.cache_served_percent,
            saves_traced: forecast.saves.traced.len(),
            saves_made: saves.len(),
            saves_share_percent: share(saves_s, epochs_s),
            saves,
            read_gib_s_for_au: forecast.bandwidth_for_au_gib_s,
            write_gib_s_for_saves: write_need(fixed_s, bytes, epochs_s),
        }
    }

    /// A plan's: each epoch at `--bandwidth` (or fed), each save at the
    /// write bandwidth (or its traced time where none is given).
    pub fn of_plan(forecast: &Forecast, nodes: u32) -> Verdict {
        let threshold = forecast.au_threshold_percent;
        let epochs: Vec<EpochVerdict> = if forecast.epochs_at_bandwidth.is_empty() {
            forecast
                .epochs_fed_s
                .iter()
                .map(|&s| epoch(s, Some(100.0), threshold))
                .collect()
        } else {
            forecast
                .epochs_at_bandwidth
                .iter()
                .map(|e| epoch(e.seconds, Some(e.au_percent), threshold))
                .collect()
        };
        let saves: Vec<SaveVerdict> = saves_made(forecast)
            .map(|c| {
                let duration_s = c.seconds_at_bandwidth.unwrap_or(c.seconds_at_traced_rate);
                SaveVerdict {
                    bytes: c.bytes,
                    duration_s,
                    gib_s: if duration_s > 0.0 {
                        c.bytes as f64 / GIB / duration_s
                    } else {
                        0.0
                    },
                    stall_s: duration_s,
                    all_ranks: forecast.meetings.met_at(c.phase),
                }
            })
            .collect();
        let epochs_s: f64 = epochs.iter().map(|e| e.duration_s).sum();
        let saves_s: f64 = saves.iter().map(|s| s.duration_s).sum();
        let (fixed_s, bytes) = save_costs(forecast);
        Verdict {
            of: "plan",
            ranks: forecast.ranks,
            nodes,
            target: None,
            bandwidth_gib_s: forecast.bandwidth_gib_s,
            au_threshold_percent: threshold,
            epochs,
            read_burst: ReadBurst {
                gib_s: forecast.demand.read_gib_s,
                per_rank_gib_s: forecast.demand.per_rank_read_gib_s,
                window_s: None,
            },
            reads_from: forecast.reads_from.clone(),
            cache_served_percent: None,
            saves_traced: forecast.saves.traced.len(),
            saves_made: forecast.saves.traced.len() - forecast.saves.dropped.len(),
            saves_share_percent: share(saves_s, epochs_s),
            saves,
            read_gib_s_for_au: forecast.bandwidth_for_au_gib_s,
            write_gib_s_for_saves: write_need(fixed_s, bytes, epochs_s),
        }
    }

    /// The block for people: at most ten lines.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let on = match (&self.target, self.bandwidth_gib_s) {
            (Some(t), _) => format!("into {t}"),
            (None, Some(b)) => format!("planned on storage of {b:.3} GiB/s"),
            (None, None) => {
                "planned: reads on storage that keeps up, saves at the traced write rate".into()
            }
        };
        let _ = writeln!(
            s,
            "== verdict: {} rank(s) on {} node(s), {on}",
            self.ranks, self.nodes
        );
        s.push_str(&self.render_epochs());
        s.push_str(&self.render_reads());
        s.push_str(&self.render_saves());
        s.push_str(&self.render_needs());
        s
    }

    fn render_epochs(&self) -> String {
        let mut s = String::new();
        if self.epochs.is_empty() {
            let _ = writeln!(
                s,
                "   epochs: none (the trace reads no dataset between its saves)"
            );
            return s;
        }
        let bar = self.au_threshold_percent;
        let one = |i: usize, e: &EpochVerdict| match e.au_percent {
            Some(au) => format!(
                "{} {:.2} s AU {au:.1} % {}",
                i + 1,
                e.duration_s,
                if au >= bar { "pass" } else { "FAIL" }
            ),
            None => format!("{} {:.2} s", i + 1, e.duration_s),
        };
        let mut parts: Vec<String> = self
            .epochs
            .iter()
            .take(LISTED)
            .enumerate()
            .map(|(i, e)| one(i, e))
            .collect();
        if self.epochs.len() > LISTED {
            let rest = &self.epochs[LISTED..];
            let failed = rest.iter().filter(|e| e.pass == Some(false)).count();
            parts.push(format!("{} more, {failed} below the bar", rest.len()));
        }
        let au_note = if self.epochs.iter().any(|e| e.au_percent.is_some()) {
            format!(" (AU as MLPerf Storage computes it; the bar {bar:.0} %)")
        } else {
            " (no AU: --timing afap keeps no compute)".into()
        };
        let _ = writeln!(s, "   epochs: {}{au_note}", parts.join(" | "));
        s
    }

    fn render_reads(&self) -> String {
        let r = &self.read_burst;
        let how = match r.window_s {
            Some(w) => format!("peak over {:.0} ms", w * 1e3),
            None => "demand at the traced pace".into(),
        };
        format!(
            "   reads: {how} {:.3} GiB/s in all, {:.3} GiB/s per rank; from {}\n",
            r.gib_s, r.per_rank_gib_s, self.reads_from
        )
    }

    fn render_saves(&self) -> String {
        let mut s = String::new();
        if self.saves_traced == 0 && self.saves.is_empty() {
            let _ = writeln!(s, "   saves: none in the trace");
            return s;
        }
        let made = if self.saves_made < self.saves_traced {
            format!(
                "{} of the {} traced (--batch per-rank: a step-bound job saves R/N as often)",
                self.saves_made, self.saves_traced
            )
        } else {
            format!("all {} traced", self.saves_traced)
        };
        let share = self
            .saves_share_percent
            .map_or(String::new(), |p| format!("; {p:.1} % of the run in saves"));
        let _ = writeln!(s, "   saves: {made}{share}");
        for (i, v) in self.saves.iter().take(LISTED).enumerate() {
            let _ = writeln!(
                s,
                "     {}: {} in {:.2} s, {:.3} GiB/s; held {} {:.2} s",
                i + 1,
                fmt_bytes(v.bytes as f64),
                v.duration_s,
                v.gib_s,
                if v.all_ranks {
                    "every rank"
                } else {
                    "its writers"
                },
                v.stall_s
            );
        }
        if let Some(rest) = self.saves.get(LISTED..).filter(|r| !r.is_empty()) {
            let longest = rest.iter().map(|v| v.duration_s).fold(0.0, f64::max);
            let _ = writeln!(s, "     {} more, the longest {longest:.2} s", rest.len());
        }
        s
    }

    fn render_needs(&self) -> String {
        let read = match self.read_gib_s_for_au {
            Some(b) => format!(
                "reads {b:.3} GiB/s for AU >= {:.0} %",
                self.au_threshold_percent
            ),
            None => "reads: no epoch to size".into(),
        };
        let write = match (self.write_gib_s_for_saves, self.saves.is_empty()) {
            (_, true) => String::new(),
            (Some(w), false) => format!(
                "; writes {w:.3} GiB/s for saves <= {SAVE_SHARE_PERCENT:.0} % of the run"
            ),
            (None, false) => format!(
                "; no write bandwidth keeps saves <= {SAVE_SHARE_PERCENT:.0} % (their own work takes more)"
            ),
        };
        format!("   needed: {read}{write}\n")
    }
}

/// Where a replay's reads came from: as the kernel counted the storage's
/// bytes, or else as far as its options tell.
fn reads_from(m: &Measured, traced_storage_percent: Option<f64>) -> String {
    let (Some(fetched), Some(cached)) = (m.storage.read_bytes, m.storage.cache_served_percent)
    else {
        return reads_from_options(m.direct, m.evict_reads);
    };
    let fetched = fmt_bytes(fetched as f64);
    // The traced job's own share, where its trace says: a replay that
    // differs from it measures another storage load than the job's.
    let traced = traced_storage_percent.map(|t| (t, 100.0 - t));
    if cached > CACHE_SERVED_WARN_PERCENT {
        let job = match traced {
            Some((t, _)) if t > 100.0 - CACHE_SERVED_WARN_PERCENT => {
                format!(" where the traced job's came from the storage ({t:.0} %)")
            }
            _ => String::new(),
        };
        format!(
            "memory for {cached:.0} % of the bytes, the storage {fetched}{job}: the page \
             cache's result, not the storage's (--evict-reads or --direct=reads, or a dataset \
             larger than the node's memory, make it the storage's)"
        )
    } else {
        match traced {
            Some((t, from_memory)) if from_memory > CACHE_SERVED_WARN_PERCENT => format!(
                "the storage ({fetched} fetched; {cached:.0} % from memory), where the traced \
                 job's page cache served {from_memory:.0} % ({t:.0} % from storage): the replay \
                 asks the storage for more than the job did (--cache in the plan)"
            ),
            _ => format!("the storage ({fetched} fetched; {cached:.0} % from memory)"),
        }
    }
}

/// Where a replay's reads came from, as far as its options tell.
fn reads_from_options(direct: &str, evict_reads: bool) -> String {
    match (direct, evict_reads) {
        ("reads" | "all", _) => "the storage (O_DIRECT)".into(),
        (_, true) => "the storage (each file evicted after its reads)".into(),
        _ => "storage or page cache, not told apart (--evict-reads: the storage's)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_bandwidth_keeps_saves_to_their_share() {
        // 95 s of epochs allow 5 s of saves; 1 s of their own work leaves
        // 4 s for 4 GiB: 1 GiB/s.
        let need = write_need(1.0, 4 << 30, 95.0).unwrap();
        assert!((need - 1.0).abs() < 1e-9, "{need}");
        assert_eq!(write_need(6.0, 4 << 30, 95.0), None);
        assert_eq!(write_need(0.0, 0, 95.0), None);
        assert!((share(5.0, 95.0).unwrap() - 5.0).abs() < 1e-9);
    }
}
