//! Where a trace's reads came from: the storage or the page cache, from the
//! rows' `storage_bytes` (see `iorepro_format::schema::COL_STORAGE_BYTES`).
//! The summary gives the whole trace's share and each reading phase's, and
//! one warning where the job read its data from storage once and from
//! memory afterwards: its later passes then say nothing of the storage, and
//! a replay at N on nodes that do not hold the data asks the storage for
//! every one of them.

use std::fmt::Write;

use serde::Serialize;

use iorepro_format::units::fmt_bytes;

use iorepro_format::error::TraceResult;
use iorepro_format::reader::TraceReader;

use crate::activity::{Activity, Runs};
use crate::overview::{tally_with_roles, Overview};
use crate::part_counters::{Depth, FileStats};
use crate::phases::{Phase, PhaseKind};
use crate::timeline::BASE_WINDOW_NS;

/// A reading phase counts as served from storage at or above this share of
/// its bytes...
const FROM_STORAGE_SHARE: f64 = 0.5;
/// ... and as served from memory below this one.
const FROM_MEMORY_SHARE: f64 = 0.2;
/// Phases that read less than this are too small to judge.
const JUDGED_BYTES: u64 = 1 << 20;

/// Per file read, the bytes read and those the storage served, where the
/// trace says (`None` where it does not): a full tally's pass, made only
/// for traces whose segments hold the column.
pub fn per_file(reader: &TraceReader) -> TraceResult<Option<Vec<FileStats>>> {
    if !reader.may_hold_storage() {
        return Ok(None);
    }
    let (t, _) = tally_with_roles(reader, Depth::Full, BASE_WINDOW_NS)?;
    let mut files: Vec<FileStats> = t
        .files()
        .into_iter()
        .filter(|f| f.read_bytes > 0 && f.storage_read_bytes.is_some())
        .collect();
    files.sort_by(|a, b| b.read_bytes.cmp(&a.read_bytes).then(a.path.cmp(&b.path)));
    Ok(Some(files))
}

/// The files that read most, with what the storage served of each.
pub fn render_files(files: &[FileStats], most: usize) -> String {
    let mut s = format!(
        "{:>14} {:>14} {:>11}  file\n",
        "read", "from storage", "page cache"
    );
    for f in files.iter().take(most) {
        let stored = f.storage_read_bytes.unwrap_or(0);
        let _ = writeln!(
            s,
            "{:>14} {:>14} {:>9.1} %  {}",
            fmt_bytes(f.read_bytes as f64),
            fmt_bytes(stored as f64),
            (1.0 - share(stored, f.read_bytes)) * 100.0,
            f.path
        );
    }
    if files.len() > most {
        let _ = writeln!(
            s,
            "  ... {} more files (--json lists all)",
            files.len() - most
        );
    }
    s
}

/// The share of `read` bytes the storage served, in 0..=1.
fn share(from_storage: u64, read: u64) -> f64 {
    if read == 0 {
        return 0.0;
    }
    (from_storage as f64 / read as f64).min(1.0)
}

/// The phases that read data, with what the storage served of each.
fn reading(phases: &[Phase]) -> impl Iterator<Item = (&Phase, u64)> {
    phases.iter().filter_map(|p| {
        let reads = matches!(p.kind, PhaseKind::Load | PhaseKind::Read);
        (reads && p.read_bytes > 0).then_some((p, p.storage_read_bytes?))
    })
}

/// Whether the capture of `reader` followed the kernel's write-back of the
/// job's files (its manifest's `capabilities.hooks` names the hook): then
/// no `writeback` row means none was written back, not that none was seen.
pub fn follows_write_back(reader: &TraceReader) -> bool {
    let caps = reader.manifest().extra.get("capabilities");
    let hooks = caps.and_then(|c| c.get("hooks")).and_then(|h| h.as_array());
    hooks.is_some_and(|h| {
        h.iter()
            .any(|x| x.as_str().is_some_and(|x| x.ends_with(WRITE_BACK_HOOK)))
    })
}

/// The tracepoint the collector follows write-back on, as its hooks end.
const WRITE_BACK_HOOK: &str = "writeback:writeback_single_inode";

/// The summary's lines: what reached the device of what the job wrote (in
/// its own calls, and by write-back later), and of each save's bytes, the
/// reads' share from storage,
/// a line per reading phase, and the warning where it applies. Empty for a
/// trace that does not say.
pub fn render(o: &Overview, saves: &[SaveOnDevice]) -> String {
    let mut s = String::new();
    if let Some(sent) = o.storage_write_bytes.filter(|_| o.write_bytes > 0) {
        let later = match o.storage_written_back_bytes {
            Some(back) => {
                let unseen = o.write_bytes.saturating_sub(sent + back);
                format!(
                    "; {} written back by the kernel later, {} not seen on the device by the \
                     capture's end",
                    fmt_bytes(back as f64),
                    fmt_bytes(unseen as f64)
                )
            }
            None => "; write-back (not followed) sends the rest later".to_string(),
        };
        let _ = writeln!(
            s,
            "sent to the device {} of {} written by the job's own calls (fsync, O_DIRECT){later}",
            fmt_bytes(sent as f64),
            fmt_bytes(o.write_bytes as f64),
        );
    }
    s.push_str(&render_saves(saves));
    s.push_str(&render_reads(o.read_bytes, o.storage_read_bytes, &o.phases));
    s
}

/// What reached the device of one save's bytes: in the job's own calls
/// during the save, and by the kernel's write-back afterwards.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SaveOnDevice {
    /// The checkpoint phase's edges, seconds from the trace's first call.
    pub start_s: f64,
    pub end_s: f64,
    pub write_bytes: u64,
    /// Sent to the device by the job's writes and syncs inside the save
    /// (fsync, O_DIRECT); `null` where the trace does not say.
    pub in_calls_bytes: Option<u64>,
    /// Written back by the kernel from the save's start until the next
    /// save's (the trace's end for the last): the save's pages, and those
    /// of any other file the job wrote meanwhile; `null` where the capture
    /// did not follow write-back.
    pub written_back_bytes: Option<u64>,
}

/// Each save's [`SaveOnDevice`], where the trace says anything of it; empty
/// otherwise. `written_back`: whether a capture that followed write-back
/// and saw none means 0.
pub fn saves_on_device(
    phases: &[Phase],
    activity: &Activity,
    follows_write_back: bool,
) -> Vec<SaveOnDevice> {
    if activity.to_storage.is_none() && activity.written_back.is_none() && !follows_write_back {
        return Vec::new();
    }
    let saves: Vec<&Phase> = phases
        .iter()
        .filter(|p| p.kind == PhaseKind::Checkpoint)
        .collect();
    let within = |runs: &Option<Runs>, from: i64, to: i64| {
        runs.as_ref().map(|r| {
            let r = r.runs();
            r.iter()
                .filter(|s| from <= s.start && s.start < to)
                .map(|s| s.bytes)
                .sum::<u64>()
        })
    };
    saves
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let next = saves.get(i + 1).map_or(i64::MAX, |n| n.start_unix_ns);
            let back = within(&activity.written_back, p.start_unix_ns, next);
            SaveOnDevice {
                start_s: p.start_s,
                end_s: p.end_s,
                write_bytes: p.write_bytes,
                in_calls_bytes: within(&activity.to_storage, p.start_unix_ns, p.end_unix_ns),
                written_back_bytes: back.or(follows_write_back.then_some(0)),
            }
        })
        .collect()
}

/// The most saves the summary lists one by one.
const SAVES_LISTED: usize = 10;

/// A line per save of what reached the device (at most [`SAVES_LISTED`]).
fn render_saves(saves: &[SaveOnDevice]) -> String {
    let mut s = String::new();
    let known = |b: Option<u64>| b.map_or("-".to_string(), |b| fmt_bytes(b as f64));
    for v in saves.iter().take(SAVES_LISTED) {
        let span = format!("{:.3}-{:.3} s", v.start_s, v.end_s);
        let _ = writeln!(
            s,
            "  save  {span:<19}  wrote {:>10}  sent in its calls {:>10}  written back later {:>10}",
            fmt_bytes(v.write_bytes as f64),
            known(v.in_calls_bytes),
            known(v.written_back_bytes),
        );
    }
    if saves.len() > SAVES_LISTED {
        let _ = writeln!(
            s,
            "  ... {} more saves (--json lists all)",
            saves.len() - SAVES_LISTED
        );
    }
    s
}

/// The reads' lines of [`render`].
fn render_reads(read_bytes: u64, from_storage: Option<u64>, phases: &[Phase]) -> String {
    let mut s = String::new();
    let Some(from_storage) = from_storage else {
        return s;
    };
    let _ = writeln!(
        s,
        "from storage {} of {} read ({:.1} % served by the page cache)",
        fmt_bytes(from_storage as f64),
        fmt_bytes(read_bytes as f64),
        (1.0 - share(from_storage, read_bytes)) * 100.0
    );
    for (p, b) in reading(phases) {
        let span = format!("{:.3}-{:.3} s", p.start_s, p.end_s);
        let _ = writeln!(
            s,
            "  {:<5} {span:<19}  read {:>10}  from storage {:>10}  ({:.1} % page cache)",
            p.kind.as_str(),
            fmt_bytes(p.read_bytes as f64),
            fmt_bytes(b as f64),
            (1.0 - share(b, p.read_bytes)) * 100.0
        );
    }
    if let Some(w) = memory_warning(phases) {
        let _ = writeln!(s, "{w}");
    }
    s
}

/// One line where the first judged reading phase came from storage and
/// later ones from memory; `None` otherwise.
pub fn memory_warning(phases: &[Phase]) -> Option<String> {
    let judged: Vec<(&Phase, u64)> = reading(phases)
        .filter(|(p, _)| p.read_bytes >= JUDGED_BYTES)
        .collect();
    let (first, first_b) = *judged.first()?;
    if share(first_b, first.read_bytes) < FROM_STORAGE_SHARE {
        return None;
    }
    let later: Vec<&(&Phase, u64)> = judged[1..]
        .iter()
        .filter(|(p, b)| share(*b, p.read_bytes) < FROM_MEMORY_SHARE)
        .collect();
    if later.is_empty() {
        return None;
    }
    let read: u64 = later.iter().map(|(p, _)| p.read_bytes).sum();
    let served: u64 = later.iter().map(|(_, b)| *b).sum();
    Some(format!(
        "warning: the page cache served the reads after the first pass: {} of {} later reading \
         phases ({} read) took {:.1} % from storage, the first {:.1} %; nodes that do not hold \
         the data in memory read it all from storage (replay with --evict-reads or --direct=reads)",
        later.len(),
        judged.len() - 1,
        fmt_bytes(read as f64),
        share(served, read) * 100.0,
        share(first_b, first.read_bytes) * 100.0
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(kind: PhaseKind, start_s: f64, read: u64, from_storage: Option<u64>) -> Phase {
        Phase {
            kind,
            start_s,
            end_s: start_s + 1.0,
            read_bytes: read,
            write_bytes: 0,
            max_writers: 0,
            metadata_calls: 0,
            storage_read_bytes: from_storage,
            start_unix_ns: 0,
            end_unix_ns: 0,
        }
    }

    const MIB: u64 = 1 << 20;

    /// Each save takes the write-back from its start to the next save's,
    /// and the bytes its own calls sent inside it; a capture that followed
    /// write-back and saw none says 0, one that did not says nothing.
    #[test]
    fn a_save_takes_the_write_back_until_the_next_save() {
        const S: i64 = 1_000_000_000;
        let save = |at: i64| Phase {
            kind: PhaseKind::Checkpoint,
            write_bytes: 64 * MIB,
            start_unix_ns: at * S,
            end_unix_ns: at * S + S,
            ..phase(PhaseKind::Checkpoint, at as f64, 0, None)
        };
        let phases = [
            phase(PhaseKind::Idle, 0.0, 0, None),
            save(10),
            phase(PhaseKind::Idle, 11.0, 0, None),
            save(60),
        ];
        let mut a = Activity::default();
        a.observe_device_writes(10 * S + S / 2, 10 * S + S / 2, 4096);
        a.observe_written_back(40 * S, 32 * MIB as i64);
        a.observe_written_back(59 * S, 32 * MIB as i64);
        a.observe_written_back(61 * S, 64 * MIB as i64);
        a.finish();
        let saves = saves_on_device(&phases, &a, true);
        let got: Vec<_> = saves
            .iter()
            .map(|s| (s.in_calls_bytes, s.written_back_bytes))
            .collect();
        assert_eq!(
            got,
            [(Some(4096), Some(64 * MIB)), (Some(0), Some(64 * MIB))]
        );
        let mut none_back = Activity::default();
        none_back.observe_device_writes(10 * S, 10 * S, 0);
        let saves = saves_on_device(&phases, &none_back, true);
        assert_eq!(saves[0].written_back_bytes, Some(0));
        let saves = saves_on_device(&phases, &none_back, false);
        assert_eq!(saves[0].written_back_bytes, None);
        assert!(saves_on_device(&phases, &Activity::default(), false).is_empty());
        let text = render_saves(&saves);
        assert!(text.contains("written back later          -"), "{text}");
    }

    #[test]
    fn a_job_that_reads_from_memory_after_its_first_pass_is_named() {
        let phases = [
            phase(PhaseKind::Load, 0.0, 256 * MIB, Some(256 * MIB)),
            phase(PhaseKind::Idle, 1.0, 0, Some(0)),
            phase(PhaseKind::Read, 2.0, 256 * MIB, Some(0)),
        ];
        let text = render_reads(512 * MIB, Some(256 * MIB), &phases);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[0].contains("50.0 % served by the page cache"),
            "{text}"
        );
        assert!(lines[1].contains("(0.0 % page cache)"), "{text}");
        assert!(lines[2].contains("(100.0 % page cache)"), "{text}");
        assert!(
            lines[3].starts_with("warning: the page cache served"),
            "{text}"
        );
    }

    #[test]
    fn storage_all_along_or_no_word_at_all_warns_of_nothing() {
        let cold = [
            phase(PhaseKind::Load, 0.0, 256 * MIB, Some(250 * MIB)),
            phase(PhaseKind::Read, 2.0, 256 * MIB, Some(240 * MIB)),
        ];
        assert_eq!(memory_warning(&cold), None);
        assert_eq!(render_reads(512 * MIB, None, &cold), "");
    }
}
