//! What the importers ([`super::import_fio`], [`super::import_strace`]) share:
//! finding the log files of an input directory, and writing the converted
//! rows as a trace with source `import` that records where it came from.

use std::path::{Path, PathBuf};

use iorepro_format::error::{TraceError, TraceResult};
use iorepro_format::event::EventRow;
use iorepro_format::manifest::{Manifest, Source};
use iorepro_format::writer::{TraceWriter, WriterOptions};

/// The regular files of directory `dir` that `keep` accepts, in name order;
/// an error saying `none_found` when there are none.
pub(crate) fn files_in(
    dir: &Path,
    keep: impl Fn(&Path) -> bool,
    none_found: &str,
) -> TraceResult<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| TraceError::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && keep(p))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(TraceError::invalid(dir, none_found));
    }
    Ok(files)
}

/// Writes `rows` (already in time order) to a new trace at `out`, in segments
/// of `segment_rows`, noting in the manifest the command line and that it was
/// imported from `input` written in `format`, and what that format does
/// not hold (`lacks`, where it says).
pub(crate) fn write_imported<'a>(
    out: &Path,
    segment_rows: usize,
    format: &str,
    input: &Path,
    lacks: &[&str],
    rows: impl IntoIterator<Item = EventRow<'a>>,
) -> TraceResult<Manifest> {
    let mut wopts = WriterOptions::new(Source::Import);
    wopts.segment_rows = segment_rows.max(1);
    wopts.command = Some(std::env::args().collect());
    let mut w = TraceWriter::create(out, wopts)?;
    let mut from = serde_json::json!({"format": format, "path": input.display().to_string()});
    if !lacks.is_empty() {
        from["lacks"] = serde_json::json!(lacks);
    }
    w.set_extra("imported_from", from);
    for row in rows {
        w.push(&row)?;
    }
    w.finish()
}
