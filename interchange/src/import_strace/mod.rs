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
//! bytes moved (a forked child starts from its parent's positions, a
//! duplicated descriptor from the one it copies); where a position is
//! unknown the offset is left null. `sendfile`, `copy_file_range` and
//! `splice` are a read of their source file and a write of their
//! destination file, named by `via`, as the collector records them. Only regular files are kept
//! (absolute paths outside /proc, /sys and /dev), as the collector does.
//! strace does not know MPI ranks: `--rank` sets one for every row.

use std::path::{Path, PathBuf};

use crate::import_common::{files_in, write_imported};
use iorepro_format::error::{TraceError, TraceResult};
use iorepro_format::event::EventRow;
use iorepro_format::manifest::Manifest;

mod calls;
mod parse;

pub(crate) use calls::{to_rows, Row};
use parse::parse_line;
pub use parse::{days_from_civil, parse_date};
// Calls parsed elsewhere (DFTracer's POSIX events) become rows as strace's do.
pub(crate) use parse::{Call, Tracker};

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
                to_rows(&call, &mut tracker, &mut rows);
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
    write_imported(out, opts.segment_rows, "strace", input, &[], events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iorepro_format::schema::Op;

    fn calls(line: &str, t: &mut Tracker) -> Vec<Row> {
        let mut j = String::new();
        let mut rows = Vec::new();
        if let Some(c) = parse_line(line, 0, 0, t, &mut j) {
            to_rows(&c, t, &mut rows);
        }
        rows
    }

    fn call(line: &str, t: &mut Tracker) -> Option<Row> {
        let mut rows = calls(line, t);
        assert!(rows.len() <= 1, "{line} made {} rows", rows.len());
        rows.pop()
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

    /// One row of a copy: (via, op, path, offset, size, ret).
    type Copied = (
        Option<&'static str>,
        Op,
        String,
        Option<i64>,
        Option<i64>,
        i64,
    );

    /// The rows a line makes, as [`Copied`].
    fn copies(line: &str, t: &mut Tracker) -> Vec<Copied> {
        calls(line, t)
            .into_iter()
            .map(|r| (r.via, r.op, r.path.unwrap(), r.offset, r.size, r.ret))
            .collect()
    }

    #[test]
    fn copies_between_descriptors_are_a_read_and_a_write() {
        let mut t = Tracker::default();
        let via = Some("sendfile");
        call(
            r#"7 1700000000.000001 openat(AT_FDCWD, "/d/src", O_RDONLY) = 3</d/src> <0.000010>"#,
            &mut t,
        )
        .unwrap();
        call(r#"7 1700000000.000002 openat(AT_FDCWD, "/d/out", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 4</d/out> <0.000010>"#, &mut t).unwrap();
        // With an offset: the source's position stays; the destination's moves.
        assert_eq!(
            copies(
                r#"7 1700000000.000003 sendfile(4</d/out>, 3</d/src>, [4096] => [14096], 10000) = 10000 <0.000020>"#,
                &mut t
            ),
            vec![
                (
                    via,
                    Op::Read,
                    "/d/src".into(),
                    Some(4096),
                    Some(10000),
                    10000
                ),
                (via, Op::Write, "/d/out".into(), Some(0), Some(10000), 10000),
            ]
        );
        // Without one, the copy starts where the source stood, and moves it
        // on: a plain read after it starts where the copy ended.
        assert_eq!(
            copies(
                r#"7 1700000000.000004 sendfile(4</d/out>, 3</d/src>, NULL, 5000) = 5000 <0.000020>"#,
                &mut t
            ),
            vec![
                (via, Op::Read, "/d/src".into(), Some(0), Some(5000), 5000),
                (
                    via,
                    Op::Write,
                    "/d/out".into(),
                    Some(10000),
                    Some(5000),
                    5000
                ),
            ]
        );
        let r = call(
            r#"7 1700000000.000005 read(3</d/src>, "", 100) = 100 <0.000001>"#,
            &mut t,
        )
        .unwrap();
        assert_eq!(r.offset, Some(5000));
        let w = call(
            r#"7 1700000000.000006 write(4</d/out>, "x", 1) = 1 <0.000001>"#,
            &mut t,
        )
        .unwrap();
        assert_eq!(w.offset, Some(15000));
        let cfr = Some("copy_file_range");
        assert_eq!(
            copies(
                r#"7 1700000000.000007 copy_file_range(3</d/src>, [8192] => [28192], 4</d/out>, [512] => [20512], 20000, 0) = 20000 <0.000030>"#,
                &mut t
            ),
            vec![
                (
                    cfr,
                    Op::Read,
                    "/d/src".into(),
                    Some(8192),
                    Some(20000),
                    20000
                ),
                (
                    cfr,
                    Op::Write,
                    "/d/out".into(),
                    Some(512),
                    Some(20000),
                    20000
                ),
            ]
        );
        // A pipe's end has no row.
        let sp = Some("splice");
        assert_eq!(
            copies(
                r#"7 1700000000.000008 splice(3</d/src>, NULL, 6<pipe:[1234]>, NULL, 4096, 0) = 4096 <0.000005>"#,
                &mut t
            ),
            vec![(sp, Op::Read, "/d/src".into(), Some(5100), Some(4096), 4096)]
        );
        assert_eq!(
            copies(
                r#"7 1700000000.000009 splice(5<pipe:[1234]>, NULL, 4</d/out>, [777], 4096, 0) = 4096 <0.000005>"#,
                &mut t
            ),
            vec![(sp, Op::Write, "/d/out".into(), Some(777), Some(4096), 4096)]
        );
        // A failed copy: one row, on its source, with the length asked for.
        assert_eq!(
            copies(
                r#"7 1700000000.000010 sendfile(4</d/out>, 4</d/out>, [0], 10) = -1 EBADF (Bad file descriptor) <0.000002>"#,
                &mut t
            ),
            vec![(via, Op::Read, "/d/out".into(), Some(0), Some(10), -9)]
        );
        // A shell's `> file`: the file opened, put on 1, and closed; a copy
        // to 1 writes where the file stood.
        call(r#"8 1700000000.000020 openat(AT_FDCWD, "/d/bb", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3</d/bb> <0.000010>"#, &mut t).unwrap();
        assert!(call(
            r#"8 1700000000.000021 dup2(3</d/bb>, 1</dev/pts/0>) = 1</d/bb> <0.000002>"#,
            &mut t
        )
        .is_none());
        call(
            r#"8 1700000000.000022 close(3</d/bb>) = 0 <0.000002>"#,
            &mut t,
        )
        .unwrap();
        call(
            r#"8 1700000000.000023 openat(AT_FDCWD, "/d/src", O_RDONLY) = 3</d/src> <0.000010>"#,
            &mut t,
        )
        .unwrap();
        let cat = copies(
            r#"8 1700000000.000024 sendfile(1</d/bb>, 3</d/src>, NULL, 16777216) = 262144 <0.000100>"#,
            &mut t,
        );
        assert_eq!(
            cat[1],
            (
                via,
                Op::Write,
                "/d/bb".into(),
                Some(0),
                Some(262144),
                262144
            )
        );
        // Between two pipes: nothing.
        assert!(copies(r#"7 1700000000.000011 splice(5<pipe:[1]>, NULL, 6<pipe:[2]>, NULL, 10, 0) = 10 <0.000002>"#, &mut t).is_empty());
    }

    #[test]
    fn dates() {
        assert_eq!(parse_date("1970-01-02"), Some(1));
        assert_eq!(parse_date("2026-01-01"), Some(20454));
        assert_eq!(parse_date("2026-13-01"), None);
    }
}
