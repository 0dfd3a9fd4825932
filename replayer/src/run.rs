//! One replay from start to end, the rooms tied in their order (`replay`
//! reads as the pipeline): who this process is ([`crate::ranks`]), the plan
//! ([`crate::plan`]: survey, scope, scaling model, forecast), the target
//! opened and prepared ([`crate::io`]), the ranks run ([`crate::execute`])
//! with the plan's stream feeding them and [`crate::live`] showing their
//! figures, their results gathered ([`crate::ranks`]) and the report built
//! ([`crate::report`]).

use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

use std::path::{Path, PathBuf};

use iorepro_analysis::phases::PhaseKind;

use crate::cli::{Options, Sweep};
use crate::error::{ReplayError, ReplayResult};
use crate::execute::{CallOptions, Shared, Worker};
use crate::io::buffers;
use crate::io::prepare::{self, file_count, Counters, PrepareMode, PrepareOptions, PrepareStats};
use crate::io::target::{Opened, Target};
use crate::io::task_io::OtherThreads;
use crate::live::watch::{Lingering, LiveOptions, Watch};
use crate::live::LiveRanks;
use crate::plan::rank_map::RankMap;
use crate::plan::scale::{Counted, DataMode, Forecast, Model, Router};
use crate::plan::stream::{dispatch, Chunk, CHANNEL_CHUNKS};
use crate::plan::survey::Survey;
use crate::plan::timing::Timing;
use crate::plan::PlanOptions;
use crate::ranks::launcher::{self, LaunchedRank};
use crate::ranks::layout::{world_size, Asked, Layout};
use crate::ranks::rendezvous::{self, Gathered, MeetOptions, Rendezvous};
use crate::report::record;
use crate::report::request_table::RequestsReport;
use crate::report::stats::{unix_ns, ProcessStorage, RankResult};
use crate::report::summary::{Report, RunInfo};
use crate::report::sweep::PlanAnswer;
use crate::report::verdict::{Measured, Verdict};

/// What a process has to show: the report on the process that prints it
/// (`None` on the other ranks of a launched run), and whether the run failed.
#[derive(Debug)]
pub struct Outcome {
    pub report: Option<Report>,
    pub prepare: Option<PrepareStats>,
    pub prepare_only: bool,
    pub failed: bool,
    /// This process's own errors (printed by every rank, not only the reporting one).
    pub local_errors: Vec<String>,
    /// The ranks part only when the outcome is dropped, after it is printed:
    /// a launcher such as mpirun ends the whole job as soon as any rank exits
    /// with an error, which must not happen before rank 0 prints the report.
    _parting: Parting,
    /// The metrics endpoint, serving the final figures a while longer.
    lingering: Option<Lingering>,
}

impl Outcome {
    /// Keeps the metrics endpoint up for `--metrics-linger` (after the
    /// report is printed), so a scraper sees the final figures.
    pub fn linger(&mut self) {
        if let Some(l) = self.lingering.take() {
            l.wait();
        }
    }
}

/// Holds the rendezvous: MPI finalised, a rendezvous directory removed,
/// when dropped.
struct Parting {
    _rendezvous: Arc<dyn Rendezvous>,
}

impl std::fmt::Debug for Parting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Parting")
    }
}

/// Barrier number of "all data prepared", apart from the replay's own barriers.
const PREPARED_BARRIER: u64 = 1 << 40;

/// The trace's survey with the replay's scope applied (what is left out is
/// in `left_out`): the one view of the trace that the plan and the replay
/// both start from.
fn scoped_survey(trace: &Path, opts: &PlanOptions) -> ReplayResult<Survey> {
    let mut survey = Survey::run(trace)?;
    crate::plan::survey::check_usable(trace, &survey, opts.allow_incomplete)?;
    survey.left_out = crate::plan::survey::apply_scope(&mut survey, &opts.scope);
    Ok(survey)
}

/// Which of the trace's phases `--phases` keeps.
fn selected_phases(phases: Option<&[PhaseKind]>, survey: &Survey) -> Vec<bool> {
    survey
        .phases
        .iter()
        .map(|p| phases.is_none_or(|sel| sel.contains(&p.kind)))
        .collect()
}

/// The scaling model of `opts`' replay, without replaying (`--plan-only`),
/// for the world the replay would have ([`world_size`]: under a launcher,
/// its world), and its verdict; with lists, for every world and bandwidth
/// of the sweep (the trace counted once per world). `None` on the other
/// ranks of a launched run: rank 0 plans and prints, as it reports a
/// replay.
pub fn plan_only(opts: &Options) -> ReplayResult<Option<Vec<PlanAnswer>>> {
    let launched = launcher::detect()?;
    if launched.as_ref().is_some_and(|l| l.rank != 0) {
        // The world is still checked, so every rank fails alike on a
        // contradicting `--ranks`.
        world_size(launched.as_ref(), opts.world.ranks, 1)?;
        return Ok(None);
    }
    let survey = scoped_survey(&opts.trace, &opts.plan)?;
    let sources = survey.sources.len() as u32;
    let phases = selected_phases(opts.plan.phases.as_deref(), &survey);
    let sweep = opts.sweep.clone().unwrap_or_else(|| Sweep {
        worlds: vec![opts.world],
        bandwidths: vec![opts.plan.scale.bandwidth],
    });
    let mut answers = Vec::new();
    for asked in &sweep.worlds {
        let lay = Layout::of(launched.as_ref(), *asked, sources)?;
        let mut model = Model::build(&opts.trace, &survey, lay.world, &opts.plan.scale)?;
        let counted = Counted::of(&opts.trace, &survey, &model, &phases)?;
        for &bandwidth in &sweep.bandwidths {
            model.options.bandwidth = bandwidth;
            let forecast = Forecast::of(&counted, &survey, &model);
            let verdict = Verdict::of_plan(&forecast, lay.nodes.max(1));
            answers.push(PlanAnswer { forecast, verdict });
        }
    }
    Ok(Some(answers))
}

pub fn run(opts: &Options) -> ReplayResult<Outcome> {
    let target = opts.target.as_ref().ok_or_else(|| {
        ReplayError::Usage("--target is needed to replay (or --plan-only)".into())
    })?;
    let prep = opts.prepare;
    // The one privileged step is checked before any work, so it fails at once.
    if prep.drop_caches && prep.mode != PrepareMode::Only {
        prepare::check_can_drop_caches()?;
    }
    let mut launched = launcher::detect()?;
    // MPI starts first: a world that disagrees with the launcher fails at once.
    let meeting = &opts.meeting;
    let mpi = rendezvous::start_mpi(&mut launched, meeting.dir.is_some(), meeting.timeout)?;
    let outcome = replay(opts, target, &launched, mpi.clone());
    if let (Err(e), Some(m)) = (&outcome, &mpi) {
        m.end_job(e);
    }
    outcome
}

/// One replay, step by step: the plan, the target, the ranks' meeting, the
/// live figures, the target prepared, the ranks run with the stream
/// feeding them, their results gathered, and the report.
fn replay(
    opts: &Options,
    target: &Target,
    launched: &Option<LaunchedRank>,
    mpi: Option<Arc<dyn Rendezvous>>,
) -> ReplayResult<Outcome> {
    let meets_on_target = launched.is_some() && mpi.is_none() && opts.meeting.dir.is_none();
    target.check(meets_on_target)?;
    let plan = plan(
        &opts.trace,
        &opts.plan,
        (opts.world, opts.explain),
        launched,
    )?;
    target.check_names(&plan.survey, &plan.map)?;
    let opened = target.open(plan.survey.max_put_bytes)?;
    let rendezvous = meet(&opts.meeting, launched, &plan.lay, &opened, mpi)?;
    let paced = opts.calls.timing != Timing::Afap;
    let live = watch_live(&opts.live, paced, launched, &plan, &*rendezvous)?;
    let bar = opts.show_progress && plan.reporting && !opts.output.is_machine_readable();
    let prepared = prepare_target(opts.prepare, bar, launched, &plan, &opened, &*rendezvous)?;
    if opts.prepare.mode == PrepareMode::Only {
        return part_after_prepare(&plan.lay, rendezvous, prepared);
    }
    let bar = bar && !opts.live.lines_on_stderr();
    let record_ops = opts.record_ops.as_deref();
    let ran = run_ranks(
        &plan,
        opts.calls,
        record_ops,
        bar,
        &opened,
        &rendezvous,
        &live,
    )?;
    let lingering = Some(live.watch.finish());
    let mut ended = settle(target, &opened, ran);
    let gathered = gather(launched, &*rendezvous, &mut ended)?;
    let report = build_report(
        opts.calls,
        &plan,
        (target, &opened),
        &*rendezvous,
        gathered,
        ended.extra_errors,
        &prepared,
    );
    let failed = match &report {
        Some(r) => !r.errors.is_empty(),
        None => !ended.local_errors.is_empty(),
    };
    Ok(Outcome {
        report,
        prepare: prepared,
        prepare_only: false,
        failed,
        local_errors: ended.local_errors,
        _parting: Parting {
            _rendezvous: rendezvous,
        },
        lingering,
    })
}

/// What the plan settles before any file is touched.
struct Planned {
    trace: PathBuf,
    survey: Arc<Survey>,
    map: RankMap,
    lay: Layout,
    /// The launcher's rank of this process, if launched.
    launched_rank: Option<u32>,
    /// Whether this process prints the report (rank 0, or the only one).
    reporting: bool,
    phase_selected: Vec<bool>,
    model: Model,
    forecast: Forecast,
    /// Print the model's and the run's details (`--explain`).
    explain: bool,
}

/// The survey, the ranks and the scaling model; the process that reports
/// says at once what will be left out and what the ranks are meant to do,
/// so it can be checked against what they did.
fn plan(
    trace: &Path,
    opts: &PlanOptions,
    (asked, explain): (Asked, bool),
    launched: &Option<LaunchedRank>,
) -> ReplayResult<Planned> {
    let survey = Arc::new(scoped_survey(trace, opts)?);
    let map = RankMap {
        sources: survey.sources.clone(),
        shared_data: opts.shared_data,
        data_sharded: opts.scale.data == DataMode::Shard,
    };
    let lay = Layout::of(launched.as_ref(), asked, map.source_count())?;
    let reporting = launched.as_ref().is_none_or(|l| l.rank == 0);
    if reporting {
        eprint!("{}", survey.left_out.render());
    }
    let phase_selected = selected_phases(opts.phases.as_deref(), &survey);
    let model = Model::build(trace, &survey, lay.world, &opts.scale)?;
    let forecast = Forecast::count(trace, &survey, &model, &phase_selected)?;
    if reporting && explain {
        eprint!("{}", forecast.render());
    }
    Ok(Planned {
        trace: trace.to_path_buf(),
        survey,
        map,
        lay,
        launched_rank: launched.as_ref().map(|l| l.rank),
        reporting,
        phase_selected,
        model,
        forecast,
        explain,
    })
}

/// Where the ranks meet: MPI when it started, else threads or files.
fn meet(
    opts: &MeetOptions,
    launched: &Option<LaunchedRank>,
    lay: &Layout,
    target: &Opened,
    mpi: Option<Arc<dyn Rendezvous>>,
) -> ReplayResult<Arc<dyn Rendezvous>> {
    match mpi {
        Some(m) => Ok(m),
        None => rendezvous::connect(rendezvous::Setup {
            launched: launched.as_ref(),
            local_ranks: lay.local.iter().map(|l| l.0).collect(),
            target: target.dir(),
            options: opts,
        }),
    }
}

/// Passes `r` on; an error first tells the other ranks to stop.
fn or_abort<T>(r: ReplayResult<T>, rendezvous: &dyn Rendezvous, rank: u32) -> ReplayResult<T> {
    r.inspect_err(|e| rendezvous.abort(rank, &format!("rank {rank}: {e}")))
}

/// The local ranks' figures while they run, and what shows them.
struct Live {
    ranks: Arc<LiveRanks>,
    /// Ops the local ranks made so far, for the progress bar too.
    progress: Arc<AtomicU64>,
    /// Ops the local ranks are planned to make.
    total: u64,
    watch: Watch,
}

/// Starts the status lines and the metrics endpoint before the data is
/// prepared, so a long preparation shows up in the lines too, and a metrics
/// address in use fails before any work.
fn watch_live(
    opts: &LiveOptions,
    paced: bool,
    launched: &Option<LaunchedRank>,
    plan: &Planned,
    rendezvous: &dyn Rendezvous,
) -> ReplayResult<Live> {
    let local = &plan.lay.local;
    let progress = Arc::new(AtomicU64::new(0));
    let total: u64 = local
        .iter()
        .map(|(t, _)| {
            plan.forecast
                .ops_per_rank
                .get(*t as usize)
                .copied()
                .unwrap_or(0)
        })
        .sum();
    let ranks = Arc::new(LiveRanks::new(
        local.iter().map(|l| l.0),
        paced,
        total,
        progress.clone(),
        launched.as_ref().map(|l| l.rank),
    ));
    let local_rank = launched.as_ref().and_then(|l| l.local_rank);
    let watch = Watch::start(opts, ranks.clone(), local_rank);
    let watch = or_abort(watch, rendezvous, plan.lay.my_rank())?;
    Ok(Live {
        ranks,
        progress,
        total,
        watch,
    })
}

/// Puts the target in the state the traced job found (this process's share
/// of it, with a progress bar when `bar`) and drops the node's caches when
/// asked; under a launcher the ranks then wait for each other, so none
/// starts on data still being made.
fn prepare_target(
    opts: PrepareOptions,
    bar: bool,
    launched: &Option<LaunchedRank>,
    plan: &Planned,
    target: &Opened,
    rendezvous: &dyn Rendezvous,
) -> ReplayResult<Option<PrepareStats>> {
    let my_rank = plan.lay.my_rank();
    let mut prepared = None;
    if opts.mode != PrepareMode::Skip {
        let tasks = prepare::tasks(&plan.survey, &plan.map, plan.lay.world);
        let share = launched.as_ref().map_or((0, 1), |l| (l.rank, l.size));
        let counters = Counters::default();
        let files = counters.files.clone();
        let bar = crate::live::progress::start(file_count(&tasks, share), files, bar, "files");
        let stats = target.prepare(&plan.survey, &tasks, share, opts.threads, &counters);
        drop(bar);
        prepared = Some(or_abort(stats, rendezvous, my_rank)?);
    }
    if opts.drop_caches && opts.mode != PrepareMode::Only {
        // Every process drops its node's caches before any rank starts.
        or_abort(prepare::drop_caches(), rendezvous, my_rank)?;
    }
    if launched.is_some() && (opts.mode != PrepareMode::Skip || opts.drop_caches) {
        rendezvous.barrier(my_rank, PREPARED_BARRIER, "data prepared")?;
    }
    Ok(prepared)
}

/// `--prepare only`: nothing to report, but the ranks still part the usual
/// way (a rendezvous directory is removed once all have).
fn part_after_prepare(
    lay: &Layout,
    rendezvous: Arc<dyn Rendezvous>,
    prepared: Option<PrepareStats>,
) -> ReplayResult<Outcome> {
    let _ = rendezvous.gather(vec![RankResult {
        rank: lay.my_rank(),
        ..Default::default()
    }])?;
    Ok(Outcome {
        report: None,
        prepare: prepared,
        prepare_only: true,
        failed: false,
        local_errors: Vec::new(),
        _parting: Parting {
            _rendezvous: rendezvous,
        },
        lingering: None,
    })
}

/// What the local ranks did.
struct Ran {
    results: Vec<RankResult>,
    /// This process's errors apart from its ranks' (reading the trace).
    errors: Vec<String>,
    /// The `--record-ops` trace, still to be finished.
    sink: Option<record::RecordSink>,
}

/// Runs the local ranks, each a thread with a [`Worker`], while this
/// thread streams the trace to them through bounded channels; `record_ops`
/// is where what they do is written as a trace, and `bar` whether a
/// progress bar shows.
fn run_ranks(
    plan: &Planned,
    calls: CallOptions,
    record_ops: Option<&Path>,
    bar: bool,
    target: &Opened,
    rendezvous: &Arc<dyn Rendezvous>,
    live: &Live,
) -> ReplayResult<Ran> {
    let host = launcher::hostname();
    let (recorder, sink) = match record_ops {
        Some(dir) => {
            let dir = record::record_dir(dir, plan.launched_rank);
            let (r, s) = record::start(&dir, &host, std::env::args().collect())?;
            (Some(r), Some(s))
        }
        None => (None, None),
    };
    let bar = crate::live::progress::start(live.total, live.progress.clone(), bar, "ops");
    let survey = &plan.survey;
    let (data, copies) = buffers::for_process(
        plan.lay.local.len(),
        survey.max_io_bytes,
        survey.max_write_bytes,
        calls.direct.covers(true),
    );
    let shared = Shared {
        target: target.clone(),
        survey: plan.survey.clone(),
        map: plan.map.clone(),
        phase_selected: plan.phase_selected.clone(),
        timing: calls.timing,
        read_sharers: plan
            .model
            .shares
            .iter()
            .map(|s| match plan.model.data_mode() {
                DataMode::Shard => s.len() as u32,
                DataMode::Replicate => 1,
            })
            .collect(),
        direct: calls.direct,
        evictor: match calls.evict_reads {
            true => Some(crate::io::evict::Evictor::start().map_err(|e| {
                ReplayError::io("start the evicting thread for", "--evict-reads", e)
            })?),
            false => None,
        },
        engine: calls.engine,
        rendezvous: rendezvous.clone(),
        progress: live.progress.clone(),
        live: live.ranks.clone(),
        recorder,
        host,
        data,
        copies,
    };
    let mut errors = Vec::new();
    // This thread feeds the ranks the trace: its reading is no replay's.
    let others = match target {
        Opened::Dir(_) => OtherThreads::start(),
        Opened::Bucket(_) => None,
    };
    let mut results: Vec<RankResult> = std::thread::scope(|s| {
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for &(rank, node) in &plan.lay.local {
            let (tx, rx) = sync_channel(CHANNEL_CHUNKS);
            senders.push((rank, tx));
            let shared = &shared;
            handles.push(s.spawn(move || run_rank(shared, rank, node, rx)));
        }
        let phases = &plan.phase_selected;
        let mut router = Router::new(&plan.model, plan.survey.stretches());
        if let Err(e) = dispatch(&plan.trace, &plan.survey, &mut router, phases, senders) {
            let msg = format!("reading the trace: {e}");
            shared.rendezvous.abort(plan.lay.my_rank(), &msg);
            errors.push(msg);
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("rank thread"))
            .collect()
    });
    drop(bar);
    drop(shared);
    if let (Some(first), Some(bytes)) = (results.first_mut(), others.and_then(|o| o.so_far())) {
        first.process_storage = Some(ProcessStorage {
            bytes,
            ranks: plan.lay.local.len() as u32,
        });
    }
    Ok(Ran {
        results,
        errors,
        sink,
    })
}

/// One rank's thread: its replay of what arrives on `rx`, or, when it
/// cannot start, a result naming why (the others are told to stop).
fn run_rank(shared: &Shared, rank: u32, node: u32, rx: Receiver<Chunk>) -> RankResult {
    match Worker::new(shared, rank, node) {
        Ok(w) => w.run(rx),
        Err(e) => {
            let msg = format!("rank {rank}: {e}");
            shared.live.rank(rank).finished(0);
            shared.rendezvous.abort(rank, &msg);
            shared.skip_remaining_barriers(rank, 0);
            RankResult {
                rank,
                node,
                host: shared.host.clone(),
                errors: vec![msg],
                ..Default::default()
            }
        }
    }
}

/// What this process ends its replay with.
struct Ended {
    results: Vec<RankResult>,
    /// Its errors apart from its ranks' calls, the target vanishing first.
    extra_errors: Vec<String>,
    /// Every error of this process (printed by every rank).
    local_errors: Vec<String>,
    /// Why the target vanished, if it did.
    vanished: Option<String>,
}

/// After the ranks: whether the target vanished under them, and the record
/// finished.
fn settle(target: &Target, opened: &Opened, ran: Ran) -> Ended {
    let Ran {
        results,
        errors: mut extra_errors,
        sink,
    } = ran;
    // Ranks report the failed calls; this says why they failed, once. A target
    // unmounted under a running replay fails no call at all, only this check.
    // Calls that failed may be the first sign of a target being removed; a
    // removal under way finishes within moments, so look again briefly.
    let calls_failed = results.iter().any(|r| !r.errors.is_empty());
    let vanished = opened.vanished(calls_failed).map(|why| {
        format!(
            "target {} vanished during the replay: {why}",
            target.display()
        )
    });
    extra_errors.splice(0..0, vanished.clone());
    if let Some(sink) = sink {
        if let Err(e) = sink.finish() {
            extra_errors.push(format!("recording ops: {e}"));
        }
    }
    let local_errors: Vec<String> = results
        .iter()
        .flat_map(|r| r.errors.clone())
        .chain(extra_errors.clone())
        .collect();
    Ended {
        results,
        extra_errors,
        local_errors,
        vanished,
    }
}

/// Brings every rank's result to the process that reports. Under a
/// launcher the one rank of this process carries its other errors.
fn gather(
    launched: &Option<LaunchedRank>,
    rendezvous: &dyn Rendezvous,
    ended: &mut Ended,
) -> ReplayResult<Gathered> {
    let mut results = std::mem::take(&mut ended.results);
    if launched.is_some() {
        if let Some(mine) = results.first_mut() {
            mine.errors.append(&mut ended.extra_errors);
            mine.gather_unix_ns = unix_ns();
        }
    }
    rendezvous
        .gather(results)
        .map_err(|e| match &ended.vanished {
            Some(v) => {
                ReplayError::Rendezvous(format!("{v}; this rank's result was not published"))
            }
            None => e,
        })
}

/// The report, on the process that holds every result (`None` elsewhere).
fn build_report(
    calls: CallOptions,
    plan: &Planned,
    (shown, target): (&Target, &Opened),
    rendezvous: &dyn Rendezvous,
    gathered: Gathered,
    mut extra_errors: Vec<String>,
    prepared: &Option<PrepareStats>,
) -> Option<Report> {
    let gather_done_unix_ns = unix_ns();
    let all = gathered.results?;
    extra_errors.extend(gathered.problem);
    let info = RunInfo {
        ranks: plan.lay.world,
        nodes: plan.lay.nodes,
        timing: calls.timing.label(),
        afap: calls.timing == Timing::Afap,
        engine: calls.engine.name().into(),
        direct: calls.direct,
        evict_reads: calls.evict_reads,
        bucket: matches!(target, Opened::Bucket(_)),
        phase_selected: plan.phase_selected.clone(),
        rendezvous: rendezvous.info(),
        gather_done_unix_ns,
    };
    let mut report = Report::build(&info, &plan.survey, &all, prepared.clone(), extra_errors);
    report.epochs = plan.forecast.epochs;
    report.explain = plan.explain;
    let measured = Measured {
        ranks: report.ranks,
        nodes: report.nodes,
        training: &report.training,
        direct: &report.direct,
        evict_reads: report.evict_reads,
        bucket: matches!(target, Opened::Bucket(_)),
        storage: &report.storage,
        read_timelines: &report.read_timelines,
    };
    report.verdict = Some(Verdict::of_replay(
        &measured,
        &plan.forecast,
        shown.display(),
    ));
    report.requests = match target {
        Opened::Bucket(b) => Some(RequestsReport::build(&b.target, &all, report.duration_s)),
        Opened::Dir(_) => None,
    };
    Some(report)
}
