//! Plan: what the replay will do, settled from the trace before a file is
//! touched.
//!
//! [`requests_as_calls`] reads a job's object-storage requests as the file
//! calls they stand for, wherever the trace is read; [`survey`] reads the
//! trace once for its ranks, its files (with
//! [`presence`]: whether each existed when the job began, and
//! [`pathforms`]: what the spellings of its path tell) and its phases;
//! [`meetings`] whether its ranks met at their saves, and [`save_time`]
//! what of each save's time the storage's speed does not change; [`scope`] decides
//! which files' calls are replayed; [`rank_map`] which
//! source rank each target rank replays and which replica of the read-only
//! data it reads; [`scale`] models what N ranks of the job do and routes
//! each traced call to the ranks that make it; [`timing`] is each rank's
//! clock against the trace; [`ops`] turns the trace's rows into the calls
//! the replay makes, which [`scale`] counts and [`stream`] reads a second
//! time into bounded per-rank channels, routed by `scale`'s `Router`.
//!
//! Hands on the [`survey::Survey`] and the [`rank_map::RankMap`] (to `io`,
//! which prepares the target and resolves paths), and to each rank of
//! `execute` its [`stream::Chunk`]s of [`ops::PlannedOp`]s, made on a
//! [`timing::Schedule`]. It imports from no other room.
pub mod meetings;
pub mod ops;
pub mod pathforms;
pub mod presence;
pub mod rank_map;
pub mod requests_as_calls;
pub mod save_time;
pub mod scale;
pub mod scope;
pub mod stream;
pub mod survey;
pub mod timing;

use iorepro_analysis::phases::PhaseKind;

/// What of the trace a replay makes, and how its ranks scale: the plan's
/// share of the command line.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Which files' calls are replayed (`--roles`, `--include`, `--exclude`).
    pub scope: scope::Scope,
    /// Only the phases of these kinds (`--phases`); all when `None`.
    pub phases: Option<Vec<PhaseKind>>,
    /// Replay a trace with no calls, or one marked incomplete.
    pub allow_incomplete: bool,
    /// How the trace's R ranks become N (see [`scale`]).
    pub scale: scale::ScaleOptions,
    /// All replicas read one copy of the data (`--shared-data`).
    pub shared_data: bool,
}
