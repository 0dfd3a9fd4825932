//! A trace as Chrome trace-event JSON, which ui.perfetto.dev and
//! chrome://tracing open: every row is a complete event (`"ph": "X"`) named
//! by its op, with `ts` and `dur` in microseconds from the trace's first
//! call and the path, offset, size and return value in `args`. Each rank is
//! a process track ("rank 3 @ node0") and each thread of it a thread track
//! named by its `comm`, so a DataLoader worker sits under its rank; rows
//! without a rank get a track per process. The file is written as the trace
//! is read, so memory does not grow with rows (the viewer is the limit: a
//! few million events open comfortably in Perfetto).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde::Serialize;

use iorepro_format::columns::Events;
use iorepro_format::error::{TraceError, TraceResult};
use iorepro_format::reader::TraceReader;

/// Process ids of tracks for rows without a rank start here, apart from ranks.
const PROCESS_TRACKS: i64 = 1 << 32;

#[derive(Debug, Clone, Serialize)]
pub struct PerfettoReport {
    pub out: String,
    /// Complete ("X") events written: one per row.
    pub events: u64,
    /// Process tracks (ranks, or processes without a rank) and thread tracks.
    pub processes: usize,
    pub threads: usize,
}

#[derive(Serialize)]
struct Args<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<i64>,
    ret: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    fd: Option<i32>,
    /// The new name of a rename, the link of a link or symlink.
    #[serde(skip_serializing_if = "Option::is_none")]
    path2: Option<&'a str>,
    /// Calls a run stands for; absent for a single call.
    #[serde(skip_serializing_if = "Option::is_none")]
    calls: Option<i64>,
}

#[derive(Serialize)]
struct Complete<'a> {
    name: &'a str,
    cat: &'static str,
    ph: &'static str,
    /// Microseconds from the first call, to the nanosecond.
    ts: f64,
    dur: f64,
    pid: i64,
    tid: i32,
    args: Args<'a>,
}

#[derive(Serialize)]
struct Name<'a> {
    name: &'static str,
    ph: &'static str,
    pid: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<i32>,
    args: NameArgs<'a>,
}

#[derive(Serialize)]
struct NameArgs<'a> {
    name: &'a str,
}

fn io(out: &Path) -> impl Fn(std::io::Error) -> TraceError + '_ {
    move |e| TraceError::io(out, e)
}

/// Writes `trace` as trace-event JSON to `out`.
pub fn export(trace: &Path, out: &Path) -> TraceResult<PerfettoReport> {
    let reader = TraceReader::open(trace)?;
    let file = File::create(out).map_err(io(out))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")
        .map_err(io(out))?;
    let mut origin: Option<i64> = None;
    let mut events = 0u64;
    // Track names: process id -> name, (process id, tid) -> comm.
    let mut processes: BTreeMap<i64, String> = BTreeMap::new();
    let mut threads: BTreeMap<(i64, i32), String> = BTreeMap::new();
    for ev in reader.events()? {
        let ev: Events = ev?;
        let ops = ev.ops();
        let (ts, dur, ret) = (ev.ts().values(), ev.dur_ns().values(), ev.ret().values());
        let (pid, tid, comm) = (ev.pid().values(), ev.tid().values(), ev.comm());
        for (i, op) in ops.iter().enumerate() {
            let t0 = *origin.get_or_insert(ts[i]);
            let rank = Events::opt_i32(ev.rank(), i);
            let track = rank.map_or(PROCESS_TRACKS + pid[i] as i64, |r| r as i64);
            processes.entry(track).or_insert_with(|| {
                let host = ev.host_at(i);
                match rank {
                    Some(r) => format!("rank {r} @ {host}"),
                    None => format!("pid {} @ {host}", pid[i]),
                }
            });
            threads
                .entry((track, tid[i]))
                .or_insert_with(|| format!("{} ({})", comm.value(i), tid[i]));
            let e = Complete {
                name: op.as_str(),
                cat: "io",
                ph: "X",
                ts: (ts[i] - t0) as f64 / 1e3,
                // A run is drawn over its whole span.
                dur: dur[i].max(ev.span_at(i)).max(0) as f64 / 1e3,
                pid: track,
                tid: tid[i],
                args: Args {
                    path: ev.path_at(i),
                    offset: Events::opt_i64(ev.offset(), i),
                    size: Events::opt_i64(ev.size(), i),
                    ret: ret[i],
                    fd: Events::opt_i32(ev.fd(), i),
                    path2: ev.path2_at(i),
                    calls: Some(ev.calls_at(i)).filter(|&n| n > 1),
                },
            };
            if events > 0 {
                w.write_all(b",\n").map_err(io(out))?;
            }
            serde_json::to_writer(&mut w, &e)
                .map_err(|e| TraceError::invalid(out, e.to_string()))?;
            events += 1;
        }
    }
    let names = processes
        .iter()
        .map(|(&pid, name)| Name {
            name: "process_name",
            ph: "M",
            pid,
            tid: None,
            args: NameArgs { name },
        })
        .chain(threads.iter().map(|(&(pid, tid), name)| Name {
            name: "thread_name",
            ph: "M",
            pid,
            tid: Some(tid),
            args: NameArgs { name },
        }));
    let mut first = events == 0;
    for n in names {
        if !first {
            w.write_all(b",\n").map_err(io(out))?;
        }
        first = false;
        serde_json::to_writer(&mut w, &n).map_err(|e| TraceError::invalid(out, e.to_string()))?;
    }
    let start = origin.unwrap_or(0);
    write!(
        w,
        "\n],\"otherData\":{{\"start_unix_ns\":{start},\"source\":\"iorepro\"}}}}\n"
    )
    .map_err(io(out))?;
    w.flush().map_err(io(out))?;
    Ok(PerfettoReport {
        out: out.display().to_string(),
        events,
        processes: processes.len(),
        threads: threads.len(),
    })
}
