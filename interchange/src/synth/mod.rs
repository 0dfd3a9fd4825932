//! Synthetic traces from a small workload description (DLIO-like): ranks read
//! a dataset in steps separated by compute, all ranks meet at each step (as
//! data-parallel training does at its all-reduce), and every K steps they write
//! a checkpoint together. Used by tests, benchmarks and users who cannot capture.

use std::path::Path;

use serde::Deserialize;

use iorepro_format::error::{one_line, TraceError, TraceResult};
use iorepro_format::manifest::{Manifest, Source};
use iorepro_format::units::{parse_duration_ns, parse_size, GIB};
use iorepro_format::writer::{TraceWriter, WriterOptions};

mod generate;
use generate::Generator;

/// The workload file, as written by users (sizes and durations as strings).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    #[serde(default = "default_name")]
    pub name: String,
    pub ranks: u32,
    /// Rank of this node's first rank, for one node of a multi-node job.
    #[serde(default)]
    pub first_rank: u32,
    #[serde(default = "default_host")]
    pub host: String,
    #[serde(default)]
    pub seed: u64,
    /// Wall-clock start of the trace (Unix ns); fixed so outputs are reproducible.
    #[serde(default = "default_start")]
    pub start_unix_ns: i64,
    pub dataset: DatasetFile,
    pub training: TrainingFile,
    #[serde(default)]
    pub load: Option<LoadFile>,
    #[serde(default)]
    pub checkpoint: Option<CheckpointFile>,
    #[serde(default)]
    pub storage: StorageFile,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetFile {
    #[serde(default = "default_data_dir")]
    pub dir: String,
    pub files: u32,
    pub file_size: String,
    pub read_size: String,
    #[serde(default = "default_pattern")]
    pub pattern: String,
    /// Loader worker processes per rank (their reads carry the rank).
    #[serde(default)]
    pub loader_workers: u32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingFile {
    pub steps: u32,
    pub compute_time: String,
    pub reads_per_step: u32,
}

/// An initial read burst (model weights, dataset index) before training starts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadFile {
    pub bytes_per_rank: String,
    #[serde(default = "default_load_read_size")]
    pub read_size: String,
    #[serde(default = "default_load_path")]
    pub path: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointFile {
    pub every: u32,
    pub bytes_per_rank: String,
    pub write_size: String,
    #[serde(default = "default_true")]
    pub fsync: bool,
    #[serde(default = "default_ckpt_dir")]
    pub dir: String,
}

/// How fast the modelled storage is, per rank; sets op durations in the trace.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageFile {
    #[serde(default = "default_read_bw")]
    pub read_gib_s: f64,
    #[serde(default = "default_write_bw")]
    pub write_gib_s: f64,
    #[serde(default = "default_latency")]
    pub latency: String,
}

impl Default for StorageFile {
    fn default() -> Self {
        StorageFile {
            read_gib_s: default_read_bw(),
            write_gib_s: default_write_bw(),
            latency: default_latency(),
        }
    }
}

fn default_name() -> String {
    "synthetic".into()
}
fn default_host() -> String {
    "synth-node".into()
}
fn default_start() -> i64 {
    1_767_225_600_000_000_000 // 2026-01-01T00:00:00Z
}
fn default_data_dir() -> String {
    "/data/train".into()
}
fn default_pattern() -> String {
    "sequential".into()
}
fn default_load_read_size() -> String {
    "4MiB".into()
}
fn default_load_path() -> String {
    "/models/pretrained.bin".into()
}
fn default_ckpt_dir() -> String {
    "/checkpoints".into()
}
fn default_true() -> bool {
    true
}
fn default_read_bw() -> f64 {
    2.0
}
fn default_write_bw() -> f64 {
    1.0
}
fn default_latency() -> String {
    "50us".into()
}

/// Most events one workload may make (about a terabyte of trace).
pub const MAX_SYNTH_EVENTS: u64 = 10_000_000_000;
/// Most events of one phase (all ranks' load, step or checkpoint), which the
/// generator holds in memory to sort them by time: about 1.5 GiB.
pub const MAX_PHASE_EVENTS: u64 = 1 << 23;
pub const MAX_RANKS: u32 = 1 << 20;
pub const MAX_LOADER_WORKERS: u32 = 1 << 16;
/// Timestamps are i64 nanoseconds since 1970; keep a margin below i64::MAX
/// (year 2262) for the bound's rounding.
const LAST_TIMESTAMP_NS: f64 = 9.0e18;

/// A checked workload with sizes and durations in bytes and nanoseconds.
#[derive(Debug, Clone)]
pub struct Workload {
    pub name: String,
    pub ranks: u32,
    pub first_rank: u32,
    pub host: String,
    pub seed: u64,
    pub start_unix_ns: i64,
    pub data_dir: String,
    pub files: u32,
    pub file_size: u64,
    pub read_size: u64,
    pub random: bool,
    pub loader_workers: u32,
    pub steps: u32,
    pub compute_ns: u64,
    pub reads_per_step: u32,
    pub load: Option<(u64, u64, String)>,
    pub checkpoint: Option<Checkpoint>,
    pub read_bps: f64,
    pub write_bps: f64,
    pub latency_ns: u64,
}

#[derive(Debug, Clone)]
pub struct Checkpoint {
    pub every: u32,
    pub bytes_per_rank: u64,
    pub write_size: u64,
    pub fsync: bool,
    pub dir: String,
}

impl Workload {
    pub fn load(path: &Path) -> TraceResult<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| TraceError::io(path, e))?;
        Self::parse(&text).map_err(|problem| TraceError::Workload {
            path: path.to_path_buf(),
            problem,
        })
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let f: WorkloadFile = toml::from_str(text).map_err(|e| one_line(&e.to_string()))?;
        let size = |what: &str, s: &str| parse_size(s).map_err(|e| format!("{what}: {e}"));
        let dur = |what: &str, s: &str| parse_duration_ns(s).map_err(|e| format!("{what}: {e}"));
        let w = Workload {
            name: f.name,
            ranks: f.ranks,
            first_rank: f.first_rank,
            host: f.host,
            seed: f.seed,
            start_unix_ns: f.start_unix_ns,
            data_dir: f.dataset.dir,
            files: f.dataset.files,
            file_size: size("dataset.file_size", &f.dataset.file_size)?,
            read_size: size("dataset.read_size", &f.dataset.read_size)?,
            random: match f.dataset.pattern.as_str() {
                "sequential" => false,
                "random" => true,
                p => {
                    return Err(format!(
                        "dataset.pattern: `{p}` is not `sequential` or `random`"
                    ))
                }
            },
            loader_workers: f.dataset.loader_workers,
            steps: f.training.steps,
            compute_ns: dur("training.compute_time", &f.training.compute_time)?,
            reads_per_step: f.training.reads_per_step,
            load: match f.load {
                None => None,
                Some(l) => Some((
                    size("load.bytes_per_rank", &l.bytes_per_rank)?,
                    size("load.read_size", &l.read_size)?,
                    l.path,
                )),
            },
            checkpoint: match f.checkpoint {
                None => None,
                Some(c) => Some(Checkpoint {
                    every: c.every,
                    bytes_per_rank: size("checkpoint.bytes_per_rank", &c.bytes_per_rank)?,
                    write_size: size("checkpoint.write_size", &c.write_size)?,
                    fsync: c.fsync,
                    dir: c.dir,
                }),
            },
            read_bps: f.storage.read_gib_s * GIB,
            write_bps: f.storage.write_gib_s * GIB,
            latency_ns: dur("storage.latency", &f.storage.latency)?,
        };
        w.check()?;
        Ok(w)
    }

    fn check(&self) -> Result<(), String> {
        let positive = [
            ("ranks", self.ranks as u64),
            ("dataset.files", self.files as u64),
            ("dataset.file_size", self.file_size),
            ("dataset.read_size", self.read_size),
        ];
        for (what, v) in positive {
            if v == 0 {
                return Err(format!("{what} must be positive"));
            }
        }
        if self.read_size > self.file_size {
            return Err("dataset.read_size is larger than dataset.file_size".into());
        }
        if !(self.read_bps > 0.0 && self.write_bps > 0.0) {
            return Err("storage.read_gib_s and storage.write_gib_s must be positive".into());
        }
        if let Some(c) = &self.checkpoint {
            if c.every == 0 || c.write_size == 0 || c.bytes_per_rank == 0 {
                return Err(
                    "checkpoint.every, bytes_per_rank and write_size must be positive".into(),
                );
            }
        }
        if let Some((bytes, rs, _)) = &self.load {
            if *bytes == 0 || *rs == 0 {
                return Err("load.bytes_per_rank and load.read_size must be positive".into());
            }
        }
        for p in [&self.data_dir] {
            if !p.starts_with('/') {
                return Err(format!("`{p}`: paths in a workload are absolute"));
            }
        }
        self.check_size()
    }

    /// Keeps a hostile or mistyped workload from exhausting memory, disk or
    /// the 64-bit clock: the generator holds one phase of every rank in memory
    /// and timestamps are i64 nanoseconds.
    fn check_size(&self) -> Result<(), String> {
        if self.ranks > MAX_RANKS {
            return Err(format!("ranks = {} is more than {MAX_RANKS}", self.ranks));
        }
        if self.first_rank > MAX_RANKS {
            return Err(format!(
                "first_rank = {} is more than {MAX_RANKS}",
                self.first_rank
            ));
        }
        if self.loader_workers > MAX_LOADER_WORKERS {
            return Err(format!(
                "dataset.loader_workers = {} is more than {MAX_LOADER_WORKERS}",
                self.loader_workers
            ));
        }
        let mut sizes = vec![
            ("dataset.file_size", self.file_size),
            ("dataset.read_size", self.read_size),
        ];
        if let Some((bytes, rs, _)) = &self.load {
            sizes.extend([("load.bytes_per_rank", *bytes), ("load.read_size", *rs)]);
        }
        if let Some(c) = &self.checkpoint {
            sizes.extend([
                ("checkpoint.bytes_per_rank", c.bytes_per_rank),
                ("checkpoint.write_size", c.write_size),
            ]);
        }
        for (what, v) in sizes {
            if v > i64::MAX as u64 {
                return Err(format!(
                    "{what}: {v} bytes does not fit a trace's 64-bit offsets"
                ));
            }
        }
        let (load, step, ckpt) = self.events_per_rank_phase();
        let phase = load.max(step).max(ckpt) * u128::from(self.ranks);
        if phase > u128::from(MAX_PHASE_EVENTS) {
            return Err(format!(
                "one phase would hold {phase} events, more than {MAX_PHASE_EVENTS}; use larger read or write sizes or fewer ranks"
            ));
        }
        let total = self.events_u128();
        // Steps with no reads still cost a pass over every rank.
        let passes = u128::from(self.steps) * u128::from(self.ranks);
        if total.max(passes) > u128::from(MAX_SYNTH_EVENTS) {
            return Err(format!(
                "would make {total} events in {} steps of {} ranks, more than {MAX_SYNTH_EVENTS}",
                self.steps, self.ranks
            ));
        }
        let end = self.start_unix_ns as f64 + self.span_ns_bound();
        if end.is_nan() || end >= LAST_TIMESTAMP_NS {
            return Err(
                "the trace would end past the year 2255 (start_unix_ns, compute_time, storage speed or latency too large)"
                    .into(),
            );
        }
        Ok(())
    }

    /// Events the trace will hold (saturating at u64::MAX).
    pub fn events(&self) -> u64 {
        self.events_u128().try_into().unwrap_or(u64::MAX)
    }

    fn events_u128(&self) -> u128 {
        let (load, step, ckpt) = self.events_per_rank_phase();
        let per_rank = load + u128::from(self.steps) * step + u128::from(self.checkpoints()) * ckpt;
        per_rank * u128::from(self.ranks)
    }

    /// Events one rank makes in the load phase, one step and one checkpoint.
    fn events_per_rank_phase(&self) -> (u128, u128, u128) {
        let ops = |bytes: u64, size: u64| u128::from(bytes.div_ceil(size.max(1)));
        let load = self.load.as_ref().map_or(0, |(b, rs, _)| 2 + ops(*b, *rs)); // open, reads, close
        let step = 3 * u128::from(self.reads_per_step); // open, read, close each
        let ckpt = self.checkpoint.as_ref().map_or(0, |c| {
            2 + u128::from(c.fsync) + ops(c.bytes_per_rank, c.write_size)
        });
        (load, step, ckpt)
    }

    fn checkpoints(&self) -> u32 {
        self.checkpoint
            .as_ref()
            .map_or(0, |c| self.steps / c.every.max(1))
    }

    /// An upper bound of the trace's length in nanoseconds (the generator's
    /// fixed op times, its ±10% I/O and ±3% compute jitter, and phase skew).
    fn span_ns_bound(&self) -> f64 {
        let lat = self.latency_ns as f64;
        let io = |ops: f64, bytes: f64, bps: f64| 1.1 * (ops * lat + bytes / bps * 1e9);
        let phase_gap = 21_000.0;
        let load = self.load.as_ref().map_or(0.0, |(b, rs, _)| {
            46_000.0 + io(b.div_ceil(*rs) as f64, *b as f64, self.read_bps)
        });
        let reads = f64::from(self.reads_per_step);
        let step = phase_gap
            + reads * 11_000.0
            + io(reads, reads * self.read_size as f64, self.read_bps)
            + self.compute_ns as f64 * 1.03;
        let ckpt = self.checkpoint.as_ref().map_or(0.0, |c| {
            56_000.0
                + 11.0 * lat
                + io(
                    c.bytes_per_rank.div_ceil(c.write_size) as f64,
                    c.bytes_per_rank as f64,
                    self.write_bps,
                )
        });
        load + f64::from(self.steps) * step + f64::from(self.checkpoints()) * ckpt
    }

    /// Writes the synthetic trace; returns its manifest.
    pub fn write_trace(&self, out: &Path, mut opts: WriterOptions) -> TraceResult<Manifest> {
        opts.source = Source::Synth;
        let mut w = TraceWriter::create(out, opts)?;
        w.set_extra("workload", serde_json::json!(self.name));
        Generator::new(self).run(&mut |row| w.push(row))?;
        w.finish()
    }
}
