//! How the replay runs its calls: their timing and how they are made
//! (`--timing`, `--direct`, `--evict-reads`, `--engine`), how the target is
//! prepared (`--prepare`, `--drop-caches`), and where launched ranks meet
//! (`--timeout`, `--run-id`, `--rendezvous-dir`); checked into the options
//! of `execute`, `io::prepare` and `ranks::rendezvous`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use iorepro_telemetry::parse_duration;

use crate::error::{ReplayError, ReplayResult};
use crate::execute::CallOptions;
use crate::io::engine::{DirectIo, EngineKind};
use crate::io::prepare::{PrepareMode, PrepareOptions};
use crate::plan::timing::Timing;
use crate::ranks::rendezvous::MeetOptions;

#[derive(Debug, Args)]
#[command(next_help_heading = "Timing and calls")]
pub struct CallArgs {
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
}

impl CallArgs {
    pub fn calls(&self) -> ReplayResult<CallOptions> {
        Ok(CallOptions {
            timing: self
                .timing
                .parse::<Timing>()
                .map_err(|e| ReplayError::Usage(format!("--timing: {e}")))?,
            direct: self.direct,
            evict_reads: self.evict_reads,
            engine: self.engine,
        })
    }

    /// Whether a call is asked to bypass or work on the page cache, or go
    /// through io_uring: what only a directory target has.
    pub fn asks_for_a_directory(&self) -> bool {
        self.direct != DirectIo::Off || self.evict_reads || self.engine == EngineKind::IoUring
    }
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Preparing the target")]
pub struct PrepareArgs {
    /// auto (put the target in the state the traced job found: the data it
    /// reads, the paths it found, nothing where it creates a path anew),
    /// only (that, then stop), skip.
    #[arg(long, value_enum, default_value = "auto", hide_possible_values = true)]
    pub prepare: PrepareMode,
    /// Files prepared at a time by each process.
    #[arg(long, default_value_t = 4)]
    pub prepare_threads: usize,
    /// Before the replay, drop this node's page, dentry and inode caches (needs root:
    /// CAP_SYS_ADMIN). Without it, only the prepared data files are evicted.
    #[arg(long)]
    pub drop_caches: bool,
}

impl PrepareArgs {
    pub fn prepare(&self) -> PrepareOptions {
        PrepareOptions {
            mode: self.prepare,
            threads: self.prepare_threads.max(1),
            drop_caches: self.drop_caches,
        }
    }
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Rendezvous")]
pub struct MeetingArgs {
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
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(format!("`{s}`: a timeout must be positive"));
    }
    Ok(d)
}

impl MeetingArgs {
    pub fn meeting(&self) -> ReplayResult<MeetOptions> {
        Ok(MeetOptions {
            timeout: parse_timeout(&self.timeout)
                .map_err(|e| ReplayError::Usage(format!("--timeout: {e}")))?,
            run_id: self.run_id.clone(),
            dir: self.rendezvous_dir.clone(),
        })
    }
}
