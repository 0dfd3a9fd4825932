//! Command-line options of `iorepro-collect`, and their validation into what
//! to trace ([`Target`]) and how ([`CaptureOptions`]).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use iorepro_format::host::is_root;
use iorepro_format::keyed_names::{Anonymizer, Key};
use iorepro_telemetry::{parse_duration, parse_interval, LiveOptions};

use crate::error::{CollectError, CollectResult};

#[derive(Debug, Parser)]
#[command(
    name = "iorepro-collect",
    version,
    about = "Capture the file I/O of a job (and all its descendants) with eBPF into an iorepro trace",
    after_help = "Needs root, or CAP_BPF + CAP_PERFMON (+ CAP_SETUID/CAP_SETGID for --user).\n\
                  Examples:\n  iorepro-collect --out trace -- python train.py\n  \
                  iorepro-collect --out trace --pid 4242 --duration 10m"
)]
pub struct Opts {
    /// Trace directory to create (must not exist or be empty).
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// Keep only files under this prefix (repeatable).
    #[arg(long = "path-prefix", value_name = "P")]
    pub path_prefix: Vec<String>,
    /// Attach to a running process and its descendants.
    #[arg(long, conflicts_with = "cgroup")]
    pub pid: Option<u32>,
    /// Trace every process of a cgroup (v2) and its sub-cgroups, e.g. a Slurm step or a pod.
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<PathBuf>,
    /// Stop after this long (e.g. 90s, 10m).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Rows per trace segment (the most a killed collector can lose).
    #[arg(long, value_name = "N", default_value_t = 1 << 20)]
    pub segment_events: usize,
    /// Run COMMAND as this user (default under sudo: $SUDO_USER).
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// Size of the kernel-to-collector ring buffer (power of two, >= 4096).
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20)]
    pub ring_buffer_bytes: u32,
    /// Record every file type and path (pipes, sockets, /proc, /sys, /dev too).
    #[arg(long)]
    pub all_files: bool,
    /// One row per call, each with its own time and duration. By default a
    /// run of back-to-back equal-sized reads (or writes) of one thread at
    /// consecutive offsets of one file becomes one row (column `calls`),
    /// which costs the job and the collector far less.
    #[arg(long)]
    pub no_runs: bool,
    /// Do not record object-storage requests. By default every HTTP
    /// request a traced process sends on a socket (an S3 client over plain
    /// `http://`) is a row of op `request`: method, URL, range, status,
    /// bytes and times, parsed from a bounded head of the bytes (bodies
    /// are counted, never kept).
    #[arg(long)]
    pub no_requests: bool,
    /// Print a JSON status line every DUR while capturing (e.g. 5s): calls
    /// and bytes per op kind, rates and p99 latency over the interval,
    /// records lost, ring fill. To stderr unless --status-file.
    #[arg(long, value_name = "DUR", value_parser = parse_interval)]
    pub status_interval: Option<Duration>,
    /// Append the status lines to this file instead of stderr.
    #[arg(long, value_name = "PATH", requires = "status_interval")]
    pub status_file: Option<PathBuf>,
    /// Serve the same figures for Prometheus at http://HOST:PORT/metrics.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
    /// Keep serving the final figures this long after the trace is closed,
    /// so a scraper collects them (at least two scrape intervals).
    #[arg(long, value_name = "DUR", default_value = "0s", value_parser = parse_duration)]
    pub metrics_linger: Duration,
    /// With -- COMMAND: what happens to the job when tracing cannot start
    /// (a kernel that refuses the programs, no BTF, no tracefs). `run`
    /// runs the job untraced, says so, leaves no trace and exits with the
    /// job's status: a job is never lost to its tracer. `fail` exits 2
    /// without running it.
    #[arg(long, value_enum, value_name = "WHAT", default_value_t = OnLoadFailure::Run)]
    pub on_load_failure: OnLoadFailure,
    /// Hash every name the trace would hold (paths, host, thread names)
    /// with the secret key in F (HMAC-SHA256, at least 16 bytes; the key is
    /// never stored) and drop the command line: no real name is written to
    /// disk, so the trace can be handed to another team. The same key
    /// gives the same names.
    #[arg(long, value_name = "F")]
    pub anonymize_key_file: Option<PathBuf>,
    /// With --anonymize-key-file: keep the file name of the command's
    /// program (`python3`, `torchrun`); its arguments are dropped all the same.
    #[arg(long, requires = "anonymize_key_file")]
    pub keep_program_name: bool,
    /// The job to run and trace.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// What `-- COMMAND` does when the probes cannot be loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnLoadFailure {
    /// Run the job untraced.
    Run,
    /// Do not run the job; exit 2.
    Fail,
}

/// What is traced.
#[derive(Debug, Clone)]
pub enum Target {
    Command(Vec<String>),
    Pid(u32),
    Cgroup(PathBuf),
}

/// How names are hashed at capture (`--anonymize-key-file`).
#[derive(Debug, Clone)]
pub struct Anonymize {
    pub anonymizer: Anonymizer,
    pub keep_program_name: bool,
}

#[derive(Debug, Clone)]
pub struct CaptureOptions {
    pub out: PathBuf,
    pub target: Target,
    pub path_prefixes: Vec<String>,
    pub duration: Option<Duration>,
    pub segment_events: usize,
    pub user: Option<String>,
    pub ring_buffer_bytes: u32,
    pub all_files: bool,
    pub merge_runs: bool,
    pub requests: bool,
    pub on_load_failure: OnLoadFailure,
    pub live: LiveOptions,
    pub anonymize: Option<Anonymize>,
}

impl Opts {
    pub fn validate(self) -> CollectResult<CaptureOptions> {
        let usage = |m: &str| Err(CollectError::Usage(m.to_string()));
        let target = match (self.command.is_empty(), self.pid, self.cgroup) {
            (false, None, None) => Target::Command(self.command),
            (true, Some(pid), None) => Target::Pid(pid),
            (true, None, Some(cg)) => Target::Cgroup(cg),
            (true, None, None) => {
                return usage("nothing to trace: give -- COMMAND, --pid PID or --cgroup PATH")
            }
            _ => return usage("give exactly one of -- COMMAND, --pid PID, --cgroup PATH"),
        };
        if self.user.is_some() && !matches!(target, Target::Command(_)) {
            return usage("--user applies to -- COMMAND only");
        }
        let rb = self.ring_buffer_bytes;
        if rb < 4096 || !rb.is_power_of_two() {
            return usage("--ring-buffer-bytes must be a power of two of at least 4096");
        }
        if self.segment_events == 0 {
            return usage("--segment-events must be at least 1");
        }
        for p in &self.path_prefix {
            if !p.starts_with('/') {
                return Err(CollectError::Usage(format!(
                    "--path-prefix {p}: must be an absolute path"
                )));
            }
        }
        // Read before anything is made: a bad key leaves nothing behind.
        let anonymize = match &self.anonymize_key_file {
            Some(f) => Some(Anonymize {
                anonymizer: Anonymizer::new(&Key::load(f)?),
                keep_program_name: self.keep_program_name,
            }),
            None => None,
        };
        let user = match (&target, self.user) {
            (Target::Command(_), Some(u)) => Some(u),
            // Under sudo the job runs as the user who asked for it.
            (Target::Command(_), None) if is_root() => std::env::var("SUDO_USER").ok(),
            _ => None,
        };
        Ok(CaptureOptions {
            out: self.out,
            target,
            path_prefixes: self.path_prefix,
            duration: self.duration,
            segment_events: self.segment_events,
            user,
            ring_buffer_bytes: rb,
            all_files: self.all_files,
            merge_runs: !self.no_runs,
            requests: !self.no_requests,
            on_load_failure: self.on_load_failure,
            live: LiveOptions {
                status_interval: self.status_interval,
                status_file: self.status_file,
                metrics_addr: self.metrics_addr,
                metrics_linger: self.metrics_linger,
            },
            anonymize,
        })
    }
}
