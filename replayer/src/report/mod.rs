//! Report: what the ranks measured, merged and printed. The last room.
//!
//! [`stats`] is what each rank measured (op counts, bytes and latency
//! histograms, phase times, when it met the others, its requests to an
//! object store), kept by its worker
//! and carried between processes as JSON; [`summary`] merges every rank's
//! into the [`summary::Report`] ([`request_table`]: the requests to an
//! object-storage target; [`latency`]: percentiles as reported); [`output`] prints it as a table, our JSON,
//! or fio's or MLPerf Storage's layout; [`record`] writes what the replay
//! did as a trace (`--record-ops`), the ranks' rows put in one time order
//! by [`record_merge`].
//!
//! [`training`] gives the job's figures (epochs, AU as MLPerf Storage
//! computes it in [`au`], saves); [`storage`] how many of the bytes the
//! storage itself served; [`burst`] the reads per 100 ms window;
//! [`verdict`] the answer in one look, printed last; [`sweep`] what
//! `--plan-only` prints, one plan or a sizing sweep; [`page`] the replay
//! as one offline HTML page (`--report`).
//!
//! Hands the report to [`crate::run`](mod@crate::run), which returns it to the command
//! line to print.
/// AU as MLPerf Storage computes it (the rule lives with the plan's what-if).
pub use crate::plan::scale::au;
pub mod burst;
pub mod latency;
pub mod output;
pub mod page;
pub mod record;
pub mod record_merge;
pub mod request_table;
pub mod stats;
pub mod storage;
pub mod summary;
pub mod sweep;
pub mod training;
pub mod verdict;
