//! A trace as fio iologs (version 3): one log per rank, timestamps in
//! microseconds from the trace's first event (so ranks stay aligned), plus a
//! `job.fio` that replays every rank at once with `fio job.fio`.
//!
//! What is exported: `read` / `write` rows that moved bytes (length = bytes
//! moved, so short reads replay as they happened), `fsync` and `fdatasync`,
//! and opens and closes. A file used without a recorded open (opened before
//! the capture began) is opened just before its first use. Rows without an
//! offset cannot be replayed by fio and are counted in `skipped`. Rows without
//! a rank go to `unranked.iolog`.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use arrow_array::Array;
use serde::Serialize;

use iorepro_format::columns::Events;
use iorepro_format::error::{TraceError, TraceResult};
use iorepro_format::paths::{beneath_root, spelling};
use iorepro_format::reader::TraceReader;
use iorepro_format::runs::Run;
use iorepro_format::schema::{
    Op, COL_CALLS, COL_DUR_NS, COL_OFFSET, COL_OP, COL_PATH, COL_RANK, COL_RET, COL_SIZE,
    COL_SPAN_NS, COL_TS,
};

pub const JOB_FILE: &str = "job.fio";

#[derive(Debug, Clone, Serialize, Default)]
pub struct ExportReport {
    pub logs: Vec<String>,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub ios: u64,
    /// Data rows that could not be exported (no offset or no path).
    pub skipped: u64,
}

struct RankLog {
    name: String,
    out: BufWriter<File>,
    path: PathBuf,
    /// Open descriptors per file in this log; fio knows files by name, so a
    /// file is opened on the first descriptor and closed with the last.
    open: HashMap<String, u32>,
    added: std::collections::HashSet<String>,
    last_us: u64,
}

impl RankLog {
    fn create(dir: &Path, name: String) -> TraceResult<Self> {
        let path = dir.join(&name);
        let file = File::create(&path).map_err(|e| TraceError::io(&path, e))?;
        let mut out = BufWriter::new(file);
        writeln!(out, "fio version 3 iolog").map_err(|e| TraceError::io(&path, e))?;
        Ok(RankLog {
            name,
            out,
            path,
            open: HashMap::new(),
            added: Default::default(),
            last_us: 0,
        })
    }

    fn line(&mut self, args: std::fmt::Arguments<'_>) -> TraceResult<()> {
        self.out
            .write_fmt(args)
            .map_err(|e| TraceError::io(&self.path, e))
    }

    /// An open of `file`: fio opens a file once, on its first descriptor.
    fn open_file(&mut self, us: u64, file: String) -> TraceResult<()> {
        let opened = self.open.get(&file).copied().unwrap_or(0);
        if opened == 0 {
            self.ensure_open(us, &file)
        } else {
            self.open.insert(file, opened + 1);
            Ok(())
        }
    }

    /// A close of `file`: fio closes it with its last descriptor.
    fn close_file(&mut self, us: u64, file: String) -> TraceResult<()> {
        match self.open.get(&file).copied() {
            Some(1) => {
                self.line(format_args!("{us} {file} close\n"))?;
                self.open.insert(file, 0);
            }
            Some(n) if n > 1 => {
                self.open.insert(file, n - 1);
            }
            _ => {}
        }
        Ok(())
    }

    /// Row `i`, a read or a write that moved bytes, call by call (fio
    /// replays calls, so a run of calls is written one line a call).
    fn data(
        &mut self,
        ev: &Events,
        i: usize,
        op: Op,
        t0: i64,
        file: &str,
        report: &mut ExportReport,
    ) -> TraceResult<()> {
        if ev.ret().value(i) == 0 {
            return Ok(());
        }
        if !ev.offset().is_valid(i) {
            report.skipped += ev.calls_at(i) as u64;
            return Ok(());
        }
        self.ensure_open(self.last_us, file)?;
        let verb = if op == Op::Read { "read" } else { "write" };
        for call in Run::of(ev, i).calls() {
            let (Some(at), moved) = (call.offset, call.ret) else {
                continue;
            };
            let us = ((call.ts_ns - t0).max(0) / 1000) as u64;
            self.last_us = us;
            if op == Op::Read {
                report.read_bytes += moved as u64;
            } else {
                report.write_bytes += moved as u64;
            }
            report.ios += 1;
            self.line(format_args!("{us} {file} {verb} {at} {moved}\n"))?;
        }
        Ok(())
    }

    /// An fsync or fdatasync of `file`.
    fn sync(&mut self, us: u64, file: &str, op: Op) -> TraceResult<()> {
        self.ensure_open(us, file)?;
        let verb = if op == Op::Fsync { "sync" } else { "datasync" };
        self.line(format_args!("{us} {file} {verb} 0 0\n"))
    }

    fn ensure_open(&mut self, us: u64, file: &str) -> TraceResult<()> {
        if !self.added.contains(file) {
            self.added.insert(file.to_string());
            self.line(format_args!("{us} {file} add\n"))?;
        }
        let n = self.open.entry(file.to_string()).or_insert(0);
        if *n == 0 {
            *n = 1;
            self.line(format_args!("{us} {file} open\n"))?;
        }
        Ok(())
    }
}

/// Maps a trace path to where fio should do the I/O, in the format's one
/// spelling (fio knows a file by its name, so `d/./f` and `d/f` must be
/// one): beneath `target` when given, which `..` cannot climb out of.
fn remap(target: Option<&Path>, path: &str) -> Option<String> {
    // fio's log format is whitespace-separated: such a name cannot be written.
    if path.contains(char::is_whitespace) {
        return None;
    }
    match target {
        None => Some(spelling(path)),
        Some(t) => Some(t.join(beneath_root(path)?).to_string_lossy().into_owned()),
    }
}

pub fn export(trace: &Path, out_dir: &Path, target: Option<&Path>) -> TraceResult<ExportReport> {
    let reader = TraceReader::open(trace)?.with_columns(&[
        COL_TS,
        COL_DUR_NS,
        COL_RANK,
        COL_OP,
        COL_PATH,
        COL_OFFSET,
        COL_SIZE,
        COL_RET,
        COL_CALLS,
        COL_SPAN_NS,
    ]);
    std::fs::create_dir_all(out_dir).map_err(|e| TraceError::io(out_dir, e))?;
    let origin = reader.manifest().start_unix_ns;
    let mut logs: HashMap<Option<i32>, RankLog> = HashMap::new();
    let mut report = ExportReport::default();
    let mut origin_seen: Option<i64> = None;
    for ev in reader.events()? {
        let ev = ev?;
        let ts = ev.ts().values();
        let (rank, path, ret) = (ev.rank(), ev.path(), ev.ret().values());
        let ops = ev.ops();
        for i in 0..ev.len() {
            let t0 = *origin_seen.get_or_insert(if origin > 0 { origin.min(ts[i]) } else { ts[i] });
            let op = ops[i];
            let interesting = matches!(
                op,
                Op::Open | Op::Close | Op::Read | Op::Write | Op::Fsync | Op::Fdatasync
            );
            if !interesting || ret[i] < 0 {
                continue;
            }
            let data = matches!(op, Op::Read | Op::Write);
            let Some(file) = (path.is_valid(i))
                .then(|| path.value(i))
                .and_then(|p| remap(target, p))
            else {
                report.skipped += data as u64;
                continue;
            };
            let log = log_of(&mut logs, out_dir, rank.is_valid(i).then(|| rank.value(i)))?;
            let us = ((ts[i] - t0).max(0) / 1000) as u64;
            log.last_us = us;
            match op {
                Op::Open => log.open_file(us, file)?,
                Op::Close => log.close_file(us, file)?,
                Op::Read | Op::Write => log.data(&ev, i, op, t0, &file, &mut report)?,
                _ => log.sync(us, &file, op)?,
            }
        }
    }
    let names = close_logs(logs)?;
    write_job(out_dir, &names)?;
    report.logs = names;
    Ok(report)
}

/// The log of `rank`, created on its first row.
fn log_of<'l>(
    logs: &'l mut HashMap<Option<i32>, RankLog>,
    out_dir: &Path,
    rank: Option<i32>,
) -> TraceResult<&'l mut RankLog> {
    Ok(match logs.entry(rank) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(e) => {
            let name = match rank {
                Some(r) => format!("rank-{r:05}.iolog"),
                None => "unranked.iolog".to_string(),
            };
            e.insert(RankLog::create(out_dir, name)?)
        }
    })
}

/// Closes what each log left open and flushes it; returns the logs' names
/// in rank order (the unranked one first).
fn close_logs(logs: HashMap<Option<i32>, RankLog>) -> TraceResult<Vec<String>> {
    let mut names: Vec<(Option<i32>, String)> = Vec::new();
    for (rank, mut log) in logs {
        let end: Vec<String> = log
            .open
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(f, _)| f.clone())
            .collect();
        for f in end {
            let us = log.last_us;
            log.line(format_args!("{us} {f} close\n"))?;
        }
        log.out.flush().map_err(|e| TraceError::io(&log.path, e))?;
        names.push((rank, log.name));
    }
    names.sort();
    Ok(names.into_iter().map(|(_, n)| n).collect())
}

/// `job.fio`: one job per log, all at once.
fn write_job(out_dir: &Path, logs: &[String]) -> TraceResult<()> {
    let job_path = out_dir.join(JOB_FILE);
    let mut job = String::from("# Replays every rank of the trace at once; run from this directory: fio job.fio\n[global]\nioengine=psync\n\n");
    for name in logs {
        let section = name.trim_end_matches(".iolog");
        job.push_str(&format!("[{section}]\nread_iolog={name}\n\n"));
    }
    std::fs::write(&job_path, job).map_err(|e| TraceError::io(&job_path, e))
}
