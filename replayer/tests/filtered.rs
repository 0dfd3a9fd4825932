//! A trace cut with `iorepro-trace filter` replays like any other, and a
//! replay says on which mounts the calls it leaves out were.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use iorepro_analysis::filter::{filter, Filter};
use iorepro_analysis::roles::Role;
use iorepro_format::{EventRow, Mount, Op, Source, TraceWriter, WriterOptions};

/// (rank, op, path, fd, offset, bytes or result, flags)
type R<'a> = (i32, Op, &'a str, i32, Option<i64>, i64, Option<i32>);

/// A job's start-up (an import from a venv on the root file system), its
/// dataset on an NFS mount read by two ranks, and a checkpoint on a
/// parallel file system.
fn job(dir: &Path) -> PathBuf {
    let out = dir.join("trace");
    let mut w = TraceWriter::create(&out, WriterOptions::new(Source::Ebpf)).unwrap();
    let mount = |p: &str, t: &str| Mount {
        mount_point: p.into(),
        fs_type: t.into(),
        source: format!("{t}-dev"),
    };
    w.set_mounts(vec![
        mount("/", "ext4"),
        mount("/mnt/nfs", "nfs4"),
        mount("/mnt/pfs", "lustre"),
    ]);
    let so = "/venv/lib/python3.12/site-packages/torch/_C.so";
    let rows: Vec<R<'_>> = vec![
        (0, Op::Open, so, 3, None, 3, Some(libc::O_RDONLY)),
        (0, Op::Read, so, 3, Some(0), 1 << 20, None),
        (0, Op::Close, so, 3, None, 0, None),
        (
            0,
            Op::Open,
            "/mnt/nfs/train/0.bin",
            4,
            None,
            4,
            Some(libc::O_RDONLY),
        ),
        (
            1,
            Op::Open,
            "/mnt/nfs/train/1.bin",
            4,
            None,
            4,
            Some(libc::O_RDONLY),
        ),
        (0, Op::Read, "/mnt/nfs/train/0.bin", 4, Some(0), 65536, None),
        (1, Op::Read, "/mnt/nfs/train/1.bin", 4, Some(0), 32768, None),
        (0, Op::Close, "/mnt/nfs/train/0.bin", 4, None, 0, None),
        (1, Op::Close, "/mnt/nfs/train/1.bin", 4, None, 0, None),
        (
            0,
            Op::Open,
            "/mnt/pfs/ckpt/step-1.pt",
            5,
            None,
            5,
            Some(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC),
        ),
        (
            0,
            Op::Write,
            "/mnt/pfs/ckpt/step-1.pt",
            5,
            Some(0),
            131072,
            None,
        ),
        (0, Op::Close, "/mnt/pfs/ckpt/step-1.pt", 5, None, 0, None),
    ];
    for (i, &(rank, op, path, fd, offset, ret, flags)) in rows.iter().enumerate() {
        let data = matches!(op, Op::Read | Op::Write);
        w.push(&EventRow {
            ts_ns: 1_000_000_000 + i as i64 * 10_000_000,
            dur_ns: 10_000,
            host: "h",
            pid: 100 + rank,
            tid: 100 + rank,
            rank: Some(rank),
            comm: "python",
            op,
            path: Some(path),
            fd: Some(fd),
            offset,
            size: data.then_some(ret),
            ret,
            flags,
            calls: 1,
            span_ns: None,
            path2: None,
            via: None,
            exchange: None,
            from_storage: None,
        })
        .unwrap();
    }
    w.finish().unwrap();
    out
}

#[test]
fn left_out_calls_by_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = job(tmp.path());
    let r = replay_ok(&trace, &tmp.path().join("t"), &["--ranks", "2", "--json"]);
    let mounts = &r["left_out"]["mounts"];
    assert_eq!(mounts["/"]["calls"], 3, "{mounts:#}");
    assert_eq!(mounts["/"]["read_bytes"], 1 << 20);
    assert!(mounts.get("/mnt/nfs").is_none(), "{mounts:#}");
}

#[test]
fn a_filtered_trace_replays() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = job(tmp.path());
    let cut = tmp.path().join("cut");
    let f = Filter {
        roles: vec![Role::Dataset],
        ranks: vec![1],
        ..Default::default()
    };
    let done = filter(&trace, &cut, &f, 1 << 20).unwrap();
    assert_eq!(done.events_in, 12);
    assert_eq!(done.events, 3, "rank 1's open, read and close");
    assert_eq!(done.manifest.mounts.as_ref().map(Vec::len), Some(3));
    let r = replay_ok(
        &cut,
        &tmp.path().join("t"),
        &["--ranks", "2", "--data", "replicate", "--json"],
    );
    assert_eq!(r["read_bytes"], 2 * 32768, "{r:#}");
    assert_eq!(r["write_bytes"], 0);
    assert_eq!(r["left_out"]["calls"], 0);
    assert_eq!(r["errors"], serde_json::json!([]), "{r:#}");
}
