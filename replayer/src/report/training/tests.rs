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
        storage_read_bytes: None,
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

/// A rank of a load, a read, a save, a read and a save: every phase 2 s,
/// 1 s of it compute, and half the rank's `startup` seconds (compute)
/// before its first sample: only the first phase's is the job's start-up.
fn rank_starting_up(startup: u64) -> RankResult {
    use crate::report::stats::PhaseStats;
    const S: u64 = 1_000_000_000;
    RankResult {
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
    }
}

/// `r` with each phase's lead changed by `change`.
fn leads_changed(mut r: RankResult, change: impl Fn(&mut Lead)) -> RankResult {
    for p in &mut r.phases {
        if let Some(l) = &mut p.lead {
            change(l);
        }
    }
    r
}

#[test]
fn an_epoch_starts_at_each_ranks_first_sample_unless_its_loader_started_there() {
    use PhaseKind::*;
    let phases: Vec<Phase> = [Load, Read, Checkpoint, Read, Checkpoint]
        .into_iter()
        .map(phase)
        .collect();
    const S: u64 = 1_000_000_000;
    let rank = rank_starting_up;
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
    let started = |startup| leads_changed(rank(startup), |l| l.loader_started = true);
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
    let forked = |startup| leads_changed(started(startup), |l| l.to_fork = true);
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
