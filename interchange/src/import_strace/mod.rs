//! `strace` output as a trace with source `import`, so machines without eBPF
//! can still be studied.
//!
//! Supported: `strace -f -ttt -T -y -o FILE COMMAND` (recommended), also with
//! `-tt` instead of `-ttt` (wall-clock times of day, taken as UTC on the date
//! given by `--date`, or the log file's modification date), without `-o`
//! (`[pid N]` prefixes), and `-ff -o PREFIX` (a directory of `PREFIX.PID`
//! files). `-T` gives `dur_ns` (0 without it); `-y` gives the path of every
//! descriptor and is required for reads and writes on files opened before
//! tracing began. Calls split across lines (`<unfinished ...>` /
//! `<... resumed>`) are joined, keeping the entry time.
//!
//! strace shows no file offsets for plain `read`/`write`/`readv`/`writev`, so
//! they are followed per process and descriptor from `open`, `lseek` and the
//! bytes moved (a forked child starts from its parent's positions); where a
//! position is unknown the offset is left null. Only regular files are kept
//! (absolute paths outside /proc, /sys and /dev), as the collector does.
//! strace does not know MPI ranks: `--rank` sets one for every row.

use std::path::{Path, PathBuf};

use crate::import_common::{files_in, write_imported};
use iorepro_format::error::{TraceError, TraceResult};
use iorepro_format::event::EventRow;
use iorepro_format::manifest::Manifest;

mod calls;
mod parse;

use calls::{to_row, Row};
pub use parse::{days_from_civil, parse_date};
use parse::{parse_line, Tracker};

pub struct StraceOptions {
    pub host: String,
    pub rank: Option<i32>,
    /// Days since 1970-01-01 of the capture, for `-tt` times of day.
    pub date_days: Option<i64>,
    pub segment_rows: usize,
}

fn inputs(input: &Path) -> TraceResult<Vec<(PathBuf, Option<i32>)>> {
    let meta = std::fs::metadata(input).map_err(|e| TraceError::io(input, e))?;
    let pid_of = |p: &Path| {
        p.extension()
            .and_then(|e| e.to_str())
            .and_then(|e| e.parse().ok())
    };
    if !meta.is_dir() {
        return Ok(vec![(input.to_path_buf(), pid_of(input))]);
    }
    let files = files_in(input, |_| true, "no strace output files in this directory")?;
    Ok(files
        .into_iter()
        .map(|p| {
            let pid = pid_of(&p);
            (p, pid)
        })
        .collect())
}

fn mtime_days(path: &Path) -> i64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs() as i64 / 86_400)
}

pub fn import(input: &Path, out: &Path, opts: &StraceOptions) -> TraceResult<Manifest> {
    let mut rows: Vec<Row> = Vec::new();
    let mut tracker = Tracker::default();
    let mut parsed = 0u64;
    for (file, pid) in inputs(input)? {
        let text = std::fs::read_to_string(&file).map_err(|e| TraceError::io(&file, e))?;
        let date = opts.date_days.unwrap_or_else(|| mtime_days(&file));
        tracker.last_day_ns = 0;
        for line in text.lines() {
            let mut joined = String::new();
            if let Some(call) = parse_line(line, pid.unwrap_or(0), date, &mut tracker, &mut joined)
            {
                parsed += 1;
                if let Some(r) = to_row(&call, &mut tracker) {
                    rows.push(r);
                }
            }
        }
    }
    if parsed == 0 {
        return Err(TraceError::invalid(
            input,
            "no system calls found: expected output of `strace -f -ttt -T -y` (or -tt)",
        ));
    }
    rows.sort_by_key(|r| r.ts_ns);
    let events = rows.iter().map(|r| EventRow {
        rank: opts.rank,
        ..r.as_event(&opts.host, "strace")
    });
    write_imported(out, opts.segment_rows, "strace", input, events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iorepro_format::schema::Op;

    fn call(line: &str, t: &mut Tracker) -> Option<Row> {
        let mut j = String::new();
        let c = parse_line(line, 0, 0, t, &mut j)?;
        to_row(&c, t)
    }

    #[test]
    fn follows_offsets_and_joins_split_calls() {
        let mut t = Tracker::default();
        let o = call(r#"100 1700000000.000001 openat(AT_FDCWD, "/d/a, b", O_RDONLY|O_CLOEXEC) = 3</d/a, b> <0.000010>"#, &mut t).unwrap();
        assert_eq!(
            (o.op, o.path.as_deref(), o.fd, o.dur_ns),
            (Op::Open, Some("/d/a, b"), Some(3), 10_000)
        );
        let r = call(
            r#"100 1700000000.000002 read(3</d/a, b>, "ab\"c)"..., 4096) = 4096 <0.000001>"#,
            &mut t,
        )
        .unwrap();
        assert_eq!(
            (r.op, r.offset, r.size, r.ret),
            (Op::Read, Some(0), Some(4096), 4096)
        );
        assert!(call(
            "100 1700000000.000003 read(3</d/a, b>,  <unfinished ...>",
            &mut t
        )
        .is_none());
        let r = call(
            r#"100 1700000000.000009 <... read resumed>"x", 100) = 10 <0.000005>"#,
            &mut t,
        )
        .unwrap();
        assert_eq!(
            (r.ts_ns, r.offset, r.ret),
            (1_700_000_000_000_003_000, Some(4096), 10)
        );
        let p = call(r#"[pid 101] 1700000000.00001 pwrite64(4</d/c>, "x", 1, 512) = -1 ENOSPC (No space left on device) <0.000002>"#, &mut t).unwrap();
        assert_eq!(
            (p.pid, p.op, p.offset, p.ret),
            (101, Op::Write, Some(512), -28)
        );
        assert!(call(
            r#"100 1700000000.00002 read(5<pipe:[1234]>, "", 10) = 0"#,
            &mut t
        )
        .is_none());
        assert!(call("100 1700000000.00003 +++ exited with 0 +++", &mut t).is_none());
    }

    #[test]
    fn dates() {
        assert_eq!(parse_date("1970-01-02"), Some(1));
        assert_eq!(parse_date("2026-01-01"), Some(20454));
        assert_eq!(parse_date("2026-13-01"), None);
    }
}
