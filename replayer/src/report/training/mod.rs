//! What the replay's own clock says about the training job it stands for,
//! in the figures MLPerf Storage gives for a run of its benchmark: per
//! epoch, the time, the compute the schedule kept, the stall and the
//! accelerator utilisation (AU: compute time over epoch time, averaged
//! over the ranks); per checkpoint, the time the ranks spent between
//! leaving their last step and starting the next one, and its bandwidth.
//!
//! An epoch here is a stretch of reading between two checkpoints (the
//! load burst before the first read phase included): one epoch each for a
//! job that saves at each epoch's end, the steps between two saves for a
//! job that saves every K steps. The first starts, on each rank, where the
//! rank opens its first sample: what comes before in the trace's first
//! phase is the job's start-up (interpreter, imports, process group), which
//! the job's own log does not count in its first epoch. A later one starts
//! there too, unless the process that opens that sample started in its
//! phase (a loader's workers, forked each epoch, which the job's epoch
//! counts): what a job does between a save and its next epoch's first
//! batch is in its log as neither. The AU is MLPerf Storage's
//! ([`crate::plan::scale::au`]: each rank's first step left out of both sides, the
//! first step ending with the rank's first step-sized compute after its
//! first sample); the whole epoch's compute over its time is
//! `au_whole_epoch_percent`.
//! Without compute in the schedule (`--timing afap`) there is no AU.

use serde::Serialize;

use iorepro_analysis::phases::{Phase, PhaseKind};
use iorepro_format::units::{per_s, GIB, MIB};

use super::stats::{sum_known, Lead, PhaseStats, RankResult};
use super::storage::cache_served_percent;
use crate::plan::meetings::Meetings;
use crate::plan::scale::what_if::stretches;

#[derive(Debug, Clone, Serialize)]
pub struct EpochFigures {
    /// The trace's phases it spans (first, last).
    pub phases: (usize, usize),
    /// The slowest rank's time for it.
    pub duration_s: f64,
    /// Compute a rank kept in it (the mean over ranks).
    pub compute_s: f64,
    /// Time beyond what the traced storage would have taken, the most
    /// delayed rank's.
    pub stall_s: f64,
    /// AU as MLPerf Storage computes it (see [`super::au`]): per rank the
    /// compute of steps 2..n over the epoch's time less the first step's,
    /// averaged over the ranks, in percent (`null` with `afap`). A rank
    /// whose first step the replay could not tell (a trace without steps)
    /// gives its whole epoch's figure.
    pub au_percent: Option<f64>,
    /// Compute over the whole epoch's time, the first step counted,
    /// averaged over the ranks, in percent.
    pub au_whole_epoch_percent: Option<f64>,
    /// Dataset files opened by all ranks, and per second of the epoch.
    pub samples: u64,
    pub samples_per_s: f64,
    pub read_bytes: u64,
    pub read_mib_s: f64,
    /// What of them the ranks had fetched from the storage, as the kernel
    /// counts it (read-ahead included); `null` where it was not counted
    /// per rank (see [`super::storage`]).
    pub storage_read_bytes: Option<u64>,
    /// The share of the epoch's read bytes not fetched from the storage:
    /// served from memory (the page cache), in percent.
    pub cache_served_percent: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckpointFigures {
    pub phase: usize,
    /// The slowest writer's time in the save. Where the ranks met (see
    /// [`crate::plan::meetings`]), from the barrier before the save to the
    /// barrier after it: how long the save held every rank from training;
    /// elsewhere how long it held the writers while the others read on.
    pub duration_s: f64,
    /// Whether the ranks met at the save.
    pub met: bool,
    pub write_bytes: u64,
    pub gib_s: f64,
    /// Bytes the ranks' writes in the save will send to the storage, as
    /// the kernel counts them (each page as it was dirtied, or O_DIRECT's
    /// as they went); `null` where not counted per rank.
    pub storage_write_bytes: Option<u64>,
}

/// A phase that reads a checkpoint back (a job resuming): the phase's
/// time, the slowest rank's, and what it read of checkpoint files.
#[derive(Debug, Clone, Serialize)]
pub struct LoadFigures {
    pub phase: usize,
    pub duration_s: f64,
    pub read_bytes: u64,
    pub gib_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Training {
    /// From the first epoch's start to the last save's end (the last
    /// epoch's, without saves after it), the slowest rank's: the time a
    /// run of the job takes less its start-up and what follows its last
    /// save, which is what a job's log of epochs and saves spans. `null`
    /// without epochs.
    pub span_s: Option<f64>,
    pub epochs: Vec<EpochFigures>,
    pub au_mean_percent: Option<f64>,
    pub au_stdev_percent: Option<f64>,
    pub checkpoints: Vec<CheckpointFigures>,
    /// Phases in which checkpoint files give most of the bytes read.
    pub loads: Vec<LoadFigures>,
}

/// The mean and (population) standard deviation of `v`.
pub fn mean_stdev(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
    (mean, var.sqrt())
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A rank's figure `f` summed over phases `a..=b`.
fn sum(r: &RankResult, (a, b): (usize, usize), f: &dyn Fn(&PhaseStats) -> u64) -> u64 {
    r.phases
        .get(a..=b)
        .map_or(0, |p| p.iter().map(f).sum::<u64>())
}

/// What rank `r` did in `span` before its first sample that is not the
/// epoch's: in the first epoch, the job's start-up; in a later one, what
/// the job did between its save and its next epoch's first batch, unless
/// that was its loader's workers starting (see [`Lead::loader_started`]):
/// then what came before their fork where the trace records it
/// ([`Lead::to_fork`]), else nothing.
/// That is the lead of the span's first phase with a sample, and every
/// phase before it in the span (a start-up can be a phase of its own).
fn lead_before_epoch(r: &RankResult, span: (usize, usize), first: bool) -> Lead {
    let mut before = Lead::default();
    for p in r.phases.get(span.0..=span.1).unwrap_or_default() {
        match p.lead {
            Some(l) if first || !l.loader_started || l.to_fork => return before.then(&l),
            Some(_) => return Lead::default(),
            None if p.samples > 0 => return Lead::default(),
            None => before = before.then(&Lead::whole(p)),
        }
    }
    // No sample in the span: nothing in it is before an epoch's.
    Lead::default()
}

/// What of the phase before `span` is the first epoch's: where the loader's
/// worker that opened its first sample was forked before the span's first
/// phase (in the idle start-up before it), the time from the fork on, at
/// most that phase's ([`Lead::before_ns`] left over by `lead`).
fn before_span(r: &RankResult, span: (usize, usize), first: bool, lead: &Lead) -> u64 {
    match span.0.checked_sub(1).and_then(|i| r.phases.get(i)) {
        Some(p) if first => lead.before_ns.min(p.duration_ns),
        _ => 0,
    }
}

/// A rank's time in an epoch.
#[derive(Debug, Clone, Copy)]
struct EpochTimes {
    duration_ns: u64,
    compute_ns: u64,
    /// At the traced storage's pace.
    ideal_ns: u64,
    /// Its first step: from the epoch's start to the end of the step's
    /// compute, and that compute (`None` where no step was told).
    first_step: Option<(u64, u64)>,
}

impl EpochTimes {
    /// AU over the whole epoch, as a fraction: at most 1 (the compute a
    /// schedule planned can end a moment past the epoch's measured end).
    fn whole(&self) -> f64 {
        match self.duration_ns {
            0 => 0.0,
            d => (self.compute_ns as f64 / d as f64).min(1.0),
        }
    }

    /// AU as MLPerf Storage computes it, as a fraction: the first step
    /// out of both sides; the whole epoch's where no step was told.
    fn mlperf(&self) -> f64 {
        match self.first_step {
            Some((end, compute)) if end < self.duration_ns && compute < self.compute_ns => {
                (crate::plan::scale::au::from_totals(
                    secs(self.duration_ns),
                    secs(end),
                    secs(self.compute_ns - compute),
                ) / 100.0)
                    .min(1.0)
            }
            _ => self.whole(),
        }
    }
}

/// Where rank `r`'s first step in `span` ended, from the span's start, and
/// its compute: the first phase of the span that recorded one.
fn first_step_in(r: &RankResult, span: (usize, usize)) -> Option<(u64, u64)> {
    let mut before = 0u64;
    for p in r.phases.get(span.0..=span.1).unwrap_or_default() {
        if let Some(f) = p.first_step {
            return Some((before + f.end_ns, f.compute_ns));
        }
        before += p.duration_ns;
    }
    None
}

/// Rank `r`'s times in the epoch over the phases `span`: the phases' sums,
/// less what it did before the epoch's first sample ([`lead_before_epoch`]),
/// plus what of the phase before is the epoch's ([`before_span`]), which ran
/// at the traced pace and is no compute of the job's.
fn epoch_times(r: &RankResult, span: (usize, usize), first: bool) -> EpochTimes {
    let lead = lead_before_epoch(r, span, first);
    let back = before_span(r, span, first, &lead);
    let first_step = first_step_in(r, span).and_then(|(end, compute)| {
        // From the span's start to the epoch's: the lead off, the part of
        // the phase before that is the epoch's on.
        (end + back)
            .checked_sub(lead.duration_ns)
            .map(|from_epoch| (from_epoch, compute))
    });
    EpochTimes {
        duration_ns: (sum(r, span, &|p| p.duration_ns) + back).saturating_sub(lead.duration_ns),
        compute_ns: sum(r, span, &|p| p.compute_ns).saturating_sub(lead.compute_ns),
        ideal_ns: (sum(r, span, &|p| p.ideal_ns) + back).saturating_sub(lead.ideal_ns),
        first_step,
    }
}

/// One epoch (the stretch of phases `span`; `first`: the first epoch) over
/// the ranks: its time (the slowest rank's), compute, stall, AU and rates.
fn epoch(span: (usize, usize), first: bool, results: &[RankResult], afap: bool) -> EpochFigures {
    let times: Vec<EpochTimes> = results
        .iter()
        .map(|r| epoch_times(r, span, first))
        .collect();
    let duration_s = times
        .iter()
        .map(|t| secs(t.duration_ns))
        .fold(0.0, f64::max);
    let compute: Vec<f64> = times.iter().map(|t| secs(t.compute_ns)).collect();
    // A rank with no steps in the stretch (its share read before it, as a
    // rank that does not wait for another's save does) has no AU there.
    let stepping: Vec<&EpochTimes> = times.iter().filter(|t| t.compute_ns > 0).collect();
    let mean_au = |f: &dyn Fn(&EpochTimes) -> f64| {
        (!afap && !stepping.is_empty())
            .then(|| 100.0 * stepping.iter().map(|t| f(t)).sum::<f64>() / stepping.len() as f64)
    };
    let au = mean_au(&EpochTimes::mlperf);
    let au_whole = mean_au(&EpochTimes::whole);
    let stall_s = times
        .iter()
        .map(|t| secs(t.duration_ns.saturating_sub(t.ideal_ns)))
        .fold(0.0, f64::max);
    let samples: u64 = results.iter().map(|r| sum(r, span, &|p| p.samples)).sum();
    let read_bytes: u64 = results
        .iter()
        .map(|r| sum(r, span, &|p| p.read_bytes))
        .sum();
    let storage_read_bytes = sum_known(
        results
            .iter()
            .flat_map(|r| r.phases.get(span.0..=span.1).unwrap_or_default())
            .map(|p| p.storage_read_bytes),
    );
    let per_s = |x: f64| per_s(x, duration_s);
    EpochFigures {
        phases: span,
        duration_s,
        compute_s: mean_stdev(&compute).0,
        stall_s: if afap { 0.0 } else { stall_s },
        au_percent: au,
        au_whole_epoch_percent: au_whole,
        samples,
        samples_per_s: per_s(samples as f64),
        read_bytes,
        read_mib_s: per_s(read_bytes as f64 / MIB),
        storage_read_bytes,
        cache_served_percent: storage_read_bytes.and_then(|s| cache_served_percent(read_bytes, s)),
    }
}

/// Each checkpoint phase replayed that wrote: its time (the slowest
/// rank's) and rate.
fn checkpoints(
    phases: &[Phase],
    replayed: &[bool],
    results: &[RankResult],
    meetings: &Meetings,
) -> Vec<CheckpointFigures> {
    phases
        .iter()
        .enumerate()
        .filter(|(i, p)| {
            p.kind == PhaseKind::Checkpoint && replayed.get(*i).copied().unwrap_or(true)
        })
        .filter_map(|(i, _)| {
            let write_bytes: u64 = results
                .iter()
                .filter_map(|r| r.phases.get(i))
                .map(|p| p.write_bytes)
                .sum();
            // A save the job at N does not make leaves a phase without writes.
            (write_bytes > 0).then(|| {
                // The writers' time: a rank that read on through the save
                // spent it on its steps.
                let duration_s = results
                    .iter()
                    .filter_map(|r| r.phases.get(i))
                    .filter(|p| p.write_bytes > 0)
                    .map(|p| secs(p.duration_ns))
                    .fold(0.0, f64::max);
                CheckpointFigures {
                    phase: i,
                    duration_s,
                    met: meetings.met_at(i),
                    write_bytes,
                    gib_s: per_s(write_bytes as f64 / GIB, duration_s),
                    storage_write_bytes: sum_known(
                        results
                            .iter()
                            .filter_map(|r| r.phases.get(i))
                            .map(|p| p.storage_write_bytes),
                    ),
                }
            })
        })
        .collect()
}

impl Training {
    pub fn build(
        phases: &[Phase],
        replayed: &[bool],
        results: &[RankResult],
        meetings: &Meetings,
        afap: bool,
    ) -> Training {
        // A stretch in which no rank read what it replays (the reads of a
        // whole capture's exit, left out as code) is no epoch.
        let reads = |span: (usize, usize)| -> u64 {
            results
                .iter()
                .map(|r| sum(r, span, &|p| p.read_bytes + p.samples))
                .sum()
        };
        let epochs: Vec<EpochFigures> = stretches(phases, replayed)
            .into_iter()
            .filter(|&span| reads(span) > 0)
            .enumerate()
            .map(|(k, span)| epoch(span, k == 0, results, afap))
            .collect();
        let aus: Vec<f64> = epochs.iter().filter_map(|e| e.au_percent).collect();
        let (au_mean, au_sd) = mean_stdev(&aus);
        let checkpoints = checkpoints(phases, replayed, results, meetings);
        Training {
            span_s: span(&epochs, &checkpoints, results),
            epochs,
            au_mean_percent: (!aus.is_empty()).then_some(au_mean),
            au_stdev_percent: (!aus.is_empty()).then_some(au_sd),
            checkpoints,
            loads: loads(phases.len(), replayed, results),
        }
    }
}

/// From the first epoch's start to the last save's phase (or the last
/// epoch's last), each rank's phases summed less its start-up, the slowest
/// rank's: a rank's phases tile its time, the waits at meetings included,
/// so this is its time over that stretch whether the ranks met at the
/// saves or read on.
fn span(
    epochs: &[EpochFigures],
    checkpoints: &[CheckpointFigures],
    results: &[RankResult],
) -> Option<f64> {
    let first = epochs.first()?.phases;
    let last = checkpoints
        .iter()
        .map(|c| c.phase)
        .chain(epochs.iter().map(|e| e.phases.1))
        .max()?;
    // The start-up is looked up in the first epoch's phases up to its
    // first sample, which start this stretch too.
    let time = |r: &RankResult| {
        let lead = lead_before_epoch(r, first, true);
        (sum(r, (first.0, last), &|p| p.duration_ns) + before_span(r, first, true, &lead))
            .saturating_sub(lead.duration_ns)
    };
    Some(results.iter().map(|r| secs(time(r))).fold(0.0, f64::max))
}

/// The phases replayed whose reads are mostly of checkpoint files.
fn loads(phases: usize, replayed: &[bool], results: &[RankResult]) -> Vec<LoadFigures> {
    (0..phases)
        .filter(|&i| replayed.get(i).copied().unwrap_or(true))
        .filter_map(|i| {
            let of = |f: &dyn Fn(&PhaseStats) -> u64| -> u64 {
                results.iter().filter_map(|r| r.phases.get(i)).map(f).sum()
            };
            let (from_checkpoints, all) = (of(&|p| p.checkpoint_read_bytes), of(&|p| p.read_bytes));
            (from_checkpoints > 0 && 2 * from_checkpoints >= all).then(|| {
                let duration_s = results
                    .iter()
                    .filter_map(|r| r.phases.get(i))
                    .map(|p| p.duration_ns as f64 / 1e9)
                    .fold(0.0, f64::max);
                LoadFigures {
                    phase: i,
                    duration_s,
                    read_bytes: from_checkpoints,
                    gib_s: per_s(from_checkpoints as f64 / GIB, duration_s),
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
