//! Offline analysis. [`summary`] aggregates a trace in one streaming pass:
//! totals, the [`histogram`] of request sizes, the [`access`] pattern tracker
//! and the [`timeline`] of bytes per window, with [`prefetch`] decoding ahead
//! on a second thread; [`phases`] reads the timeline to find load, steady
//! reading, checkpoints and idle time; [`plot`] draws the timeline with its
//! phases, and [`compare`] sets two summaries side by side.

pub mod access;
pub mod compare;
pub mod histogram;
pub mod phases;
pub mod plot;
pub mod prefetch;
pub mod summary;
pub mod timeline;
