//! What of the trace is replayed (`--phases`, `--roles`, `--include`,
//! `--exclude`) and how its ranks scale (`--data`, `--checkpoint`,
//! `--batch`, the plan's bandwidths and AU): the plan's share of the
//! command line, checked into its [`Scope`] and [`ScaleOptions`].

use clap::Args;

use crate::error::{ReplayError, ReplayResult};
use crate::plan::scale::{BatchMode, CheckpointMode, DataMode, ScaleOptions};
use crate::plan::scope::Scope;
use iorepro_analysis::phases::PhaseKind;
use iorepro_analysis::roles::Role;

#[derive(Debug, Args)]
#[command(next_help_heading = "What is replayed")]
pub struct SelectionArgs {
    /// Only these phase kinds (load, read, checkpoint, metadata, idle), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub phases: Option<Vec<String>>,
    /// The roles of the files whose calls are replayed (dataset, checkpoint,
    /// code, scratch, system, log, output, launcher, other, or all); default
    /// dataset,checkpoint,scratch,log,output.
    // `--role` too, as `iorepro-trace filter` once spelled it.
    #[arg(long, alias = "role", value_delimiter = ',')]
    pub roles: Option<Vec<String>>,
    /// Also replay the calls on paths beneath PREFIX, whatever their role (repeatable).
    #[arg(long, value_name = "PREFIX")]
    pub include: Vec<String>,
    /// Leave out the calls on paths beneath PREFIX (repeatable; wins over --include).
    #[arg(long, value_name = "PREFIX")]
    pub exclude: Vec<String>,
    /// Replay a trace that holds no calls or is marked incomplete (rows may be missing).
    #[arg(long)]
    pub allow_incomplete: bool,
}

impl SelectionArgs {
    pub fn phases(&self) -> ReplayResult<Option<Vec<PhaseKind>>> {
        let Some(list) = &self.phases else {
            return Ok(None);
        };
        list.iter()
            .map(|p| {
                PhaseKind::parse(p.trim()).ok_or_else(|| {
                    ReplayError::Usage(format!(
                        "--phases: `{p}` is not a phase kind (load, read, checkpoint, metadata, idle)"
                    ))
                })
            })
            .collect::<ReplayResult<Vec<_>>>()
            .map(Some)
    }

    pub fn scope(&self) -> ReplayResult<Scope> {
        let roles = match &self.roles {
            Some(list) => {
                Role::parse_list(list).map_err(|e| ReplayError::Usage(format!("--roles: {e}")))?
            }
            None => Scope::default().roles,
        };
        Ok(Scope {
            roles,
            include: self.include.clone(),
            exclude: self.exclude.clone(),
        })
    }
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Scaling model")]
pub struct ScalingArgs {
    /// All replicas read one copy of the data (page-cache hits between them become possible).
    #[arg(long)]
    pub shared_data: bool,
    /// How dataset reads scale from the trace's R ranks to N: shard (the
    /// job's: the traced reads shared out over the N ranks, as a
    /// distributed sampler does) or replicate (each rank reads all its
    /// traced rank read: weak scaling, N/R times the data).
    #[arg(long, value_enum, default_value = "shard", hide_possible_values = true)]
    pub data: DataMode,
    /// How checkpoints scale: auto (the layout the trace shows: sharded
    /// over all N ranks when several ranks write a checkpoint's files, one
    /// writer when one does), sharded, rank0, or replicate (each rank
    /// writes what its traced rank wrote).
    #[arg(long, value_enum, default_value = "auto", hide_possible_values = true)]
    pub checkpoint: CheckpointMode,
    /// Which batch the job holds when it grows: global (the default: the
    /// traced steps and every traced save, each rank reading R/N of its
    /// traced rank's samples a step) or per-rank (at N each rank makes R/N
    /// of the traced steps, and a job saving every K steps saves R/N as
    /// often: fewer saves, said in the verdict).
    #[arg(
        long,
        value_enum,
        default_value = "global",
        hide_possible_values = true
    )]
    pub batch: BatchMode,
    /// Each checkpoint's total size at N (a larger model), e.g. 40GiB.
    #[arg(long, value_name = "SIZE")]
    pub checkpoint_bytes: Option<String>,
    /// Storage bandwidth to time each epoch and checkpoint at in the plan
    /// (what the job at N would take on storage of that speed), e.g.
    /// 50GiB/s; a list (10GiB/s,50GiB/s) in a sizing sweep.
    #[arg(long, value_name = "RATE", value_delimiter = ',')]
    pub bandwidth: Vec<String>,
    /// Write bandwidth to time each checkpoint at in the plan, where the
    /// storage writes at another rate than it reads (default: --bandwidth).
    #[arg(long, value_name = "RATE")]
    pub write_bandwidth: Option<String>,
    /// The AU (percent) the plan finds the bandwidth for, with --bandwidth
    /// (MLPerf Storage's bar is 90).
    #[arg(long, value_name = "PERCENT", default_value = "90")]
    pub au: f64,
    /// What the page cache spares the storage in the plan's what-if: none
    /// (every read reaches the storage), cold (the first epoch's all do,
    /// later epochs' as traced) or as-traced (each epoch's as the traced
    /// job's did); cold and as-traced need a trace that says what the
    /// storage served.
    #[arg(long, value_enum, default_value = "none", hide_possible_values = true)]
    pub cache: crate::plan::scale::cache::CacheMode,
}

impl ScalingArgs {
    pub fn scale(&self) -> ReplayResult<ScaleOptions> {
        let usage = ReplayError::Usage;
        let size = |flag: &str, v: &Option<String>| {
            v.as_deref()
                .map(|v| {
                    iorepro_format::units::parse_size(v.trim_end_matches("/s"))
                        .map_err(|e| usage(format!("{flag}: {e}")))
                })
                .transpose()
        };
        let rate = |flag: &str, v: &Option<String>| match size(flag, v)? {
            // A storage that moves nothing has no time to give.
            Some(0) => Err(usage(format!(
                "{flag} must be above zero (a rate such as 2GiB/s)"
            ))),
            b => Ok(b.map(|b| b as f64)),
        };
        // The first of `--bandwidth`'s list (a sweep plans the others).
        let bandwidth = self.bandwidths()?[0];
        let write_bandwidth = rate("--write-bandwidth", &self.write_bandwidth)?;
        if !(self.au > 0.0 && self.au <= 100.0) {
            return Err(usage(format!(
                "--au {}: an AU is a percentage above 0 and at most 100",
                self.au
            )));
        }
        Ok(ScaleOptions {
            data: self.data,
            checkpoint: self.checkpoint,
            batch: self.batch,
            checkpoint_bytes: size("--checkpoint-bytes", &self.checkpoint_bytes)?,
            bandwidth,
            write_bandwidth,
            au_threshold: self.au,
            cache: self.cache,
        })
    }

    /// `--bandwidth`'s rates (bytes/s), or one `None`.
    pub fn bandwidths(&self) -> ReplayResult<Vec<Option<f64>>> {
        if self.bandwidth.is_empty() {
            return Ok(vec![None]);
        }
        self.bandwidth
            .iter()
            .map(|b| {
                let bytes = iorepro_format::units::parse_size(b.trim().trim_end_matches("/s"))
                    .map_err(|e| ReplayError::Usage(format!("--bandwidth: {e}")))?;
                match bytes {
                    0 => Err(ReplayError::Usage(
                        "--bandwidth must be above zero (a rate such as 2GiB/s)".into(),
                    )),
                    b => Ok(Some(b as f64)),
                }
            })
            .collect()
    }
}
