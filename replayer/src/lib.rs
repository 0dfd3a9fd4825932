//! Replays the file I/O of a trace, scaled to N ranks on M nodes, against a
//! target directory, and reports how the storage kept up.
//!
//! The pipeline: [`survey`] reads the trace once for its ranks, files and
//! phases (found by the trace analysis' one detector; checkpoints are where
//! all ranks meet); [`scope`] decides which files' calls are replayed, by
//! their role in the job and the form of their path ([`pathforms`]);
//! [`remap`] decides
//! which source rank each target rank replays and where its paths land under
//! the target, all resolved through [`confine`] so nothing outside it is
//! touched; [`scale`] models what N ranks of the job do (the dataset shared
//! out over them, each checkpoint in the layout the trace shows) and routes
//! each traced call to the ranks that make it; [`prepare`] creates the data files the replay reads; [`plan`]
//! streams the trace a second time into bounded per-rank channels; each rank
//! runs an [`execute::Worker`] issuing the calls through an [`engine`] (the
//! bytes from the process's [`buffers`]) on the
//! schedule of [`timing`], keeping [`stats`]; ranks meet through
//! [`rendezvous`] (threads of one process, or processes of a [`launcher`]
//! through MPI or a rendezvous directory);
//! [`report`] merges the ranks' results and [`output`] prints them (a table,
//! our JSON, fio's or MLPerf Storage's layout), [`record`] writes what was
//! done as a trace, and [`run`] ties the steps together for the [`cli`].
//! While it runs, [`live`] shows the ranks' figures so far: status lines
//! every `--status-interval`, and a Prometheus endpoint (`--metrics-addr`).

pub mod cli;
pub mod error;
pub mod execute;
pub mod io;
pub mod live;
pub mod plan;
pub mod ranks;
pub mod report;
pub mod run;

pub use cli::Options;
pub use error::{ReplayError, ReplayResult};
pub use report::summary::Report;
pub use run::{run, Outcome};
