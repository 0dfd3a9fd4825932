//! fio iologs (versions 2 and 3) as a trace with source `import`, so fio jobs
//! and logs written by other tools can be analyzed like captures.
//!
//! Input is one iolog file or a directory of them; each file is one rank,
//! numbered by the digits in its name (`rank-00003.iolog` is rank 3) or, when
//! a name has none, by its position in name order. Version 3 timestamps
//! (microseconds from the start of the run) become `ts` offsets from `start`;
//! version 2 logs have none, so each action takes 1 µs and `wait` actions add
//! their delay. fio logs carry no latencies, so `dur_ns` is 0; `ret` is the
//! requested length (fio logs what it issued).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::import_common::{files_in, write_imported};
use iorepro_format::error::{TraceError, TraceResult};
use iorepro_format::event::EventRow;
use iorepro_format::manifest::Manifest;
use iorepro_format::schema::Op;

/// One action of a log, with its file interned.
struct Action {
    ts_ns: i64,
    rank: i32,
    op: Op,
    file: u32,
    offset: Option<i64>,
    len: Option<i64>,
}

pub struct ImportOptions {
    pub host: String,
    /// Wall-clock time of the logs' time 0, in Unix ns.
    pub start_unix_ns: i64,
    pub segment_rows: usize,
}

fn log_files(input: &Path) -> TraceResult<Vec<PathBuf>> {
    let meta = std::fs::metadata(input).map_err(|e| TraceError::io(input, e))?;
    if !meta.is_dir() {
        return Ok(vec![input.to_path_buf()]);
    }
    files_in(
        input,
        |p| p.extension().is_some_and(|e| e == "iolog" || e == "log"),
        "no fio iologs (*.iolog or *.log) in this directory",
    )
}

fn rank_of(path: &Path, position: usize) -> i32 {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let digits: String = stem
        .chars()
        .rev()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(|c| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().unwrap_or(position as i32)
}

fn parse_log(
    path: &Path,
    rank: i32,
    files: &mut Vec<String>,
    ids: &mut HashMap<String, u32>,
    out: &mut Vec<Action>,
) -> TraceResult<()> {
    let text = std::fs::read_to_string(path).map_err(|e| TraceError::io(path, e))?;
    let mut lines = text.lines().enumerate();
    let version = match lines.next() {
        Some((_, "fio version 2 iolog")) => 2,
        Some((_, "fio version 3 iolog")) => 3,
        _ => return Err(TraceError::invalid(
            path,
            "not a fio iolog: first line must be `fio version 2 iolog` or `fio version 3 iolog`",
        )),
    };
    let mut clock_ns: i64 = 0;
    for (n, line) in lines {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad =
            |what: &str| TraceError::invalid(path, format!("line {}: {what}: `{line}`", n + 1));
        let mut f: Vec<&str> = line.split_whitespace().collect();
        if version == 3 {
            let ts: i64 = f
                .first()
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| bad("expected a timestamp"))?;
            clock_ns = ts.saturating_mul(1000);
            f.remove(0);
        } else {
            clock_ns += 1000;
        }
        let (name, action) = match f.as_slice() {
            [name, action, ..] => (*name, *action),
            _ => return Err(bad("expected `file action [offset length]`")),
        };
        let num = |i: usize| -> TraceResult<Option<i64>> {
            match f.get(i) {
                None => Ok(None),
                Some(s) => s
                    .parse()
                    .map(Some)
                    .map_err(|_| bad("offset and length must be integers")),
            }
        };
        let op = match action {
            "add" => continue,
            "open" => Op::Open,
            "close" => Op::Close,
            "read" => Op::Read,
            "write" => Op::Write,
            "sync" => Op::Fsync,
            "datasync" => Op::Fdatasync,
            "trim" => continue,
            "wait" if version == 2 => {
                clock_ns += num(2)?.unwrap_or(0) * 1000;
                continue;
            }
            _ => return Err(bad("unknown action")),
        };
        let (offset, len) = (num(2)?, num(3)?);
        if matches!(op, Op::Read | Op::Write) && (offset.is_none() || len.is_none()) {
            return Err(bad("read and write need an offset and a length"));
        }
        let next = files.len() as u32;
        let file = *ids.entry(name.to_string()).or_insert_with(|| {
            files.push(name.to_string());
            next
        });
        out.push(Action {
            ts_ns: clock_ns,
            rank,
            op,
            file,
            offset: if matches!(op, Op::Read | Op::Write) {
                offset
            } else {
                None
            },
            len: if matches!(op, Op::Read | Op::Write) {
                len
            } else {
                None
            },
        });
    }
    Ok(())
}

pub fn import(input: &Path, out: &Path, opts: &ImportOptions) -> TraceResult<Manifest> {
    let logs = log_files(input)?;
    let mut files = Vec::new();
    let mut ids = HashMap::new();
    let mut actions = Vec::new();
    for (i, log) in logs.iter().enumerate() {
        parse_log(log, rank_of(log, i), &mut files, &mut ids, &mut actions)?;
    }
    // Stable: actions of one rank at one timestamp keep their log order.
    actions.sort_by_key(|a| a.ts_ns);
    // fio names files, not descriptors: one stable descriptor per file and rank.
    let mut fds: HashMap<(i32, u32), i32> = HashMap::new();
    let rows = actions.iter().map(|a| {
        let next = 3 + fds.len() as i32;
        let fd = *fds.entry((a.rank, a.file)).or_insert(next);
        EventRow {
            ts_ns: opts.start_unix_ns + a.ts_ns,
            dur_ns: 0,
            host: &opts.host,
            pid: a.rank + 1,
            tid: a.rank + 1,
            rank: Some(a.rank),
            comm: "fio",
            op: a.op,
            path: Some(&files[a.file as usize]),
            fd: Some(fd),
            offset: a.offset,
            size: a.len,
            ret: match a.op {
                Op::Open => fd as i64,
                _ => a.len.unwrap_or(0),
            },
            flags: None,
            calls: 1,
            span_ns: None,
            path2: None,
            via: None,
            exchange: None,
            from_storage: None,
        }
    });
    write_imported(out, opts.segment_rows, "fio-iolog", input, &[], rows)
}
