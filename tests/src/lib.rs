//! End-to-end tests across crates.
