//! The `iorepro-replay` command line: raw arguments (clap), checked into
//! the [`Options`] of one replay, which [`crate::run`](mod@crate::run) carries out.
//!
//! The flags come in groups, one per room they feed, each in a file of its
//! own with the checks that turn it into that room's options: where the
//! replay runs and at how many ranks ([`target`]), how it talks to a
//! bucket ([`object_storage`]), what of the trace is replayed and how it
//! scales ([`plan`]), how its calls are made, the target prepared and the
//! ranks met ([`execution`]), and what it prints and writes ([`output`]).
//! `--help` shows each group under its own heading. What spans groups (an
//! `s3://` target refuses the page-cache flags; lists plan a sweep only
//! with `--plan-only`) is checked here.

pub mod execution;
pub mod object_storage;
pub mod output;
pub mod plan;
pub mod target;

use std::path::PathBuf;

use clap::Parser;

use execution::{CallArgs, MeetingArgs, PrepareArgs};
use object_storage::ObjectStorageArgs;
use output::{LiveArgs, OutputArgs};
use plan::{ScalingArgs, SelectionArgs};
use target::TargetArgs;

use crate::error::{ReplayError, ReplayResult};
use crate::execute::CallOptions;
use crate::io::prepare::PrepareOptions;
use crate::io::target::Target;
use crate::live::watch::LiveOptions;
use crate::plan::PlanOptions;
use crate::ranks::layout::Asked;
use crate::ranks::rendezvous::MeetOptions;
use crate::report::output::OutputFormat;

#[derive(Debug, Parser)]
#[command(
    name = "iorepro-replay",
    version,
    about = "Replay a trace's file I/O scaled to N ranks against a target directory",
    after_help = "Under srun, mpirun or torchrun each process is one rank (identity from the launcher's environment); \
                  without a launcher, --ranks N runs N ranks as threads of this process. Launched processes meet \
                  through MPI (builds with the `mpi` feature, under mpirun or srun) or through files \
                  (--rendezvous-dir, or on the target by default)."
)]
pub struct Cli {
    /// Trace directory (or a single .parquet file).
    pub trace: PathBuf,
    #[command(flatten)]
    pub placement: TargetArgs,
    #[command(flatten)]
    pub s3: ObjectStorageArgs,
    #[command(flatten)]
    pub selection: SelectionArgs,
    #[command(flatten)]
    pub scaling: ScalingArgs,
    #[command(flatten)]
    pub calls: CallArgs,
    #[command(flatten)]
    pub preparing: PrepareArgs,
    #[command(flatten)]
    pub meeting: MeetingArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub live: LiveArgs,
}

/// Checked options of one replay, in the groups the rooms take.
#[derive(Debug, Clone)]
pub struct Options {
    pub trace: PathBuf,
    /// Where the calls land; `None` only with `--plan-only`.
    pub target: Option<Target>,
    /// Print the scaling model and stop.
    pub plan_only: bool,
    /// Print the scaling model's details.
    pub explain: bool,
    /// With `--plan-only`: every world and bandwidth to plan for, when
    /// the lists ask for more than one plan (`plan.scale` and `world`
    /// hold the first).
    pub sweep: Option<Sweep>,
    /// Where to draw the plan or sweep (`--plot`).
    pub plot: Option<PathBuf>,
    /// What of the trace is replayed and how it scales.
    pub plan: PlanOptions,
    /// The ranks and nodes asked for.
    pub world: Asked,
    /// How each call is made.
    pub calls: CallOptions,
    pub prepare: PrepareOptions,
    /// Where launched processes meet when not through MPI.
    pub meeting: MeetOptions,
    pub output: OutputFormat,
    /// Write what the replay did as a trace into this directory.
    pub record_ops: Option<PathBuf>,
    /// The HTML page to write (`--report`), and whether `record_ops` is a
    /// directory of its own, made for the page and removed after it.
    pub report: Option<PathBuf>,
    pub record_ops_for_report: bool,
    /// Where to write the replay as a run of MLPerf Storage's results tree
    /// (`--mlperf-results`), and the model's name in it.
    pub mlperf_results: Option<PathBuf>,
    pub mlperf_model: Option<String>,
    /// A progress bar on a terminal.
    pub show_progress: bool,
    /// Status lines and the metrics endpoint while the replay runs.
    pub live: LiveOptions,
}

/// A sizing sweep: a plan for each world and each read bandwidth.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub worlds: Vec<Asked>,
    /// Bytes/s; `None` plans on storage that keeps up.
    pub bandwidths: Vec<Option<f64>>,
}

impl Cli {
    /// The sweep the lists ask for: `None` for one plan or a replay (which
    /// takes one value of each).
    fn sweep(&self, worlds: Vec<Asked>) -> ReplayResult<Option<Sweep>> {
        let bandwidths = self.scaling.bandwidths()?;
        if worlds.len() == 1 && bandwidths.len() == 1 {
            return Ok(None);
        }
        if !self.output.plan_only {
            return Err(ReplayError::Usage(
                "lists of --ranks, --nodes, --ranks-per-node or --bandwidth plan a sizing sweep: give --plan-only, or one value of each to replay"
                    .into(),
            ));
        }
        Ok(Some(Sweep { worlds, bandwidths }))
    }

    /// The target `--target` names; a bucket refuses what only a
    /// directory has (O_DIRECT, the page cache, io_uring).
    fn target(&self) -> ReplayResult<Option<Target>> {
        let target = self.placement.target(&self.s3)?;
        if matches!(target, Some(Target::Bucket(_)))
            && (self.calls.asks_for_a_directory() || self.preparing.drop_caches)
        {
            return Err(ReplayError::Usage(
                "--direct, --evict-reads, --drop-caches and --engine io_uring are for \
                 directory targets, \
                 not s3://"
                    .into(),
            ));
        }
        Ok(target)
    }

    pub fn into_options(self) -> ReplayResult<Options> {
        let target = self.target()?;
        let worlds = self.placement.worlds()?;
        let world = worlds[0];
        let sweep = self.sweep(worlds)?;
        self.output.check_report()?;
        let (record_ops, record_ops_for_report) = self.output.record_ops();
        Ok(Options {
            target,
            plan_only: self.output.plan_only,
            explain: self.output.explain,
            sweep,
            plot: self.output.plot.clone(),
            plan: PlanOptions {
                scope: self.selection.scope()?,
                phases: self.selection.phases()?,
                allow_incomplete: self.selection.allow_incomplete,
                scale: self.scaling.scale()?,
                shared_data: self.scaling.shared_data,
            },
            world,
            calls: self.calls.calls()?,
            prepare: self.preparing.prepare(),
            meeting: self.meeting.meeting()?,
            output: self.output.output()?,
            live: self.live.live()?,
            record_ops,
            report: self.output.report.clone(),
            record_ops_for_report,
            mlperf_results: self.output.mlperf_results.clone(),
            mlperf_model: self.output.mlperf_model.clone(),
            show_progress: true,
            trace: self.trace,
        })
    }
}

#[cfg(test)]
mod tests;
