//! fio is the ground truth: every read and write it logs in its own
//! `write_iolog` must appear in the trace with the same file, offset and
//! length, and nothing else may (the multisets are equal).

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::*;
use iorepro_traces::Op;

const FILE_SIZE: usize = 1 << 20;

/// Jobs covering ioengine=sync (read/write after lseek) and psync
/// (pread/pwrite), sequential and random, reads and writes, with fsync.
const JOBS: &[(&str, &str, &str)] = &[
    ("sync_seqread", "sync", "rw=read"),
    ("sync_randread", "sync", "rw=randread"),
    ("sync_randwrite", "sync", "rw=randwrite\nfsync=4"),
    ("psync_seqwrite", "psync", "rw=write\nfsync=8"),
    (
        "psync_randrw",
        "psync",
        "rw=randrw\nbsrange=512-16k\nfsync=5",
    ),
];

type Key = (String, Op, i64, i64);

fn parse_iolog(log: &Path, counts: &mut HashMap<Key, i64>, syncs: &mut HashMap<String, i64>) {
    let text = std::fs::read_to_string(log).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    // Version 3 logs start each line with a timestamp.
    let skip = usize::from(header.contains("version 3"));
    for line in lines {
        let f: Vec<&str> = line.split_whitespace().skip(skip).collect();
        match f.as_slice() {
            [file, "read", off, len] | [file, "write", off, len] => {
                let op = if f[1] == "read" { Op::Read } else { Op::Write };
                *counts
                    .entry((
                        file.to_string(),
                        op,
                        off.parse().unwrap(),
                        len.parse().unwrap(),
                    ))
                    .or_default() += 1;
            }
            [file, "sync", ..] => *syncs.entry(file.to_string()).or_default() += 1,
            _ => {}
        }
    }
}

#[test]
fn fio_iolog_equals_the_captured_reads_and_writes() {
    if !can_trace() || !have("fio") {
        return;
    }
    let dir = scratch();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let mut jobfile = format!(
        "[global]\ndirectory={}\nsize={FILE_SIZE}\nbs=4k\nrandrepeat=1\ninvalidate=0\n",
        data.display()
    );
    for (name, engine, extra) in JOBS {
        let file = data.join(format!("{name}.dat"));
        // Laid out beforehand, so fio's own layout writes are not part of the run.
        write_file(&file, FILE_SIZE);
        jobfile += &format!(
            "\n[{name}]\nioengine={engine}\nfilename={name}.dat\n{extra}\nwrite_iolog={}\n",
            dir.path().join(format!("{name}.iolog")).display()
        );
    }
    let job = dir.path().join("jobs.fio");
    std::fs::write(&job, jobfile).unwrap();
    let out = dir.path().join("trace");
    let prefix = data.to_str().unwrap();
    let o = collect(
        &out,
        &["--path-prefix", prefix],
        &["fio", "--output=/dev/null", job.to_str().unwrap()],
    );
    assert!(o.status.success(), "fio under the collector failed");

    let mut want = HashMap::new();
    let mut want_syncs = HashMap::new();
    for (name, _, _) in JOBS {
        parse_iolog(
            &dir.path().join(format!("{name}.iolog")),
            &mut want,
            &mut want_syncs,
        );
    }
    // fio logs file names as given (relative to `directory`) or absolute.
    let abs = |f: &str| {
        if f.starts_with('/') {
            f.to_string()
        } else {
            data.join(f).to_string_lossy().into_owned()
        }
    };
    let want: HashMap<Key, i64> = want
        .into_iter()
        .map(|((f, op, o, l), n)| ((abs(&f), op, o, l), n))
        .collect();

    let (manifest, rows) = read_rows(&out);
    assert_eq!(manifest.dropped_events, 0);
    let mut got: HashMap<Key, i64> = HashMap::new();
    let mut got_syncs: HashMap<String, i64> = HashMap::new();
    for r in &rows {
        let path = r
            .path
            .clone()
            .expect("every row of a data file has its path");
        match r.op {
            Op::Read | Op::Write => {
                assert_eq!(r.ret, r.size.unwrap(), "fio moves whole blocks: {r:?}");
                *got.entry((path, r.op, r.offset.unwrap(), r.size.unwrap()))
                    .or_default() += 1;
            }
            Op::Fsync | Op::Fdatasync => *got_syncs.entry(path).or_default() += 1,
            _ => {}
        }
    }
    let total: i64 = want.values().sum();
    assert!(total > 1000, "fio logged {total} ios");
    let missing: Vec<_> = want
        .iter()
        .filter(|(k, n)| got.get(*k) != Some(n))
        .take(5)
        .collect();
    let extra: Vec<_> = got
        .iter()
        .filter(|(k, n)| want.get(*k) != Some(n))
        .take(5)
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "differs from fio's iolog: missing {missing:?}, extra {extra:?}"
    );
    let want_syncs: HashMap<String, i64> =
        want_syncs.into_iter().map(|(f, n)| (abs(&f), n)).collect();
    for (file, n) in &want_syncs {
        assert!(
            got_syncs.get(file).copied().unwrap_or(0) >= *n,
            "fsyncs of {file}: want {n}, got {got_syncs:?}"
        );
    }
}
