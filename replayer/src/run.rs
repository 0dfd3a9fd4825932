//! One replay from start to end: who am I (launcher), survey the trace, open
//! the target, prepare data, run the ranks with the reader feeding them,
//! gather the results and build the report.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{ReplayError, ReplayResult};
use crate::execute::{Shared, Worker};
use crate::io::buffers::{data_buffer_len, PrivateCopies, SharedData, STAMPED_MAX};
use crate::io::confine::Confined;
use crate::io::engine::EngineKind;
use crate::io::prepare::{self, PrepareMode, PrepareStats};
use crate::live::watch::{Lingering, LiveOptions, Watch};
use crate::live::LiveRanks;
use crate::plan::rank_map::RankMap;
use crate::plan::scale::{DataMode, Forecast, Model, Router, ScaleOptions};
use crate::plan::scope::Scope;
use crate::plan::stream::{dispatch, CHANNEL_CHUNKS};
use crate::plan::survey::Survey;
use crate::plan::timing::Timing;
use crate::ranks::launcher::{self, LaunchedRank};
use crate::ranks::rendezvous::{self, Rendezvous};
use crate::report::output::OutputFormat;
use crate::report::record;
use crate::report::stats::{unix_ns, RankResult};
use crate::report::summary::{Report, RunInfo};
use iorepro_traces::analysis::phases::PhaseKind;

/// Checked options of one replay.
#[derive(Debug, Clone)]
pub struct Options {
    pub trace: PathBuf,
    pub target: PathBuf,
    /// How the trace's R ranks become N (see [`crate::plan::scale`]).
    pub scale: ScaleOptions,
    /// Print the scaling model and stop.
    pub plan_only: bool,
    pub ranks: Option<u32>,
    pub nodes: Option<u32>,
    pub ranks_per_node: Option<u32>,
    pub timing: Timing,
    pub direct: bool,
    pub engine: EngineKind,
    pub phases: Option<Vec<PhaseKind>>,
    pub prepare: PrepareMode,
    pub shared_data: bool,
    pub output: OutputFormat,
    pub record_ops: Option<PathBuf>,
    pub timeout: Duration,
    pub run_id: Option<String>,
    /// Where launched processes meet when not through MPI (default: on the target).
    pub rendezvous_dir: Option<PathBuf>,
    pub prepare_threads: usize,
    pub drop_caches: bool,
    pub show_progress: bool,
    /// Status lines and the metrics endpoint while the replay runs.
    pub live: LiveOptions,
    /// Which files' calls are replayed.
    pub scope: Scope,
    /// Replay a trace with no calls, or one marked incomplete.
    pub allow_incomplete: bool,
}

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

/// Holds the rendezvous (MPI finalised, a rendezvous directory removed on drop).
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

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// The ranks this process runs, the world size, and each local rank's node.
struct Layout {
    world: u32,
    local: Vec<(u32, u32)>,
    nodes: u32,
}

fn layout(opts: &Options, launched: &Option<LaunchedRank>, sources: u32) -> ReplayResult<Layout> {
    if let Some(l) = launched {
        if let Some(n) = opts.ranks.filter(|&n| n != l.size) {
            return Err(ReplayError::Usage(format!(
                "--ranks {n} contradicts the {} launcher's world size {}; under a launcher each process is one rank",
                l.launcher, l.size
            )));
        }
        let node = l.node.unwrap_or(0);
        // 0 = count the distinct hosts the gathered results come from.
        return Ok(Layout {
            world: l.size,
            local: vec![(l.rank, node)],
            nodes: opts.nodes.unwrap_or(0),
        });
    }
    let world = opts.ranks.unwrap_or(sources);
    let (nodes, per_node) = match (opts.nodes, opts.ranks_per_node) {
        (Some(m), Some(k)) => {
            if m * k < world {
                return Err(ReplayError::Usage(format!(
                    "--nodes {m} x --ranks-per-node {k} holds fewer than {world} ranks"
                )));
            }
            (m, k)
        }
        (Some(m), None) => (m, world.div_ceil(m)),
        (None, Some(k)) => (world.div_ceil(k), k),
        (None, None) => (1, world),
    };
    Ok(Layout {
        world,
        local: (0..world).map(|t| (t, t / per_node.max(1))).collect(),
        nodes,
    })
}

/// The trace's survey with the replay's scope applied (what is left out is
/// in `left_out`): the one view of the trace that the plan and the replay
/// both start from.
fn scoped_survey(opts: &Options) -> ReplayResult<Survey> {
    let mut survey = Survey::run(&opts.trace)?;
    crate::plan::scope::check_usable(&opts.trace, &survey, opts.allow_incomplete)?;
    survey.left_out = crate::plan::scope::apply(&mut survey, &opts.scope);
    Ok(survey)
}

/// Which of the trace's phases `--phases` keeps.
fn selected_phases(opts: &Options, survey: &Survey) -> Vec<bool> {
    survey
        .phases
        .iter()
        .map(|p| opts.phases.as_ref().is_none_or(|sel| sel.contains(&p.kind)))
        .collect()
}

/// The scaling model of `opts`' replay, without replaying (`--plan-only`):
/// the world is `--ranks`, or the trace's rank count.
pub fn plan_only(opts: &Options) -> ReplayResult<Forecast> {
    let survey = scoped_survey(opts)?;
    let world = opts.ranks.unwrap_or(survey.sources.len() as u32);
    let model = Model::build(&opts.trace, &survey, world, &opts.scale)?;
    Forecast::count(
        &opts.trace,
        &survey,
        &model,
        &selected_phases(opts, &survey),
    )
}

pub fn run(opts: &Options) -> ReplayResult<Outcome> {
    // The one privileged step is checked before any work, so it fails at once.
    if opts.drop_caches && opts.prepare != PrepareMode::Only {
        prepare::check_can_drop_caches()?;
    }
    let mut launched = launcher::detect()?;
    // MPI starts first: a world that disagrees with the launcher fails at once.
    let mpi = rendezvous::start_mpi(&mut launched, opts.rendezvous_dir.is_some(), opts.timeout)?;
    let outcome = replay(opts, &launched, mpi.clone());
    if let (Err(e), Some(m)) = (&outcome, &mpi) {
        m.end_job(e);
    }
    outcome
}

fn replay(
    opts: &Options,
    launched: &Option<LaunchedRank>,
    mpi: Option<Arc<dyn Rendezvous>>,
) -> ReplayResult<Outcome> {
    // Said before the trace is read, which can take a while.
    if opts.target.exists() && !opts.target.is_dir() {
        return Err(ReplayError::Usage(format!(
            "--target {} is not a directory",
            opts.target.display()
        )));
    }
    let survey = Arc::new(scoped_survey(opts)?);
    let map = RankMap {
        sources: survey.sources.clone(),
        shared_data: opts.shared_data,
        data_sharded: opts.scale.data == DataMode::Shard,
    };
    let lay = layout(opts, launched, map.source_count())?;
    let reporting = launched.as_ref().is_none_or(|l| l.rank == 0);
    if reporting {
        // Said before any work, so a user sees at once what will not be replayed.
        eprint!("{}", survey.left_out.render());
    }
    let phase_selected = selected_phases(opts, &survey);
    let model = Model::build(&opts.trace, &survey, lay.world, &opts.scale)?;
    let forecast = Forecast::count(&opts.trace, &survey, &model, &phase_selected)?;
    if reporting {
        // The model is shown before any work, so what the replay is meant
        // to do can be checked against what it did.
        eprint!("{}", forecast.render());
    }

    std::fs::create_dir_all(&opts.target)
        .map_err(|e| ReplayError::io("creating target", &opts.target, e))?;
    let conf = Arc::new(
        Confined::open_root(&opts.target)
            .map_err(|e| ReplayError::io("opening target", &opts.target, e))?,
    );
    let rendezvous: Arc<dyn Rendezvous> = match mpi {
        Some(m) => m,
        None => rendezvous::connect(rendezvous::Setup {
            launched: launched.as_ref(),
            local_ranks: lay.local.iter().map(|l| l.0).collect(),
            target: &conf,
            dir: opts.rendezvous_dir.as_deref(),
            run_id: opts.run_id.as_deref(),
            timeout: opts.timeout,
        })?,
    };
    let my_rank = lay.local[0].0;
    let progress = Arc::new(AtomicU64::new(0));
    let total: u64 = lay
        .local
        .iter()
        .map(|(t, _)| forecast.ops_per_rank.get(*t as usize).copied().unwrap_or(0))
        .sum();
    let live = Arc::new(LiveRanks::new(
        lay.local.iter().map(|l| l.0),
        opts.timing != Timing::Afap,
        total,
        progress.clone(),
        launched.as_ref().map(|l| l.rank),
    ));
    // Started before the data is prepared, so a long preparation shows
    // up in the lines too, and a metrics address in use fails before any work.
    let watch = match Watch::start(
        &opts.live,
        live.clone(),
        launched.as_ref().and_then(|l| l.local_rank),
    ) {
        Ok(w) => w,
        Err(e) => {
            rendezvous.abort(my_rank, &format!("rank {my_rank}: {e}"));
            return Err(e);
        }
    };

    let mut prepared = None;
    if opts.prepare != PrepareMode::Skip {
        let tasks = prepare::tasks(&survey, &map, lay.world);
        let share = launched.as_ref().map_or((0, 1), |l| (l.rank, l.size));
        match prepare::prepare(&conf, &survey, &tasks, share, opts.prepare_threads) {
            Ok(p) => prepared = Some(p),
            Err(e) => {
                rendezvous.abort(my_rank, &format!("rank {my_rank}: {e}"));
                return Err(e);
            }
        }
    }
    if opts.drop_caches && opts.prepare != PrepareMode::Only {
        // Every process drops its node's caches before any rank starts.
        if let Err(e) = prepare::drop_caches() {
            rendezvous.abort(my_rank, &format!("rank {my_rank}: {e}"));
            return Err(e);
        }
    }
    if launched.is_some() && (opts.prepare != PrepareMode::Skip || opts.drop_caches) {
        rendezvous.barrier(my_rank, PREPARED_BARRIER, "data prepared")?;
    }
    if opts.prepare == PrepareMode::Only {
        // Nothing to report, but the ranks still part the usual way (a
        // rendezvous directory is removed once all have).
        let _ = rendezvous.gather(vec![RankResult {
            rank: my_rank,
            ..Default::default()
        }])?;
        return Ok(Outcome {
            report: None,
            prepare: prepared,
            prepare_only: true,
            failed: false,
            local_errors: Vec::new(),
            _parting: Parting {
                _rendezvous: rendezvous,
            },
            lingering: None,
        });
    }

    let host = hostname();
    let recording = match &opts.record_ops {
        Some(dir) => {
            let dir = record::record_dir(dir, launched.as_ref().map(|l| l.rank));
            Some(record::start(&dir, &host, std::env::args().collect())?)
        }
        None => None,
    };
    let bar = crate::live::progress::start(
        total,
        progress.clone(),
        opts.show_progress
            && reporting
            && !opts.output.is_machine_readable()
            && !opts.live.lines_on_stderr(),
    );
    let (recorder, sink) = match recording {
        Some((r, s)) => (Some(r), Some(s)),
        None => (None, None),
    };
    let data_len = data_buffer_len(survey.max_io_bytes);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let copies_limit = PrivateCopies::limit_for(lay.local.len(), cores, data_len);
    // Copies a rank will need are made before the clock starts.
    let needs_copies = opts.direct || survey.max_write_bytes > STAMPED_MAX as u64;
    let copies = PrivateCopies::new(
        data_len,
        copies_limit,
        if needs_copies {
            lay.local.len().min(cores)
        } else {
            0
        },
    );
    let shared = Shared {
        conf: conf.clone(),
        survey: survey.clone(),
        map: map.clone(),
        phase_selected: phase_selected.clone(),
        timing: opts.timing,
        direct: opts.direct,
        engine: opts.engine,
        rendezvous: rendezvous.clone(),
        progress,
        live,
        recorder,
        host,
        data: SharedData::new(data_len),
        copies,
    };
    let mut extra_errors = Vec::new();
    let results: Vec<RankResult> = std::thread::scope(|s| {
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for &(rank, node) in &lay.local {
            let (tx, rx) = sync_channel(CHANNEL_CHUNKS);
            senders.push((rank, tx));
            let shared = &shared;
            handles.push(s.spawn(move || match Worker::new(shared, rank, node) {
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
            }));
        }
        let mut router = Router::new(&model);
        if let Err(e) = dispatch(&opts.trace, &survey, &mut router, &phase_selected, senders) {
            let msg = format!("reading the trace: {e}");
            shared.rendezvous.abort(my_rank, &msg);
            extra_errors.push(msg);
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("rank thread"))
            .collect()
    });
    drop(bar);
    drop(shared);
    let lingering = Some(watch.finish());
    // Ranks report the failed calls; this says why they failed, once. A target
    // unmounted under a running replay fails no call at all, only this check.
    // Calls that failed may be the first sign of a target being removed; a
    // removal under way finishes within moments, so look again briefly.
    let calls_failed = results.iter().any(|r| !r.errors.is_empty());
    let vanished = settled_vanished(&conf, calls_failed).map(|why| {
        format!(
            "target {} vanished during the replay: {why}",
            opts.target.display()
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

    let mut results = results;
    if launched.is_some() {
        // One rank per launched process: it carries this process's errors.
        if let Some(mine) = results.first_mut() {
            mine.errors.append(&mut extra_errors);
            mine.gather_unix_ns = unix_ns();
        }
    }
    let gathered = rendezvous.gather(results).map_err(|e| match &vanished {
        Some(v) => ReplayError::Rendezvous(format!("{v}; this rank's result was not published")),
        None => e,
    })?;
    let gather_done_unix_ns = unix_ns();
    let Some(all) = gathered.results else {
        return Ok(Outcome {
            report: None,
            prepare: prepared,
            prepare_only: false,
            failed: !local_errors.is_empty(),
            local_errors,
            _parting: Parting {
                _rendezvous: rendezvous,
            },
            lingering,
        });
    };
    let gather_error = gathered.problem;
    extra_errors.extend(gather_error);
    let info = RunInfo {
        ranks: lay.world,
        nodes: lay.nodes,
        timing: match opts.timing {
            Timing::Afap => "afap".into(),
            Timing::Scaled(1.0) => "original".into(),
            Timing::Scaled(f) => format!("x{f}"),
        },
        afap: opts.timing == Timing::Afap,
        engine: opts.engine.name().into(),
        direct: opts.direct,
        phase_selected,
        rendezvous: rendezvous.info(),
        gather_done_unix_ns,
    };
    let mut report = Report::build(&info, &survey, &all, prepared.clone(), extra_errors);
    report.epochs = forecast.epochs;
    let failed = !report.errors.is_empty();
    Ok(Outcome {
        report: Some(report),
        prepare: prepared,
        prepare_only: false,
        failed,
        local_errors,
        _parting: Parting {
            _rendezvous: rendezvous,
        },
        lingering,
    })
}

/// Whether the target vanished; after failed calls, asked again for up to a
/// second, so a target whose removal was still under way is named as such.
fn settled_vanished(conf: &crate::io::confine::Confined, calls_failed: bool) -> Option<String> {
    let mut why = conf.vanished();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while why.is_none() && calls_failed && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        why = conf.vanished();
    }
    why
}
