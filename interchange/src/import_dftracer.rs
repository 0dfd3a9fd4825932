//! DFTracer's traces (`.pfw`, `.pfw.gz`: Chrome-trace JSON, one event a
//! line, as DLIO writes them with its profiler on and HPC sites keep them)
//! as a trace with source `import`.
//!
//! DFTracer's POSIX events with their arguments (`DFTRACER_INC_METADATA=1`:
//! `fname`, `fd`, `count`, `offset`, `flags`, `ret`) are the system calls
//! they stand for, and become rows as strace's do ([`super::import_strace`]):
//! a plain read's or write's offset followed per process and descriptor
//! from its `open`, `lseek` and the bytes moved. An event is timed to the
//! microsecond (DFTracer's `ts` and `dur`). The thread (`tid`) stands for
//! the process: DFTracer's `pid` is what the job told it (DLIO gives its
//! rank), so a forked loader worker is told apart by its thread only. The
//! rank is the file's where its name says it (DLIO's `trace-R-of-N.pfw`).
//! Events of other categories (the job's own functions) are left out; what
//! DFTracer does not record is named in the manifest (`imported_from.lacks`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::import_common::{files_in, write_imported};
use crate::import_strace::{to_rows, Call, Row, Tracker};
use iorepro_format::error::{TraceError, TraceResult};
use iorepro_format::event::EventRow;
use iorepro_format::manifest::Manifest;

/// What a trace imported from DFTracer does not hold, for the manifest.
pub const LACKS: [&str; 5] = [
    "offsets of plain reads and writes: followed from open, lseek and the bytes moved, \
     unknown for a descriptor opened before DFTracer began",
    "process starts and forks: a loader worker's parent is not recorded",
    "memory-mapped reads and what the page cache served (no storage columns)",
    "calls DFTracer did not intercept (those before its start in each process, and those \
     of libraries it does not wrap)",
    "calls without their arguments (DFTracer run without DFTRACER_INC_METADATA=1) are left out",
];

pub struct DftracerOptions {
    /// Host name for rows whose events name none.
    pub host: String,
    pub segment_rows: usize,
}

/// The trace files of `input`: the file itself, or a directory's `.pfw`
/// and `.pfw.gz` files.
fn inputs(input: &Path) -> TraceResult<Vec<PathBuf>> {
    if input.is_dir() {
        return files_in(
            input,
            |p| {
                let name = p.to_string_lossy();
                name.ends_with(".pfw") || name.ends_with(".pfw.gz")
            },
            "no DFTracer trace (.pfw or .pfw.gz) in this directory",
        );
    }
    Ok(vec![input.to_path_buf()])
}

/// The rank a trace file's name gives (`trace-R-of-N.pfw`, DLIO's).
fn rank_of(file: &Path) -> Option<i32> {
    let name = file.file_name()?.to_string_lossy().to_string();
    let (before, _) = name.split_once("-of-")?;
    before.rsplit('-').next()?.parse().ok()
}

fn lines(file: &Path) -> TraceResult<Box<dyn BufRead>> {
    let f = std::fs::File::open(file).map_err(|e| TraceError::io(file, e))?;
    let read: Box<dyn Read> = if file.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(f))
    } else {
        Box::new(f)
    };
    Ok(Box::new(BufReader::new(read)))
}

/// A field DFTracer writes as a string or a number.
fn int(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_str()?.trim().parse().ok())
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A POSIX event as the system call strace would print: its name, its
/// arguments (a descriptor with its path, `FD<PATH>`; a path quoted) and
/// what it returned. `None` for events the trace has no row for and for
/// events without their arguments.
fn as_call(name: &str, args: &Value) -> Option<(&'static str, Vec<String>, i64)> {
    let arg = |k: &str| args.get(k).and_then(text);
    let fname = arg("fname")?;
    let quoted = format!("\"{fname}\"");
    let fd = || Some(format!("{}<{fname}>", arg("fd")?));
    let ret = args.get("ret").and_then(int);
    let count = || arg("count");
    let (call, list): (&'static str, Vec<String>) = match name {
        "open" | "open64" => ("open", vec![quoted, arg("flags").unwrap_or("0".into())]),
        "openat" | "openat64" => (
            "openat",
            vec![
                "AT_FDCWD".into(),
                quoted,
                arg("flags").unwrap_or("0".into()),
            ],
        ),
        "creat" | "creat64" => ("creat", vec![quoted]),
        "read" => ("read", vec![fd()?, "buf".into(), count()?]),
        "write" => ("write", vec![fd()?, "buf".into(), count()?]),
        "pread" | "pread64" => (
            "pread64",
            vec![fd()?, "buf".into(), count()?, arg("offset")?],
        ),
        "pwrite" | "pwrite64" => (
            "pwrite64",
            vec![fd()?, "buf".into(), count()?, arg("offset")?],
        ),
        "readv" => ("readv", vec![fd()?, "iov".into(), "0".into()]),
        "writev" => ("writev", vec![fd()?, "iov".into(), "0".into()]),
        "lseek" | "lseek64" => (
            "lseek",
            vec![fd()?, arg("offset")?, arg("whence").unwrap_or_default()],
        ),
        "close" => ("close", vec![fd()?]),
        "fsync" => ("fsync", vec![fd()?]),
        "fdatasync" => ("fdatasync", vec![fd()?]),
        "ftruncate" | "ftruncate64" => ("ftruncate", vec![fd()?, arg("length")?]),
        "stat" | "stat64" | "xstat" | "xstat64" | "__xstat" | "__xstat64" | "lstat" | "lstat64"
        | "lxstat" | "lxstat64" | "__lxstat" | "__lxstat64" => ("stat", vec![quoted]),
        "fstat" | "fstat64" | "fxstat" | "fxstat64" | "__fxstat" | "__fxstat64" => {
            ("fstat", vec![fd()?])
        }
        "access" => ("access", vec![quoted, arg("mode").unwrap_or("0".into())]),
        "mkdir" => ("mkdir", vec![quoted, arg("mode").unwrap_or("0".into())]),
        "rmdir" => ("rmdir", vec![quoted]),
        "unlink" => ("unlink", vec![quoted]),
        _ => return None,
    };
    // A call without its result is no call the trace can hold.
    Some((call, list, ret?))
}

/// Imports DFTracer trace `input` (a file or a directory of them) into a
/// new trace at `out`.
pub fn import(input: &Path, out: &Path, opts: &DftracerOptions) -> TraceResult<Manifest> {
    let mut rows: Vec<Row> = Vec::new();
    let mut ranks: Vec<Option<i32>> = Vec::new();
    let mut hosts: HashMap<i32, String> = HashMap::new();
    let mut tracker = Tracker::default();
    let (mut posix, mut without_args) = (0u64, 0u64);
    for file in inputs(input)? {
        let rank = rank_of(&file);
        for (n, line) in lines(&file)?.lines().enumerate() {
            let line = line.map_err(|e| TraceError::io(&file, e))?;
            let json = line.trim().trim_end_matches(',');
            if !json.starts_with('{') {
                continue; // the array's brackets
            }
            let e: Value = serde_json::from_str(json).map_err(|err| {
                TraceError::invalid(&file, format!("line {}: not a JSON event: {err}", n + 1))
            })?;
            if e.get("cat").and_then(Value::as_str) != Some("POSIX") {
                continue;
            }
            posix += 1;
            let name = e.get("name").and_then(Value::as_str).unwrap_or_default();
            let args = e.get("args").unwrap_or(&Value::Null);
            let Some((call, list, ret)) = as_call(name, args) else {
                without_args += u64::from(args.get("fname").is_none());
                continue;
            };
            let field = |k: &str| e.get(k).and_then(int);
            let (Some(tid), Some(ts_us)) = (field("tid"), field("ts")) else {
                continue;
            };
            let tid = tid as i32;
            if let Some(h) = args.get("hostname").and_then(Value::as_str) {
                hosts.entry(tid).or_insert_with(|| h.to_string());
            }
            let c = Call {
                pid: tid,
                ts_ns: ts_us.saturating_mul(1000),
                name: call,
                args: list.iter().map(String::as_str).collect(),
                ret,
                ret_path: None,
                dur_ns: field("dur").unwrap_or(0).saturating_mul(1000),
            };
            to_rows(&c, &mut tracker, &mut rows);
            ranks.resize(rows.len(), rank);
        }
    }
    if rows.is_empty() {
        let why = if posix > 0 && without_args == posix {
            "its POSIX events carry no arguments: trace with DFTRACER_INC_METADATA=1"
        } else {
            "no POSIX call on a regular file in it (DFTracer's .pfw: JSON events of cat POSIX)"
        };
        return Err(TraceError::invalid(input, why));
    }
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| rows[i].ts_ns);
    let events = order.into_iter().map(|i| {
        let r = &rows[i];
        let host = hosts.get(&r.pid).map_or(opts.host.as_str(), String::as_str);
        EventRow {
            rank: ranks[i],
            ..r.as_event(host, "dftracer")
        }
    });
    write_imported(out, opts.segment_rows, "dftracer", input, &LACKS, events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;
    use iorepro_format::schema::Op;
    use iorepro_format::TraceReader;

    const EVENTS: &str = r#"[
{"id":"1","name":"open64","cat":"POSIX","pid":"1","tid":"7","ts":"1000","dur":"5","ph":"X","args":{"hostname":"n1","ret":26,"flags":524288,"fname":"/d/a.npz"}}
{"id":"2","name":"read","cat":"POSIX","pid":"1","tid":"7","ts":"1010","dur":"2","ph":"X","args":{"hostname":"n1","ret":"4096","count":"4096","fd":26,"fname":"/d/a.npz"}}
{"id":"3","name":"lseek64","cat":"POSIX","pid":"1","tid":"7","ts":"1020","dur":"1","ph":"X","args":{"hostname":"n1","ret":"100","whence":0,"offset":"100","fd":26,"fname":"/d/a.npz"}}
{"id":"4","name":"read","cat":"POSIX","pid":"1","tid":"7","ts":"1030","dur":"2","ph":"X","args":{"hostname":"n1","ret":"50","count":"4096","fd":26,"fname":"/d/a.npz"}}
{"id":"5","name":"NPZReader.open","cat":"reader","pid":"1","tid":"7","ts":"1000","dur":"40","ph":"X","args":{}}
{"id":"6","name":"close","cat":"POSIX","pid":"1","tid":"7","ts":"1040","dur":"1","ph":"X","args":{"hostname":"n1","ret":0,"fd":26,"fname":"/d/a.npz"}}
]"#;

    #[test]
    fn posix_events_become_rows_with_their_offsets_and_the_files_rank() {
        let dir = tempfile::tempdir().unwrap();
        let pfw = dir.path().join("trace-3-of-4.pfw");
        std::fs::write(&pfw, EVENTS).unwrap();
        let out = dir.path().join("t");
        let opts = DftracerOptions {
            host: "imported".into(),
            segment_rows: 1000,
        };
        import(&pfw, &out, &opts).unwrap();
        let reader = TraceReader::open(&out).unwrap();
        let mut seen = Vec::new();
        for batch in reader.events().unwrap() {
            let ev = batch.unwrap();
            for i in 0..ev.len() {
                seen.push((
                    ev.op(i),
                    ev.offset().is_valid(i).then(|| ev.offset().value(i)),
                    ev.ret().value(i),
                    ev.rank().is_valid(i).then(|| ev.rank().value(i)),
                    ev.ts().value(i),
                ));
            }
        }
        assert_eq!(
            seen,
            vec![
                (Op::Open, None, 26, Some(3), 1_000_000),
                (Op::Read, Some(0), 4096, Some(3), 1_010_000),
                (Op::Lseek, Some(100), 100, Some(3), 1_020_000),
                (Op::Read, Some(100), 50, Some(3), 1_030_000),
                (Op::Close, None, 0, Some(3), 1_040_000),
            ]
        );
        let m: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(m["imported_from"]["format"], "dftracer", "{m}");
        assert_eq!(
            m["imported_from"]["lacks"].as_array().unwrap().len(),
            LACKS.len()
        );
    }

    #[test]
    fn events_without_their_arguments_are_refused_with_the_setting_that_adds_them() {
        let dir = tempfile::tempdir().unwrap();
        let pfw = dir.path().join("t.pfw");
        std::fs::write(
            &pfw,
            r#"{"id":"6","name":"read","cat":"POSIX","pid":"0","tid":"9","ts":"5","dur":"1","ph":"X","args":{}}"#,
        )
        .unwrap();
        let opts = DftracerOptions {
            host: "h".into(),
            segment_rows: 10,
        };
        let err = import(&pfw, &dir.path().join("t"), &opts).unwrap_err();
        assert!(err.to_string().contains("DFTRACER_INC_METADATA=1"), "{err}");
    }
}
