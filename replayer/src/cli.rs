//! The `iorepro-replay` command line: raw arguments (clap), checked into
//! the [`Options`] of one replay, which [`crate::run`](mod@crate::run) carries out.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use iorepro_telemetry::{parse_duration, parse_interval};

use crate::error::{ReplayError, ReplayResult};
use crate::execute::CallOptions;
use crate::io::engine::{DirectIo, EngineKind};
use crate::io::objects::{self, ObjectTarget, ReadMode};
use crate::io::prepare::{PrepareMode, PrepareOptions};
use crate::io::target::Target;
use crate::live::watch::LiveOptions;
use crate::plan::scale::{BatchMode, CheckpointMode, DataMode, ScaleOptions};
use crate::plan::scope::Scope;
use crate::plan::timing::Timing;
use crate::plan::PlanOptions;
use crate::ranks::layout::Asked;
use crate::ranks::rendezvous::MeetOptions;
use crate::report::output::OutputFormat;
use iorepro_analysis::phases::PhaseKind;
use iorepro_analysis::roles::Role;

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
    /// Directory to replay into; nothing outside it is touched. Or object
    /// storage, s3://BUCKET/PREFIX: endpoint, region and credentials from
    /// the AWS environment variables and profile files, as the AWS CLI.
    #[arg(long, required_unless_present = "plan_only")]
    pub target: Option<PathBuf>,
    /// On s3:// targets, how reads become GETs: as-traced (a ranged GET per
    /// read), coalesce (one GET of --s3-coalesce bytes serves the reads
    /// inside it), whole (one GET of the object at its first read),
    /// parallel (the object from the read on in ranged GETs of
    /// --s3-part-size, --s3-concurrency in flight, as AWS CRT clients).
    #[arg(
        long,
        value_enum,
        default_value = "as-traced",
        hide_possible_values = true
    )]
    pub s3_read: ReadMode,
    /// Bytes one GET fetches with --s3-read coalesce.
    #[arg(long, value_name = "SIZE", default_value = "8MiB")]
    pub s3_coalesce: String,
    /// Objects written from this size on are sent as multipart uploads
    /// (default as the AWS CLI and boto3).
    #[arg(long, value_name = "SIZE", default_value = "8MiB")]
    pub s3_multipart_threshold: String,
    /// Part size of multipart uploads, at least 5MiB (default as the AWS CLI and boto3).
    #[arg(long, value_name = "SIZE", default_value = "8MiB")]
    pub s3_part_size: String,
    /// GETs in flight per rank with --s3-read parallel.
    #[arg(long, value_name = "N", default_value_t = objects::DEFAULT_CONCURRENCY)]
    pub s3_concurrency: u32,
    /// Retries of a request that met a 5xx, a 429 or a timeout; past them the rank fails.
    #[arg(long, value_name = "N", default_value_t = objects::DEFAULT_RETRIES)]
    pub s3_retries: u32,
    /// Ranks to replay (default: the trace's rank count, or the launcher's
    /// world size). With --plan-only, a list (64,512,4096): a sizing sweep.
    #[arg(long, value_delimiter = ',', value_name = "N")]
    pub ranks: Vec<u32>,
    /// Nodes the ranks are spread over (for reports when ranks run as
    /// threads); a list in a sweep, one per --ranks entry or one for all.
    #[arg(long, value_delimiter = ',', value_name = "M")]
    pub nodes: Vec<u32>,
    /// Ranks on each node; a list in a sweep, as --nodes.
    #[arg(long, value_delimiter = ',', value_name = "K")]
    pub ranks_per_node: Vec<u32>,
    /// afap, original, or a scale factor on compute gaps (0.5 = half the compute time).
    #[arg(long, default_value = "afap")]
    pub timing: String,
    /// O_DIRECT for aligned data ops: all of them (`--direct`), or
    /// `--direct=reads` (writes go through the page cache and reach the
    /// storage at the job's syncs, as a buffered job's do).
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true, default_value = "off",
          default_missing_value = "all", hide_possible_values = true)]
    pub direct: DirectIo,
    /// Drop each file a rank read from the page cache when it closes it
    /// (files it opened read-only): its next read reaches the storage
    /// through the kernel's read-ahead, as a buffered job's reads of a
    /// dataset larger than memory do. `--direct=reads` bypasses the cache
    /// and its read-ahead instead, as a job reading with O_DIRECT does.
    #[arg(long)]
    pub evict_reads: bool,
    /// auto (as traced: the trace's io_uring requests through io_uring, its
    /// syscalls as syscalls), psync (every call a syscall) or io_uring
    /// (every data call, sync, open, stat and close an io_uring request).
    #[arg(long, value_enum, default_value = "auto", hide_possible_values = true)]
    pub engine: EngineKind,
    /// Only these phase kinds (load, read, checkpoint, metadata, idle), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub phases: Option<Vec<String>>,
    /// auto (put the target in the state the traced job found: the data it
    /// reads, the paths it found, nothing where it creates a path anew),
    /// only (that, then stop), skip.
    #[arg(long, value_enum, default_value = "auto", hide_possible_values = true)]
    pub prepare: PrepareMode,
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
    /// Print the scaling model's verdict (what the N ranks will read and
    /// write, and what that needs of the storage) and stop.
    #[arg(long)]
    pub plan_only: bool,
    /// Print the scaling model's details (per dataset, checkpoint file and
    /// save, and what it assumed) before the replay or the plan's verdict.
    #[arg(long, short = 'v', alias = "verbose")]
    pub explain: bool,
    /// With --plan-only: draw the sweep into FILE (.svg or .png): AU
    /// against read bandwidth, a line per N, with the AU bar; and the
    /// saves' share of the run against write bandwidth.
    #[arg(long, value_name = "FILE", requires = "plan_only")]
    pub plot: Option<PathBuf>,
    /// Print the report as JSON (the same as --output-format json).
    #[arg(long)]
    pub json: bool,
    /// table, json (our report), fio (fio's --output-format=json layout) or
    /// mlperf (MLPerf Storage's summary.json keys).
    #[arg(long, value_enum, hide_possible_values = true)]
    pub output_format: Option<OutputFormat>,
    /// Write what the replay did as a trace into this directory.
    #[arg(long)]
    pub record_ops: Option<PathBuf>,
    /// Write the replay as one offline HTML page (the verdict, the capture
    /// over the replay at N, the ranks' heatmap, the epochs, saves, phases
    /// and files) into FILE.html.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Longest any rank waits for the others (barriers, gathering), e.g. 600s, 10m.
    #[arg(long, default_value = "600s")]
    pub timeout: String,
    /// Names the rendezvous directory of a multi-process run when the launcher gives no job id.
    #[arg(long)]
    pub run_id: Option<String>,
    /// Under a launcher without MPI: meet through files in this shared
    /// directory instead of on the target (the storage being measured).
    /// Under mpirun or srun, a build with MPI meets through MPI unless this is given.
    #[arg(long)]
    pub rendezvous_dir: Option<PathBuf>,
    /// Files prepared at a time by each process.
    #[arg(long, default_value_t = 4)]
    pub prepare_threads: usize,
    /// Before the replay, drop this node's page, dentry and inode caches (needs root:
    /// CAP_SYS_ADMIN). Without it, only the prepared data files are evicted.
    #[arg(long)]
    pub drop_caches: bool,
    /// Print a JSON status line every DUR while the replay runs (e.g. 5s):
    /// figures so far, rates over the interval, p99 latency, stall. To
    /// stderr unless --status-file.
    #[arg(long, value_name = "DUR")]
    pub status_interval: Option<String>,
    /// Append the status lines to this file instead of stderr (every
    /// process of a launched run appends its own lines).
    #[arg(long, value_name = "PATH", requires = "status_interval")]
    pub status_file: Option<PathBuf>,
    /// Serve the live figures for Prometheus at http://HOST:PORT/metrics.
    /// Under a launcher the process of local rank L listens on PORT + L.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
    /// Keep serving the final figures this long after the replay ends, so a
    /// scraper collects them (at least two scrape intervals).
    #[arg(long, value_name = "DUR", default_value = "0s")]
    pub metrics_linger: String,
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

/// The scheme of a target written as a URL (`s3://bucket/prefix`,
/// `gs://...`, `file://...`): a name of letters, digits, `+`, `-` or `.`
/// starting with a letter, then `://`.
fn url_scheme(target: &Path) -> Option<&str> {
    let t = target.to_str()?;
    let (scheme, _) = t.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(format!("`{s}`: a timeout must be positive"));
    }
    Ok(d)
}

impl Cli {
    /// The object-storage target `--target` names, if it is `s3://`; any
    /// other URL is refused (`s3://bench/run1` taken as a path would be a
    /// relative directory named `s3:`, and the replay would "succeed" on
    /// the local disk).
    fn object_target(&self) -> ReplayResult<Option<ObjectTarget>> {
        let usage = ReplayError::Usage;
        let Some(target) = self.target.as_deref() else {
            return Ok(None);
        };
        let Some(scheme) = url_scheme(target) else {
            return Ok(None);
        };
        let shown = target.display();
        if scheme != "s3" {
            return Err(usage(format!(
                "--target {shown}: `{scheme}://` targets are not served; give s3://BUCKET/PREFIX \
                 or a directory on the storage to measure"
            )));
        }
        let (bucket, prefix) = ObjectTarget::parse(&target.to_string_lossy())
            .expect("an s3:// URL")
            .map_err(|e| usage(format!("--target {shown}: {e}")))?;
        let size = |flag: &str, v: &str| {
            iorepro_format::units::parse_size(v).map_err(|e| usage(format!("{flag}: {e}")))
        };
        let part_size = size("--s3-part-size", &self.s3_part_size)?;
        if !(objects::MIN_PART_SIZE..=objects::MAX_PART_SIZE).contains(&part_size) {
            return Err(usage(format!(
                "--s3-part-size {}: S3 takes parts of 5MiB to 5GiB",
                self.s3_part_size
            )));
        }
        let multipart_threshold = size("--s3-multipart-threshold", &self.s3_multipart_threshold)?;
        if multipart_threshold > objects::MAX_PART_SIZE {
            return Err(usage(format!(
                "--s3-multipart-threshold {}: a single PUT takes at most 5GiB",
                self.s3_multipart_threshold
            )));
        }
        let coalesce = size("--s3-coalesce", &self.s3_coalesce)?.max(1);
        if self.s3_concurrency == 0 {
            return Err(usage("--s3-concurrency must be at least 1".into()));
        }
        Ok(Some(ObjectTarget {
            bucket,
            prefix,
            read: self.s3_read,
            coalesce,
            multipart_threshold,
            part_size,
            concurrency: self.s3_concurrency,
            retries: self.s3_retries,
        }))
    }

    /// What `--target` names, if given.
    fn target(&self) -> ReplayResult<Option<Target>> {
        Ok(match self.object_target()? {
            Some(bucket) => Some(Target::Bucket(bucket)),
            None => self.target.clone().map(Target::Dir),
        })
    }

    fn phases(&self) -> ReplayResult<Option<Vec<PhaseKind>>> {
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

    fn scale(&self) -> ReplayResult<ScaleOptions> {
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
        })
    }

    /// The worlds `--ranks`, `--nodes` and `--ranks-per-node` ask for: one
    /// each, or lists of one entry per rank count (a single entry of
    /// `--nodes` or `--ranks-per-node` goes with every one).
    fn worlds(&self) -> ReplayResult<Vec<Asked>> {
        let usage = ReplayError::Usage;
        if self.ranks.contains(&0) || self.nodes.contains(&0) || self.ranks_per_node.contains(&0) {
            return Err(usage(
                "--ranks, --nodes and --ranks-per-node must be positive".into(),
            ));
        }
        let count = self.ranks.len().max(1);
        let nth = |flag: &str, v: &[u32], i: usize| -> ReplayResult<Option<u32>> {
            match v.len() {
                0 => Ok(None),
                1 => Ok(Some(v[0])),
                n if n == count => Ok(Some(v[i])),
                n => Err(usage(format!(
                    "{flag} lists {n} values for {count} rank count(s): give one, or one per --ranks entry"
                ))),
            }
        };
        (0..count)
            .map(|i| {
                Ok(Asked {
                    ranks: self.ranks.get(i).copied(),
                    nodes: nth("--nodes", &self.nodes, i)?,
                    ranks_per_node: nth("--ranks-per-node", &self.ranks_per_node, i)?,
                })
            })
            .collect()
    }

    /// `--bandwidth`'s rates (bytes/s), or one `None`.
    fn bandwidths(&self) -> ReplayResult<Vec<Option<f64>>> {
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

    /// The sweep the lists ask for: `None` for one plan or a replay (which
    /// takes one value of each).
    fn sweep(&self, worlds: Vec<Asked>) -> ReplayResult<Option<Sweep>> {
        let bandwidths = self.bandwidths()?;
        if worlds.len() == 1 && bandwidths.len() == 1 {
            return Ok(None);
        }
        if !self.plan_only {
            return Err(ReplayError::Usage(
                "lists of --ranks, --nodes, --ranks-per-node or --bandwidth plan a sizing sweep:                  give --plan-only, or one value of each to replay"
                    .into(),
            ));
        }
        Ok(Some(Sweep { worlds, bandwidths }))
    }

    fn scope(&self) -> ReplayResult<Scope> {
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

    fn output(&self) -> ReplayResult<OutputFormat> {
        match (self.output_format, self.json) {
            (None, false) => Ok(OutputFormat::Table),
            (None, true) => Ok(OutputFormat::Json),
            (Some(f), true) if f != OutputFormat::Json => Err(ReplayError::Usage(
                "--json contradicts --output-format; give one of them".into(),
            )),
            (Some(f), _) => Ok(f),
        }
    }

    fn live(&self) -> ReplayResult<LiveOptions> {
        let usage = ReplayError::Usage;
        Ok(LiveOptions {
            status_interval: self
                .status_interval
                .as_deref()
                .map(parse_interval)
                .transpose()
                .map_err(|e| usage(format!("--status-interval: {e}")))?,
            status_file: self.status_file.clone(),
            metrics_linger: parse_duration(&self.metrics_linger)
                .map_err(|e| usage(format!("--metrics-linger: {e}")))?,
            metrics_addr: self.metrics_addr.clone(),
        })
    }

    pub fn into_options(self) -> ReplayResult<Options> {
        let usage = ReplayError::Usage;
        let target = self.target()?;
        if matches!(target, Some(Target::Bucket(_)))
            && (self.direct != DirectIo::Off
                || self.drop_caches
                || self.evict_reads
                || self.engine == EngineKind::IoUring)
        {
            return Err(usage(
                "--direct, --evict-reads, --drop-caches and --engine io_uring are for \
                 directory targets, \
                 not s3://"
                    .into(),
            ));
        }
        let worlds = self.worlds()?;
        let world = worlds[0];
        let sweep = self.sweep(worlds)?;
        if let Some(page) = &self.report {
            let dir = page.parent().filter(|p| !p.as_os_str().is_empty());
            if dir.is_some_and(|d| !d.is_dir()) {
                return Err(usage(format!(
                    "--report {}: its directory does not exist",
                    page.display()
                )));
            }
            if self.plan_only {
                return Err(usage(
                    "--report writes a replay's page; with --plan-only give --plot".into(),
                ));
            }
        }
        // The page draws the replay's calls: recorded beside it when the
        // user keeps no record of them.
        let record_ops_for_report = self.report.is_some() && self.record_ops.is_none();
        let record_ops = match record_ops_for_report {
            true => Some(
                std::env::temp_dir().join(format!("iorepro-report-ops-{}", std::process::id())),
            ),
            false => self.record_ops.clone(),
        };
        Ok(Options {
            target,
            plan_only: self.plan_only,
            explain: self.explain,
            sweep,
            plot: self.plot.clone(),
            plan: PlanOptions {
                scope: self.scope()?,
                phases: self.phases()?,
                allow_incomplete: self.allow_incomplete,
                scale: self.scale()?,
                shared_data: self.shared_data,
            },
            world,
            calls: CallOptions {
                timing: self
                    .timing
                    .parse::<Timing>()
                    .map_err(|e| usage(format!("--timing: {e}")))?,
                direct: self.direct,
                evict_reads: self.evict_reads,
                engine: self.engine,
            },
            prepare: PrepareOptions {
                mode: self.prepare,
                threads: self.prepare_threads.max(1),
                drop_caches: self.drop_caches,
            },
            meeting: MeetOptions {
                timeout: parse_timeout(&self.timeout)
                    .map_err(|e| usage(format!("--timeout: {e}")))?,
                run_id: self.run_id.clone(),
                dir: self.rendezvous_dir.clone(),
            },
            output: self.output()?,
            live: self.live()?,
            record_ops,
            report: self.report.clone(),
            record_ops_for_report,
            show_progress: true,
            trace: self.trace,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_alone_is_every_call_and_takes_reads_after_an_equals() {
        let direct = |args: &[&str]| {
            let all = [["x", "--target", "d"].as_slice(), args].concat();
            let cli = Cli::parse_from(all);
            (cli.trace.clone(), cli.into_options().unwrap().calls.direct)
        };
        assert_eq!(direct(&["t"]).1, DirectIo::Off);
        // A trace named after `--direct` is the trace, not its value.
        assert_eq!(direct(&["--direct", "t"]), ("t".into(), DirectIo::All));
        assert_eq!(direct(&["t", "--direct=reads"]).1, DirectIo::Reads);
        assert!(!DirectIo::Reads.covers(true) && DirectIo::Reads.covers(false));
    }

    #[test]
    fn options_are_checked() {
        let o = Cli::parse_from([
            "x",
            "t",
            "--target",
            "d",
            "--timing",
            "0.5",
            "--phases",
            "load,checkpoint",
            "--engine",
            "io_uring",
            "--timeout",
            "2m",
        ])
        .into_options()
        .unwrap();
        assert_eq!(o.calls.timing, Timing::Scaled(0.5));
        assert_eq!(
            o.plan.phases,
            Some(vec![PhaseKind::Load, PhaseKind::Checkpoint])
        );
        assert_eq!(o.calls.engine, EngineKind::IoUring);
        assert_eq!(o.meeting.timeout, Duration::from_secs(120));
        assert_eq!(o.output, OutputFormat::Table);
        let fio = Cli::parse_from(["x", "t", "--target", "d", "--output-format", "fio"]);
        assert_eq!(fio.into_options().unwrap().output, OutputFormat::Fio);
        let json = Cli::parse_from(["x", "t", "--target", "d", "--json"]);
        assert_eq!(json.into_options().unwrap().output, OutputFormat::Json);
        let both = [
            "x",
            "t",
            "--target",
            "d",
            "--json",
            "--output-format",
            "mlperf",
        ];
        assert!(Cli::parse_from(both).into_options().is_err());
        let live = Cli::parse_from([
            "x",
            "t",
            "--target",
            "d",
            "--status-interval",
            "5s",
            "--metrics-addr",
            "127.0.0.1:9464",
            "--metrics-linger",
            "3s",
        ])
        .into_options()
        .unwrap()
        .live;
        assert_eq!(live.status_interval, Some(Duration::from_secs(5)));
        assert_eq!(live.metrics_linger, Duration::from_secs(3));
        assert_eq!(live.metrics_addr.as_deref(), Some("127.0.0.1:9464"));
        assert!(live.lines_on_stderr());
        let plan = Cli::parse_from([
            "x",
            "t",
            "--plan-only",
            "--ranks",
            "8",
            "--data",
            "replicate",
            "--checkpoint",
            "rank0",
            "--bandwidth",
            "50GiB/s",
            "--checkpoint-bytes",
            "1GiB",
        ])
        .into_options()
        .unwrap();
        assert!(plan.plan_only);
        assert_eq!(
            plan.plan.scale.data,
            crate::plan::scale::DataMode::Replicate
        );
        assert_eq!(
            plan.plan.scale.checkpoint,
            crate::plan::scale::CheckpointMode::Rank0
        );
        assert_eq!(plan.plan.scale.bandwidth, Some(50.0 * (1u64 << 30) as f64));
        assert_eq!(plan.plan.scale.checkpoint_bytes, Some(1 << 30));
        // `--role`, as `iorepro-trace filter` spells it, is `--roles`.
        for flag in ["--roles", "--role"] {
            let o = Cli::parse_from(["x", "t", "--plan-only", flag, "code,all"]);
            assert_eq!(
                o.into_options().unwrap().plan.scope.roles,
                Role::ALL.to_vec()
            );
        }
        assert!(
            Cli::try_parse_from(["x", "t"]).is_err(),
            "--target is needed to replay"
        );
        for url in ["gs://b/p", "file:///mnt/x"] {
            let e = Cli::parse_from(["x", "t", "--target", url])
                .into_options()
                .unwrap_err()
                .to_string();
            assert!(e.contains("targets are not served"), "{url}: {e}");
        }
        let s3 = Cli::parse_from([
            "x",
            "t",
            "--target",
            "s3://bench/run1/",
            "--s3-read",
            "whole",
        ])
        .into_options()
        .unwrap();
        let Some(Target::Bucket(o)) = s3.target else {
            panic!("an s3:// target is a bucket, never a local path")
        };
        assert_eq!((o.bucket.as_str(), o.prefix.as_str()), ("bench", "run1"));
        assert_eq!((o.read, o.part_size), (ReadMode::Whole, 8 << 20));
        for bad in [
            ["s3://Bad_Bucket/x", "--s3-retries", "1"],
            ["s3://bench/p", "--s3-part-size", "1MiB"],
            ["s3://bench/p", "--s3-part-size", "6GiB"],
            ["s3://bench/p", "--drop-caches", "--direct"],
        ] {
            let args = [["x", "t", "--target"].as_slice(), &bad].concat();
            assert!(Cli::parse_from(args).into_options().is_err(), "{bad:?}");
        }
        for dir in ["s3:", "./s3:/x", "/mnt/a://b", "d"] {
            assert!(url_scheme(Path::new(dir)).is_none(), "{dir}");
        }
        for bad in [
            ["--phases", "train"],
            ["--timing", "slow"],
            ["--engine", "aio"],
            ["--prepare", "maybe"],
            ["--timeout", "5 parsecs"],
            ["--output-format", "csv"],
            ["--status-interval", "1ms"],
            ["--metrics-linger", "later"],
            ["--data", "stripe"],
            ["--checkpoint", "never"],
            ["--bandwidth", "fast"],
            ["--bandwidth", "0"],
            ["--bandwidth", "0GiB/s"],
            ["--write-bandwidth", "0"],
        ] {
            let args = ["x", "t", "--target", "d", bad[0], bad[1]];
            // Words of a fixed list are refused by clap, the rest when checked.
            let refused = match Cli::try_parse_from(args) {
                Ok(cli) => cli.into_options().is_err(),
                Err(e) => e.kind() == clap::error::ErrorKind::InvalidValue,
            };
            assert!(refused, "{bad:?}");
        }
        for (flag, words) in [
            ("--engine", &["auto", "psync", "io_uring", "io-uring"][..]),
            ("--prepare", &["auto", "only", "skip"]),
            ("--data", &["shard", "replicate"]),
            ("--batch", &["per-rank", "global"]),
            ("--checkpoint", &["auto", "sharded", "rank0", "replicate"]),
            ("--output-format", &["table", "json", "fio", "mlperf"]),
        ] {
            for word in words {
                let args = ["x", "t", "--target", "d", flag, word];
                assert!(Cli::try_parse_from(args).is_ok(), "{flag} {word}");
            }
        }
    }
}
