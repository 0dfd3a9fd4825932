//! fio is the ground truth: every read and write it logs in its own
//! `write_iolog` must appear in the trace with the same file, offset and
//! length, and nothing else may (the multisets are equal).

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::*;
use iorepro_format::Op;

const FILE_SIZE: usize = 1 << 20;

/// Jobs covering ioengine=sync (read/write after lseek), psync
/// (pread/pwrite) and io_uring (requests, several in flight), sequential and
/// random, reads and writes, with fsync.
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
    ("uring_seqread", "io_uring", "rw=read\niodepth=8"),
    ("uring_randread", "io_uring", "rw=randread\niodepth=16"),
    (
        "uring_randwrite",
        "io_uring",
        "rw=randwrite\niodepth=8\nfsync=8",
    ),
    (
        "uring_randrw",
        "io_uring",
        "rw=randrw\nbsrange=512-16k\niodepth=4\nfsync=5",
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
    let (manifest, rows) = read_rows(&out);
    assert_eq!(manifest.dropped_events, 0);
    // A kernel whose io_uring tracepoints the collector cannot read (before
    // 6.4) captures the rest and says so: the io_uring jobs are then judged
    // by their absence.
    let uring_missing = missing_capability(&manifest, "io_uring");
    if let Some(why) = &uring_missing {
        eprintln!("io_uring jobs left out: the capture says {why}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("io_uring requests not captured"),
            "the user is told io_uring is not captured"
        );
    }
    let uring = uring_missing.is_none();
    let judged = |f: &str| uring || !f.contains("uring_");
    let want: HashMap<Key, i64> = want
        .into_iter()
        .filter(|((f, ..), _)| judged(f))
        .map(|((f, op, o, l), n)| ((abs(&f), op, o, l), n))
        .collect();
    want_syncs.retain(|f, _| judged(f));
    let mut got: HashMap<Key, i64> = HashMap::new();
    let mut got_syncs: HashMap<String, i64> = HashMap::new();
    for r in &rows {
        let path = r
            .path
            .clone()
            .expect("every row of a data file has its path");
        let via_ring = path.contains("/uring_");
        assert!(uring || !r.io_uring, "no io_uring rows when not captured");
        if matches!(r.op, Op::Read | Op::Write | Op::Fsync) {
            assert_eq!(
                r.io_uring, via_ring,
                "io_uring requests are marked so: {r:?}"
            );
        }
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
    // The rest is checked; the io_uring jobs were not.
    if let Some(why) = uring_missing {
        io_uring_not_captured(&why);
    }
}

/// io_uring requests that name paths (openat, statx) and close: their path,
/// result and descriptor, failures included, attributed to the thread that
/// submitted them.
const URING_OPEN_C: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <sys/stat.h>
static int run(struct io_uring *ring) {
    struct io_uring_cqe *cqe;
    io_uring_submit(ring);
    io_uring_wait_cqe(ring, &cqe);
    int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return res;
}
int main(int argc, char **argv) {
    struct io_uring ring;
    if (io_uring_queue_init(8, &ring, 0) < 0) return 3;
    char path[4096];
    snprintf(path, sizeof path, "%s/data.bin", argv[1]);
    io_uring_prep_openat(io_uring_get_sqe(&ring), AT_FDCWD, path, O_RDONLY, 0);
    int fd = run(&ring);
    struct statx stx;
    io_uring_prep_statx(io_uring_get_sqe(&ring), AT_FDCWD, path, 0, STATX_SIZE, &stx);
    run(&ring);
    char buf[4096];
    for (int i = 0; i < 4; i++) {
        io_uring_prep_read(io_uring_get_sqe(&ring), fd, buf, sizeof buf, i * 8192);
        run(&ring);
    }
    snprintf(path, sizeof path, "%s/missing.bin", argv[1]);
    io_uring_prep_openat(io_uring_get_sqe(&ring), AT_FDCWD, path, O_RDONLY, 0);
    run(&ring);
    io_uring_prep_close(io_uring_get_sqe(&ring), fd);
    run(&ring);
    return 0;
}
"#;

#[test]
fn io_uring_opens_statx_reads_and_closes_are_recorded() {
    if !can_trace() || !have("cc") {
        return;
    }
    if !std::path::Path::new("/usr/include/liburing.h").exists() {
        iorepro_tests::skip::cannot_run(
            "liburing-dev is not installed (cargo xtask setup installs it)",
        );
        return;
    }
    let dir = scratch();
    let data = dir.path().join("data.bin");
    write_file(&data, 65536);
    let bin = compile_c_with(dir.path(), "uring", URING_OPEN_C, &["-luring"]);
    let out = dir.path().join("trace");
    let d = dir.path().to_str().unwrap();
    let o = collect(&out, &["--path-prefix", d], &[bin.to_str().unwrap(), d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (manifest, rows) = read_rows(&out);
    if let Some(why) = missing_capability(&manifest, "io_uring") {
        assert!(!rows.iter().any(|r| r.io_uring));
        return io_uring_not_captured(&why);
    }
    let ring: Vec<(Op, String, i64, Option<i64>)> = rows
        .iter()
        .filter(|r| r.io_uring)
        .map(|r| (r.op, r.path.clone().unwrap_or_default(), r.ret, r.offset))
        .collect();
    let file = data.to_str().unwrap().to_string();
    let missing = format!("{d}/missing.bin");
    let fd = ring[0].2;
    assert!(fd >= 0, "{ring:?}");
    let want = vec![
        (Op::Open, file.clone(), fd, None),
        (Op::Stat, file.clone(), 0, None),
        (Op::Read, file.clone(), 4096, Some(0)),
        (Op::Read, file.clone(), 4096, Some(8192)),
        (Op::Read, file.clone(), 4096, Some(16384)),
        (Op::Read, file.clone(), 4096, Some(24576)),
        (Op::Open, missing, -(libc::ENOENT as i64), None),
        (Op::Close, file, 0, None),
    ];
    assert_eq!(ring, want);
}
