//! The scaling model: what N ranks of the traced job would do, from a trace
//! of R ranks, and which target rank makes each traced call.
//!
//! [`roles`] tells what a file is to the job (dataset, checkpoint, other)
//! and how a checkpoint's files are laid out over the ranks; [`model`]
//! settles, once per replay, who reads the dataset and who writes each
//! checkpoint at N; [`route`] applies that to each traced call as the plan
//! streams it; [`forecast`] counts what the routed calls will do, per rank
//! and per checkpoint, and prints it before the replay (`--plan-only`
//! prints it alone).
//!
//! The defaults follow the job: the dataset is shared out over the N ranks
//! as a distributed sampler shares it (`--data shard`), so every file is
//! read as many times as in the trace, and each checkpoint keeps the layout
//! the trace shows (`--checkpoint auto`: sharded, the state's bytes once
//! over N writers; or one writer). `replicate` in either gives today's weak
//! scaling: target rank t replays source rank t mod R in full.

pub mod au;
pub mod cache;
pub mod forecast;
pub mod model;
pub mod roles;
pub mod route;
pub mod what_if;

pub use forecast::{Counted, Forecast};
pub use model::Model;
pub use route::Router;

/// How dataset reads scale (`--data`: `shard` or `replicate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DataMode {
    /// The traced reads shared out over the N ranks (strong scaling).
    #[default]
    Shard,
    /// Every target rank reads all its source rank read (weak scaling).
    Replicate,
}

/// How checkpoints scale (`--checkpoint`: `auto`, `sharded`, `rank0` or `replicate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum CheckpointMode {
    /// Each checkpoint's layout as the trace shows it.
    #[default]
    Auto,
    /// Every checkpoint split over all N ranks.
    Sharded,
    /// Every checkpoint written whole by one rank.
    Rank0,
    /// Every target rank writes what its source rank wrote.
    Replicate,
}

/// Which batch the job holds fixed when it grows (`--batch`). The
/// default holds the global batch, so every save the trace holds is made
/// at any N: the checkpoint spikes are what a replay is for, and a job
/// that saves every K steps (LLM pretraining) holds its global batch as it
/// grows. Epoch-bound saves are made as often either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum BatchMode {
    /// Each rank's batch: at N the job makes R/N of the traced steps per
    /// epoch, and a job saving every K steps saves R/N as often.
    PerRank,
    /// The global batch: at N the job makes the traced steps, each rank
    /// reading R/N of its traced rank's samples per step, and every traced
    /// save is made.
    #[default]
    Global,
}

/// The scaling choices of one replay.
#[derive(Debug, Clone, Default)]
pub struct ScaleOptions {
    pub data: DataMode,
    pub checkpoint: CheckpointMode,
    pub batch: BatchMode,
    /// Each checkpoint's total size at N, in place of the traced one (a
    /// larger model): its files keep their traced shares of it.
    pub checkpoint_bytes: Option<u64>,
    /// Storage bandwidth (bytes/s) to time each epoch and checkpoint at, in
    /// the plan.
    pub bandwidth: Option<f64>,
    /// Write bandwidth (bytes/s) to time each checkpoint at, where it is
    /// not the read bandwidth (`--write-bandwidth`; `bandwidth` otherwise).
    pub write_bandwidth: Option<f64>,
    /// The AU (percent) the plan finds the bandwidth for (`--au`).
    pub au_threshold: f64,
    /// How much of the reads at N the page cache serves (`--cache`).
    pub cache: cache::CacheMode,
}
