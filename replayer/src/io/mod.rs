//! I/O: how calls reach the target.
pub mod buffers;
pub mod confine;
pub mod engine;
pub mod paths;
pub mod prepare;
