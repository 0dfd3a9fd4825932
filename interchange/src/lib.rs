//! Traces in and out of other tools' formats, written and read through
//! the format (`iorepro-format`) alone: [`export_fio`] writes fio iologs,
//! [`export_perfetto`] trace-event JSON for ui.perfetto.dev, [`import_fio`]
//! and [`import_strace`] read fio iologs and strace output (sharing
//! `import_common` to find log files and write the result), [`import_dftracer`]
//! DFTracer's traces (its POSIX calls become rows as strace's do), [`merge`] joins
//! per-node captures into one single-directory trace, and [`synth`] makes a
//! trace from a workload description (TOML).
//!
//! Which room may import which (`cargo xtask imports --rooms` checks it):
//! each only rooms of the lines above its own, and no two files of the
//! crate import each other (`cargo xtask imports`).
//! - `import_common`, `export_fio`, `export_perfetto`, `merge`, `synth`
//! - `import_fio`, `import_strace`
//! - `import_dftracer`

pub mod export_fio;
pub mod export_perfetto;
mod import_common;
pub mod import_dftracer;
pub mod import_fio;
pub mod import_strace;
pub mod merge;
pub mod synth;
