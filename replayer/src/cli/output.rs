//! What the command prints and writes: the plan alone or the replay, the
//! report's format, the recorded calls and the HTML page (`--plan-only`,
//! `--explain`, `--json`, `--output-format`, `--record-ops`, `--report`,
//! `--plot`), and the live figures while the ranks run (`--status-*`,
//! `--metrics-*`).

use std::path::PathBuf;

use clap::Args;
use iorepro_telemetry::{parse_duration, parse_interval};

use crate::error::{ReplayError, ReplayResult};
use crate::live::watch::LiveOptions;
use crate::report::output::OutputFormat;

#[derive(Debug, Args)]
#[command(next_help_heading = "Output and report")]
pub struct OutputArgs {
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
    /// Write the replay as a run of MLPerf Storage's results tree under DIR
    /// (DIR/training/MODEL/run/DATETIME: summary.json, per_epoch_stats.json,
    /// the workload as DLIO would run it, the log), for `mlpstorage`'s
    /// report generator and the dashboards that read its runs.
    #[arg(long, value_name = "DIR")]
    pub mlperf_results: Option<PathBuf>,
    /// The model's name in the --mlperf-results tree (default: the trace
    /// directory's name).
    #[arg(long, value_name = "NAME", requires = "mlperf_results")]
    pub mlperf_model: Option<String>,
}

impl OutputArgs {
    pub fn output(&self) -> ReplayResult<OutputFormat> {
        match (self.output_format, self.json) {
            (None, false) => Ok(OutputFormat::Table),
            (None, true) => Ok(OutputFormat::Json),
            (Some(f), true) if f != OutputFormat::Json => Err(ReplayError::Usage(
                "--json contradicts --output-format; give one of them".into(),
            )),
            (Some(f), _) => Ok(f),
        }
    }

    /// Refuses a `--report` page that cannot be written: into a directory
    /// that is not there, or of a plan alone (a replay's page); and an
    /// `--mlperf-results` tree of a plan, or in a file, or a model's name
    /// that is no directory's.
    pub fn check_report(&self) -> ReplayResult<()> {
        let usage = ReplayError::Usage;
        if let Some(dir) = &self.mlperf_results {
            if self.plan_only {
                return Err(usage(
                    "--mlperf-results writes a replay's run; --plan-only replays nothing".into(),
                ));
            }
            if dir.exists() && !dir.is_dir() {
                return Err(usage(format!(
                    "--mlperf-results {}: not a directory",
                    dir.display()
                )));
            }
        }
        if let Some(model) = &self.mlperf_model {
            let plain = !model.is_empty()
                && model
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
                && !model.starts_with('.');
            if !plain {
                return Err(usage(format!(
                    "--mlperf-model {model:?}: a model's name is letters, digits, `_`, `-` and `.` \
                     (a directory of the results tree)"
                )));
            }
        }
        let Some(page) = &self.report else {
            return Ok(());
        };
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
        Ok(())
    }

    /// Where the replay's calls are recorded, and whether that is a
    /// directory of the page's own: the page draws the replay's calls,
    /// recorded beside it when the user keeps no record of them.
    pub fn record_ops(&self) -> (Option<PathBuf>, bool) {
        let for_report = self.report.is_some() && self.record_ops.is_none();
        let dir = match for_report {
            true => Some(
                std::env::temp_dir().join(format!("iorepro-report-ops-{}", std::process::id())),
            ),
            false => self.record_ops.clone(),
        };
        (dir, for_report)
    }
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Live figures")]
pub struct LiveArgs {
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
}

impl LiveArgs {
    pub fn live(&self) -> ReplayResult<LiveOptions> {
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
}
