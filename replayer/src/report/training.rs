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

use super::stats::{Lead, PhaseStats, RankResult};
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
mod tests {
    use super::*;

    fn phase(kind: PhaseKind) -> Phase {
        Phase {
            kind,
            start_s: 0.0,
            end_s: 0.0,
            read_bytes: 0,
            write_bytes: 0,
            max_writers: 0,
            metadata_calls: 0,
            start_unix_ns: 0,
            end_unix_ns: 0,
        }
    }

    #[test]
    fn epochs_are_the_reading_between_checkpoints_replayed() {
        use PhaseKind::*;
        let phases: Vec<Phase> = [
            Metadata, Load, Read, Checkpoint, Read, Idle, Read, Checkpoint, Idle,
        ]
        .into_iter()
        .map(phase)
        .collect();
        let all = vec![true; phases.len()];
        assert_eq!(stretches(&phases, &all), vec![(1, 2), (4, 6)]);
        let mut some = all.clone();
        some[4] = false;
        assert_eq!(stretches(&phases, &some), vec![(1, 2), (6, 6)]);
        // The last steps computed on batches read ahead, before the save,
        // are the epoch's; a pause after the last save is not.
        let phases: Vec<Phase> = [Load, Idle, Metadata, Checkpoint, Read, Idle]
            .into_iter()
            .map(phase)
            .collect();
        assert_eq!(stretches(&phases, &[]), vec![(0, 2), (4, 4)]);
    }

    #[test]
    fn a_phase_reading_mostly_checkpoints_is_a_load() {
        use crate::report::stats::PhaseStats;
        let phases = vec![phase(PhaseKind::Load), phase(PhaseKind::Read)];
        let rank = RankResult {
            phases: vec![
                PhaseStats {
                    duration_ns: 2_000_000_000,
                    read_bytes: 3 << 30,
                    checkpoint_read_bytes: 2 << 30,
                    ..Default::default()
                },
                PhaseStats {
                    duration_ns: 1_000_000_000,
                    read_bytes: 4 << 30,
                    checkpoint_read_bytes: 1 << 30,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let t = Training::build(
            &phases,
            &[true, true],
            &[rank.clone(), rank],
            &Meetings::default(),
            false,
        );
        assert_eq!(t.loads.len(), 1, "{:?}", t.loads);
        let l = &t.loads[0];
        assert_eq!((l.phase, l.read_bytes), (0, 4 << 30));
        assert!((l.gib_s - 2.0).abs() < 1e-9);
    }

    #[test]
    fn the_span_runs_from_the_first_epoch_to_the_last_save_on_the_slowest_rank() {
        use crate::report::stats::PhaseStats;
        use PhaseKind::*;
        let kinds = [Metadata, Load, Read, Checkpoint, Read, Checkpoint, Idle];
        let phases: Vec<Phase> = kinds.into_iter().map(phase).collect();
        // Seconds per phase; phase 3 and 5 write (the saves).
        let rank = |secs: [u64; 7]| RankResult {
            phases: secs
                .iter()
                .enumerate()
                .map(|(i, &s)| PhaseStats {
                    duration_ns: s * 1_000_000_000,
                    write_bytes: if i == 3 || i == 5 { 1 << 20 } else { 0 },
                    read_bytes: if matches!(i, 1 | 2 | 4) { 1 << 20 } else { 0 },
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let ranks = [rank([50, 1, 2, 3, 4, 5, 100]), rank([50, 2, 2, 2, 2, 2, 1])];
        let all = vec![true; phases.len()];
        let t = Training::build(&phases, &all, &ranks, &Meetings::default(), false);
        // The start-up (phase 0) and the idle tail (phase 6) are outside.
        assert_eq!(t.span_s, Some(15.0));
        // Without its last save, the span ends with the last epoch.
        let mut no_last_save = all.clone();
        no_last_save[5] = false;
        let t = Training::build(&phases, &no_last_save, &ranks, &Meetings::default(), false);
        assert_eq!(t.span_s, Some(10.0));
        let t = Training::build(&phases[..1], &all[..1], &ranks, &Meetings::default(), false);
        assert_eq!(t.span_s, None);
    }

    #[test]
    fn an_epoch_starts_at_each_ranks_first_sample_unless_its_loader_started_there() {
        use crate::report::stats::{Lead, PhaseStats};
        use PhaseKind::*;
        let phases: Vec<Phase> = [Load, Read, Checkpoint, Read, Checkpoint]
            .into_iter()
            .map(phase)
            .collect();
        const S: u64 = 1_000_000_000;
        // Every phase 2 s, 1 s of it compute, and half a rank's `startup`
        // seconds (compute) before its first sample: only the first
        // phase's is the job's start-up.
        let rank = |startup: u64| RankResult {
            phases: (0..5)
                .map(|i| PhaseStats {
                    duration_ns: 2 * S,
                    compute_ns: S,
                    ideal_ns: 2 * S,
                    samples: 1,
                    write_bytes: if i % 2 == 0 && i > 0 { 1 << 20 } else { 0 },
                    lead: Some(Lead {
                        duration_ns: startup * S / 2,
                        compute_ns: startup * S / 2,
                        ideal_ns: startup * S / 2,
                        loader_started: false,
                        before_ns: 0,
                        to_fork: false,
                    }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        // Rank 0 started up in 1 s (0.5 s in the load phase), rank 1 in 2 s.
        let ranks = [rank(1), rank(2)];
        let all = vec![true; phases.len()];
        let t = Training::build(&phases, &all, &ranks, &Meetings::default(), false);
        // The first epoch (phases 0-1): 4 s less the start-up, the slowest
        // rank's (rank 0: 3.5 s); its AU is what compute is left over that.
        assert_eq!(t.epochs[0].phases, (0, 1));
        assert!(
            (t.epochs[0].duration_s - 3.5).abs() < 1e-9,
            "{:?}",
            t.epochs[0]
        );
        let au = (1.5 / 3.5 + 1.0 / 3.0) / 2.0 * 100.0;
        assert!((t.epochs[0].au_percent.unwrap() - au).abs() < 1e-6);
        assert_eq!(t.epochs[0].stall_s, 0.0);
        // Later epochs begin at each rank's first sample too, when what
        // came before was not a loader's workers starting: here, after the
        // save, rank 0 computed 0.5 s and rank 1 1 s before its first
        // batch (the slowest: rank 0, 1.5 s).
        assert!(
            (t.epochs[1].duration_s - 1.5).abs() < 1e-9,
            "{:?}",
            t.epochs[1]
        );
        // The span: phases 0-4 (10 s) less the start-up, the slowest rank's.
        assert_eq!(t.span_s, Some(9.5));
        // A loader's workers started after a save are the job's epoch: it
        // begins where its phase does.
        let started = |startup: u64| {
            let mut r = rank(startup);
            for p in &mut r.phases {
                if let Some(l) = &mut p.lead {
                    l.loader_started = true;
                }
            }
            r
        };
        let t = Training::build(
            &phases,
            &all,
            &[started(1), started(2)],
            &Meetings::default(),
            false,
        );
        assert!((t.epochs[0].duration_s - 3.5).abs() < 1e-9);
        assert!((t.epochs[1].duration_s - 2.0).abs() < 1e-9);
        // Where the trace records the workers' fork, a later epoch starts
        // there too: what came before it is not the epoch's.
        let forked = |startup| {
            let mut r = started(startup);
            for p in &mut r.phases {
                if let Some(l) = &mut p.lead {
                    l.to_fork = true;
                }
            }
            r
        };
        let t = Training::build(
            &phases,
            &all,
            &[forked(1), forked(2)],
            &Meetings::default(),
            false,
        );
        assert!((t.epochs[0].duration_s - 3.5).abs() < 1e-9);
        assert!(
            (t.epochs[1].duration_s - 1.5).abs() < 1e-9,
            "{:?}",
            t.epochs
        );
        // A start-up that is a phase of its own (no sample in it) is the
        // start-up too, with the lead of the phase of the first sample.
        let mut own_phase = [rank(1), rank(2)];
        for r in &mut own_phase {
            r.phases[0].samples = 0;
            r.phases[0].lead = None;
        }
        let t = Training::build(&phases, &all, &own_phase, &Meetings::default(), false);
        // Rank 0: 4 s less phase 0's 2 s and phase 1's 0.5 s lead.
        assert!(
            (t.epochs[0].duration_s - 1.5).abs() < 1e-9,
            "{:?}",
            t.epochs[0]
        );
        assert_eq!(t.span_s, Some(7.5));
        // A loader's worker forked 0.25 s before the phase of its first
        // sample (in the start-up's phase) and opened the sample as the
        // phase began: the epoch runs from the fork. Its start is not the
        // job's compute, and no stall either.
        let mut forked = own_phase.clone();
        for r in &mut forked {
            r.phases[1].lead = Some(Lead {
                loader_started: true,
                before_ns: S / 4,
                ..Lead::default()
            });
        }
        let t = Training::build(&phases, &all, &forked, &Meetings::default(), false);
        assert!(
            (t.epochs[0].duration_s - 2.25).abs() < 1e-9,
            "{:?}",
            t.epochs[0]
        );
        let au = 1.0 / 2.25 * 100.0;
        assert!((t.epochs[0].au_percent.unwrap() - au).abs() < 1e-6);
        assert_eq!(t.epochs[0].stall_s, 0.0);
        assert_eq!(t.span_s, Some(8.25));
    }

    #[test]
    fn a_loader_worker_forked_in_the_idle_start_up_begins_the_first_epoch_there() {
        use crate::report::stats::{Lead, PhaseStats};
        use PhaseKind::*;
        const S: u64 = 1_000_000_000;
        let phases: Vec<Phase> = [Idle, Load, Read, Checkpoint]
            .into_iter()
            .map(phase)
            .collect();
        // 1 s of start-up (no sample), then the loader's worker opens the
        // first sample as the load phase begins, forked `fork_ns` before.
        let rank = |fork_ns: u64| {
            let stats = |duration_ns, compute_ns, samples, write_bytes| PhaseStats {
                duration_ns,
                compute_ns,
                ideal_ns: duration_ns,
                samples,
                write_bytes,
                ..Default::default()
            };
            let mut phases = vec![
                stats(S, S, 0, 0),
                stats(2 * S, S, 1, 0),
                stats(2 * S, S, 1, 0),
                stats(S, 0, 0, 1 << 20),
            ];
            phases[1].lead = Some(Lead {
                loader_started: true,
                before_ns: fork_ns,
                ..Lead::default()
            });
            RankResult {
                phases,
                ..Default::default()
            }
        };
        let all = vec![true; phases.len()];
        let t = Training::build(
            &phases,
            &all,
            &[rank(S * 3 / 10)],
            &Meetings::default(),
            false,
        );
        assert_eq!(t.epochs[0].phases, (1, 2));
        let e = &t.epochs[0];
        assert!((e.duration_s - 4.3).abs() < 1e-9, "{e:?}");
        // The worker starting is neither the job's compute nor a stall.
        assert!((e.au_percent.unwrap() - 200.0 / 4.3).abs() < 1e-6, "{e:?}");
        assert_eq!(e.stall_s, 0.0);
        assert!((t.span_s.unwrap() - 5.3).abs() < 1e-9);
        // A fork before all of the start-up's phase takes that phase only.
        let t = Training::build(&phases, &all, &[rank(5 * S)], &Meetings::default(), false);
        assert!((t.epochs[0].duration_s - 5.0).abs() < 1e-9);
    }

    #[test]
    fn a_stretch_that_reads_nothing_replayed_is_no_epoch() {
        use crate::report::stats::PhaseStats;
        use PhaseKind::*;
        // A whole capture's exit reads code after the last save: a read
        // phase of the trace in which the replay reads nothing.
        let phases: Vec<Phase> = [Read, Checkpoint, Read].into_iter().map(phase).collect();
        let stats = |read_bytes, write_bytes| PhaseStats {
            duration_ns: 1_000_000_000,
            read_bytes,
            write_bytes,
            ..Default::default()
        };
        let rank = RankResult {
            phases: vec![stats(1 << 20, 0), stats(0, 1 << 20), stats(0, 0)],
            ..Default::default()
        };
        let t = Training::build(&phases, &[true; 3], &[rank], &Meetings::default(), false);
        assert_eq!(t.epochs.len(), 1, "{:?}", t.epochs);
        assert_eq!(t.epochs[0].phases, (0, 0));
    }

    #[test]
    fn a_rank_with_no_steps_in_a_stretch_has_no_au_there() {
        use crate::report::stats::PhaseStats;
        let phases = vec![phase(PhaseKind::Read)];
        let rank = |compute_ns| RankResult {
            phases: vec![PhaseStats {
                duration_ns: 1_000_000_000,
                compute_ns,
                ideal_ns: compute_ns,
                read_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        };
        let t = Training::build(
            &phases,
            &[true],
            &[rank(900_000_000), rank(0)],
            &Meetings::default(),
            false,
        );
        assert!((t.epochs[0].au_percent.unwrap() - 90.0).abs() < 1e-9);
    }

    #[test]
    fn au_is_compute_over_time_per_rank_averaged() {
        use crate::report::stats::PhaseStats;
        let phases = vec![phase(PhaseKind::Read), phase(PhaseKind::Checkpoint)];
        let rank = |duration_ns, compute_ns| RankResult {
            phases: vec![
                PhaseStats {
                    duration_ns,
                    compute_ns,
                    ideal_ns: compute_ns,
                    samples: 4,
                    ..Default::default()
                },
                PhaseStats {
                    duration_ns: 500_000_000,
                    write_bytes: 1 << 30,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let t = Training::build(
            &phases,
            &[true, true],
            &[
                rank(1_000_000_000, 900_000_000),
                rank(2_000_000_000, 1_000_000_000),
            ],
            &Meetings::default(),
            false,
        );
        let e = &t.epochs[0];
        assert_eq!(e.duration_s, 2.0);
        assert!((e.au_percent.unwrap() - 70.0).abs() < 1e-9, "{e:?}");
        assert!((e.stall_s - 1.0).abs() < 1e-9);
        assert_eq!(e.samples, 8);
        assert_eq!(t.checkpoints.len(), 1);
        assert!((t.checkpoints[0].gib_s - 4.0).abs() < 1e-9);
    }

    #[test]
    fn au_leaves_each_ranks_first_step_out_as_mlperf_does() {
        use crate::report::stats::{FirstStep, PhaseStats};
        const S: u64 = 1_000_000_000;
        let phases = vec![phase(PhaseKind::Read)];
        // An epoch of 8.75 s: 1 s before the first sample (start-up, its
        // lead), then a first step that waits 3 s for its batch and
        // computes 1 s, then 3 steps of 1.25 s (1 s compute each).
        let rank = |first_step| RankResult {
            phases: vec![PhaseStats {
                duration_ns: 9_750_000_000,
                compute_ns: 4 * S,
                ideal_ns: 4 * S,
                samples: 4,
                read_bytes: 1 << 20,
                lead: Some(Lead {
                    duration_ns: S,
                    ..Lead::default()
                }),
                first_step,
                ..Default::default()
            }],
            ..Default::default()
        };
        let told = Some(FirstStep {
            end_ns: 5 * S,
            compute_ns: S,
        });
        let t = Training::build(&phases, &[true], &[rank(told)], &Meetings::default(), false);
        let e = &t.epochs[0];
        assert!((e.duration_s - 8.75).abs() < 1e-9, "{e:?}");
        // DLIO's rule on the same steps (see `au`): 3 s over 8.75 - 4 s.
        let mlperf = crate::plan::scale::au::from_steps(8.75, &[4.0, 1.25, 1.25, 1.25], &[1.0; 4]);
        assert!((e.au_percent.unwrap() - mlperf).abs() < 1e-9, "{e:?}");
        assert!((e.au_whole_epoch_percent.unwrap() - 400.0 / 8.75).abs() < 1e-9);
        // Without a step told, both are the whole epoch's.
        let t = Training::build(&phases, &[true], &[rank(None)], &Meetings::default(), false);
        assert_eq!(t.epochs[0].au_percent, t.epochs[0].au_whole_epoch_percent);
    }
}
