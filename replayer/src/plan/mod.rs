//! Plan: what the replay will do, settled from the trace before a file is
//! touched.
//!
//! [`survey`] reads the trace once for its ranks, its files (with
//! [`presence`]: whether each existed when the job began, and
//! [`pathforms`]: what the spellings of its path tell) and its phases;
//! [`scope`] decides which files' calls are replayed; [`rank_map`] which
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
pub mod ops;
pub mod pathforms;
pub mod presence;
pub mod rank_map;
pub mod scale;
pub mod scope;
pub mod stream;
pub mod survey;
pub mod timing;
