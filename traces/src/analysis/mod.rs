//! Offline analysis building blocks. A [`timeline::Timeline`] of bytes per
//! window is built in the one streaming pass of [`crate::summary`], next to
//! the [`histogram`] of request sizes and the [`access`] pattern tracker;
//! [`phases`] reads the timeline to find load, steady reading, checkpoints and
//! idle time, and plots and comparisons reuse both.

pub mod access;
pub mod histogram;
pub mod phases;
pub mod prefetch;
pub mod timeline;
