//! Writes the traces `cargo xtask bench` replays next to fio and boto3: each
//! rank reads its own file `/bench/r{rank}.bin` of FILE_SIZE bytes with OPS
//! reads of BS bytes, sequentially (wrapping around) or at random block
//! offsets, between one open and one close; or (`write`) creates it and
//! writes OPS calls of BS bytes one after another; or (`stat`) reads it
//! once and then stats it OPS times by name; or (`list`) reads it once and
//! then lists `/bench` OPS times. The last two are the metadata storms of a
//! loader that probes its files or lists its shards again every epoch. Or
//! (`files`) each rank writes OPS files of BS bytes, `/bench/r{rank}/f{i}`,
//! one call each, then removes them: a job's many small outputs.
//!
//! usage: read_trace OUT_DIR RANKS FILE_SIZE BS OPS seq|random|write|stat|list|files

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use iorepro_format::{EventRow, Op, Source, TraceWriter, WriterOptions};

/// One call of `rank` on `path`, `flags` on its opens.
#[allow(clippy::too_many_arguments)]
fn call(
    rank: i32,
    flags: Option<i32>,
    path: &str,
    op: Op,
    offset: Option<i64>,
    size: Option<i64>,
    ret: i64,
    ts: i64,
) -> EventRow<'_> {
    EventRow {
        ts_ns: ts,
        dur_ns: 1_000,
        host: "bench",
        pid: 100 + rank,
        tid: 100 + rank,
        rank: Some(rank),
        comm: "bench",
        op,
        path: Some(if op == Op::Getdents { "/bench" } else { path }),
        // Probes by name, as `os.stat`, `os.scandir` and `os.unlink` make
        // them.
        fd: if matches!(op, Op::Stat | Op::Getdents | Op::Unlink) {
            None
        } else {
            Some(5)
        },
        offset,
        size,
        ret,
        flags: if op == Op::Open { flags } else { None },
        calls: 1,
        span_ns: None,
        path2: None,
        via: None,
        exchange: None,
        from_storage: None,
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out, ranks, file_size, bs, ops, pattern] = args.as_slice() else {
        bail!("usage: read_trace OUT_DIR RANKS FILE_SIZE BS OPS seq|random|write|stat|list|files");
    };
    let number = |s: &str, what: &str| -> Result<u64> {
        s.parse()
            .with_context(|| format!("{what}: `{s}` is not a number"))
    };
    let ranks = number(ranks, "RANKS")? as i32;
    let (file_size, bs, ops) = (
        number(file_size, "FILE_SIZE")?,
        number(bs, "BS")?,
        number(ops, "OPS")?,
    );
    let (random, write) = match pattern.as_str() {
        "seq" | "stat" | "list" => (false, false),
        "random" => (true, false),
        "write" | "files" => (false, true),
        other => bail!("pattern `{other}`: seq, random, write, stat, list or files"),
    };
    let files = pattern == "files";
    // A storm reads its file once (so the replay prepares it), then probes.
    let storm = match pattern.as_str() {
        "stat" => Some(Op::Stat),
        "list" => Some(Op::Getdents),
        _ => None,
    };
    let reads = if storm.is_some() { 1 } else { ops };
    if bs == 0 || file_size < bs {
        bail!("BS must be at least 1 and at most FILE_SIZE");
    }
    let mut w = TraceWriter::create(&PathBuf::from(out), WriterOptions::new(Source::Synth))?;
    let slots = file_size / bs;
    // xorshift64: the same offsets every run, so replays are comparable.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut ts = 1_000_000_000i64;
    for rank in 0..ranks {
        let flags = write.then_some(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC);
        // A call of `rank` on `path` (its writes opened with `flags`).
        let file_row =
            |path, op, offset, size, ret, ts| call(rank, flags, path, op, offset, size, ret, ts);
        if files {
            let names: Vec<String> = (0..ops)
                .map(|i| format!("/bench/r{rank}/f{i}.bin"))
                .collect();
            for name in &names {
                for (op, offset, size, ret) in [
                    (Op::Open, None, None, 5),
                    (Op::Write, Some(0), Some(bs as i64), bs as i64),
                    (Op::Close, None, None, 0),
                ] {
                    ts += 1_000;
                    w.push(&file_row(name, op, offset, size, ret, ts))?;
                }
            }
            for name in &names {
                ts += 1_000;
                w.push(&file_row(name, Op::Unlink, None, None, 0, ts))?;
            }
            continue;
        }
        let path = format!("/bench/r{rank}.bin");
        let row = |op, offset, size, ret, ts| file_row(&path, op, offset, size, ret, ts);
        w.push(&row(Op::Open, None, None, 5, ts))?;
        for i in 0..reads {
            let slot = if random {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % slots
            } else {
                i % slots
            };
            ts += 1_000;
            let (offset, size) = ((slot * bs) as i64, bs as i64);
            let op = if write { Op::Write } else { Op::Read };
            w.push(&row(op, Some(offset), Some(size), size, ts))?;
        }
        ts += 1_000;
        w.push(&row(Op::Close, None, None, 0, ts))?;
        if let Some(probe) = storm {
            for _ in 0..ops {
                ts += 1_000;
                // getdents returns the bytes of the entries it read.
                let ret = if probe == Op::Getdents { 4 * 32 } else { 0 };
                w.push(&row(probe, None, None, ret, ts))?;
            }
        }
    }
    w.finish()?;
    Ok(())
}
