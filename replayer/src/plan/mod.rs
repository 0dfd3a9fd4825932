//! Plan: what the replay will do, settled from the trace before a file is touched.
pub mod pathforms;
pub mod presence;
pub mod rank_map;
pub mod scale;
pub mod scope;
pub mod stream;
pub mod survey;
pub mod timing;
