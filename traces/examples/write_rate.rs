//! Measures the trace writer on a capture-like mix of rows: rows/s on one core
//! and bytes per event, next to the same rows as gzip'd JSON lines.
//! Used by `cargo xtask bench`; prints one JSON object.
//!
//! usage: write_rate OUT_DIR [ROWS]

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use flate2::write::GzEncoder;
use iorepro_format::{EventRow, Op, Source, TraceWriter, WriterOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Rows as a data-loading capture produces them: 8 ranks with 2 loader workers
/// each, reading shards of a 2,000-file dataset in 128 KiB..1 MiB sequential
/// chunks between opens and closes, with occasional checkpoint writes.
/// One generated call; offset and size are -1 where the op has none.
struct Call {
    ts: i64,
    dur: i64,
    pid: i32,
    worker: i32,
    op: Op,
    file: u32,
    offset: i64,
    size: i64,
    ret: i64,
}

#[allow(clippy::too_many_arguments)]
fn call(
    ts: i64,
    dur: i64,
    pid: i32,
    worker: i32,
    op: Op,
    file: u32,
    offset: i64,
    size: i64,
    ret: i64,
) -> Call {
    Call {
        ts,
        dur,
        pid,
        worker,
        op,
        file,
        offset,
        size,
        ret,
    }
}

fn rows(n: usize) -> Vec<Call> {
    let mut rng = SmallRng::seed_from_u64(7);
    let mut out = Vec::with_capacity(n);
    let mut ts = 1_767_225_600_000_000_000i64;
    let mut cursor = [(0u32, 0i64); 16];
    while out.len() < n {
        let w = rng.random_range(0..16usize);
        let pid = 4000 + w as i32;
        ts += rng.random_range(200..4_000);
        let (file, off) = &mut cursor[w];
        if *off == 0 {
            *file = rng.random_range(0..2000);
            out.push(call(
                ts,
                rng.random_range(3_000..9_000),
                pid,
                w as i32,
                Op::Open,
                *file,
                -1,
                -1,
                12,
            ));
        }
        let size = [131_072i64, 262_144, 1_048_576][rng.random_range(0..3)];
        let dur = (size / 2) + rng.random_range(0..20_000);
        out.push(call(
            ts,
            dur,
            pid,
            w as i32,
            Op::Read,
            *file,
            *off,
            size,
            size,
        ));
        *off += size;
        if *off >= 64 << 20 {
            out.push(call(
                ts + dur,
                rng.random_range(1_000..3_000),
                pid,
                w as i32,
                Op::Close,
                *file,
                -1,
                -1,
                0,
            ));
            *off = 0;
        }
    }
    out.truncate(n);
    out
}

/// CPU time of this process: on a busy machine, rows per CPU-second is the
/// honest "one core" figure where wall time is not.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct we pass and has no other effects.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(
        args.get(1)
            .ok_or_else(|| anyhow::anyhow!("usage: write_rate OUT_DIR [ROWS]"))?,
    );
    let n: usize = args
        .get(2)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(5_000_000);
    let data = rows(n);
    let paths: Vec<String> = (0..2000)
        .map(|i| format!("/data/imagenet/train/shard-{i:05}.tar"))
        .collect();
    let comms = ["pt_data_worker", "python"];
    let row = |r: &Call| EventRow {
        ts_ns: r.ts,
        dur_ns: r.dur,
        host: "node0",
        pid: r.pid,
        tid: r.pid,
        rank: Some(r.worker / 2),
        comm: comms[(r.worker % 2) as usize],
        op: r.op,
        path: Some(&paths[r.file as usize]),
        fd: Some(12),
        offset: (r.offset >= 0).then_some(r.offset),
        size: (r.size >= 0).then_some(r.size),
        ret: r.ret,
        flags: (r.op == Op::Open).then_some(0),
        calls: 1,
        span_ns: None,
        path2: None,
        via: None,
        exchange: None,
        from_storage: None,
    };

    let start = Instant::now();
    let cpu_start = cpu_seconds();
    let mut w = TraceWriter::create(&dir, WriterOptions::new(Source::Synth))?;
    for r in &data {
        w.push(&row(r))?;
    }
    let m = w.finish()?;
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_start;
    let bytes: u64 = m
        .segments
        .iter()
        .map(|s| std::fs::metadata(dir.join(s)).map(|x| x.len()).unwrap_or(0))
        .sum();

    // The same rows as JSON lines, gzip'd (what ad-hoc tracers commonly emit).
    let json_rows = n.min(1_000_000);
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::default());
    for r in &data[..json_rows] {
        let e = row(r);
        serde_json::to_writer(
            &mut gz,
            &serde_json::json!({
                "ts": e.ts_ns, "dur_ns": e.dur_ns, "host": e.host, "pid": e.pid, "tid": e.tid,
                "rank": e.rank, "comm": e.comm, "op": e.op.as_str(), "path": e.path, "fd": e.fd,
                "offset": e.offset, "size": e.size, "ret": e.ret, "flags": e.flags,
            }),
        )?;
        gz.write_all(b"\n")?;
    }
    let gz_bytes = gz.finish()?.len();
    println!(
        "{}",
        serde_json::json!({
            "rows": n,
            "seconds": secs,
            "rows_per_s": n as f64 / secs,
            "cpu_seconds": cpu,
            "rows_per_cpu_s": n as f64 / cpu,
            "parquet_bytes_per_event": bytes as f64 / n as f64,
            "jsonl_gz_bytes_per_event": gz_bytes as f64 / json_rows as f64,
        })
    );
    Ok(())
}
