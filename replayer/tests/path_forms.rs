//! Every path form a whole capture holds replays or is left out with a
//! reason, and none stops the run: the root, the empty path of a call on a
//! descriptor, `DIR/.`, `DIR/..`, `a/./b`, trailing slashes, a file probed
//! as a directory, a path that is a file and later a directory, symlinks,
//! /proc, /sys, /dev, /dev/shm, pipes and sockets. What a replay leaves out
//! by default (code, system) is counted, and never prepared.

mod common;

use std::path::Path;

use common::*;
use iorepro_format::{EventRow, Op, Source, TraceWriter, WriterOptions};

/// (op, path, fd, offset, bytes or result, flags, path2)
type R<'a> = (
    Op,
    &'a str,
    i32,
    Option<i64>,
    i64,
    Option<i32>,
    Option<&'a str>,
);

fn trace_of(dir: &Path, rows: &[R<'_>]) -> std::path::PathBuf {
    let out = dir.join("trace");
    let mut w = TraceWriter::create(&out, WriterOptions::new(Source::Synth)).unwrap();
    for (i, &(op, path, fd, offset, ret, flags, path2)) in rows.iter().enumerate() {
        let data = matches!(op, Op::Read | Op::Write);
        w.push(&EventRow {
            ts_ns: 1_000_000_000 + i as i64 * 1_000_000,
            dur_ns: 10_000,
            host: "h",
            pid: 100,
            tid: 100,
            rank: Some(0),
            comm: "python",
            op,
            path: Some(path),
            fd: (fd >= 0).then_some(fd),
            offset,
            size: data.then_some(ret.max(0)),
            ret,
            flags,
            calls: 1,
            span_ns: None,
            path2,
            via: None,
            exchange: None,
            from_storage: None,
        })
        .unwrap();
    }
    w.finish().unwrap();
    out
}

const ENOENT: i64 = -(libc::ENOENT as i64);
const ENOTDIR: i64 = -(libc::ENOTDIR as i64);
const RO: Option<i32> = Some(libc::O_RDONLY);
const WC: Option<i32> = Some(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC);
const DIR: Option<i32> = Some(libc::O_RDONLY | libc::O_DIRECTORY);

fn forms_trace(dir: &Path) -> std::path::PathBuf {
    trace_of(
        dir,
        &[
            // The root, stat'd and listed.
            (Op::Stat, "/", -1, None, 0, None, None),
            (Op::Open, "/", 3, None, 3, DIR, None),
            (Op::Getdents, "/", 3, None, 512, None, None),
            (Op::Close, "/", 3, None, 0, None, None),
            // A directory by `DIR/.`, listed through the empty path of its descriptor.
            (Op::Stat, "/data/d/.", -1, None, 0, None, None),
            (Op::Open, "/data/d/", 4, None, 4, DIR, None),
            (Op::Getdents, "", 4, None, 512, None, None),
            (Op::Close, "/data/d", 4, None, 0, None, None),
            // A file by several spellings; fstat through the empty path.
            (Op::Open, "/data/d/f", 5, None, 5, RO, None),
            (Op::Stat, "", 5, None, 0, None, None),
            (Op::Read, "/data/d/f", 5, Some(0), 65536, None, None),
            (Op::Close, "/data/d/f", 5, None, 0, None, None),
            (Op::Stat, "/data/d/../d/./f", -1, None, 0, None, None),
            (Op::Stat, "/data/d/e/..", -1, None, 0, None, None),
            (Op::Stat, "/data//d//f", -1, None, 0, None, None),
            // The empty path naming nothing.
            (Op::Unlink, "", -1, None, ENOENT, None, None),
            // A file probed as a directory.
            (Op::Stat, "/data/tools/tool", -1, None, 0, None, None),
            (
                Op::Stat,
                "/data/tools/tool/__init__.py",
                -1,
                None,
                ENOTDIR,
                None,
                None,
            ),
            (Op::Open, "/data/tools/tool", 6, None, 6, RO, None),
            (Op::Read, "/data/tools/tool", 6, Some(0), 300, None, None),
            (Op::Close, "/data/tools/tool", 6, None, 0, None, None),
            // A file, then a directory at the same path.
            (Op::Open, "/data/x", 7, None, 7, WC, None),
            (Op::Write, "/data/x", 7, Some(0), 4096, None, None),
            (Op::Close, "/data/x", 7, None, 0, None, None),
            (Op::Unlink, "/data/x", -1, None, 0, None, None),
            (Op::Mkdir, "/data/x", -1, None, 0, Some(0o755), None),
            (Op::Open, "/data/x/y", 8, None, 8, WC, None),
            (Op::Write, "/data/x/y", 8, Some(0), 4096, None, None),
            (Op::Close, "/data/x/y", 8, None, 0, None, None),
            // A symlink made by the job, and stat'd through.
            (
                Op::Symlink,
                "/data/d/f",
                -1,
                None,
                0,
                None,
                Some("/data/x/link"),
            ),
            (Op::Stat, "/data/x/link", -1, None, 0, None, None),
            // /dev/shm is scratch, replayed.
            (
                Op::Open,
                "/dev/shm/buf",
                9,
                None,
                9,
                Some(libc::O_RDWR | libc::O_CREAT),
                None,
            ),
            (Op::Write, "/dev/shm/buf", 9, Some(0), 4096, None, None),
            (Op::Close, "/dev/shm/buf", 9, None, 0, None, None),
            (Op::Unlink, "/dev/shm/buf", -1, None, 0, None, None),
            // The kernel's files, devices, pipes and sockets.
            (Op::Read, "/proc/self/status", 10, Some(0), 900, None, None),
            (
                Op::Read,
                "/sys/fs/cgroup/cpu.max",
                11,
                Some(0),
                20,
                None,
                None,
            ),
            (Op::Read, "/dev/urandom", 12, Some(0), 16, None, None),
            (Op::Read, "pipe:[4242]", 13, None, 100, None, None),
            (Op::Write, "socket:[77]", 14, None, 100, None, None),
            (Op::Read, "anon_inode:[eventfd]", 15, None, 8, None, None),
        ],
    )
}

#[test]
fn every_path_form_replays_or_is_left_out_with_a_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = forms_trace(tmp.path());
    let target = tmp.path().join("target");
    let r = replay_ok(
        &trace,
        &target,
        // Clones, so that every form is made by both ranks.
        &[
            "--ranks",
            "2",
            "--roles",
            "all",
            "--data",
            "replicate",
            "--checkpoint",
            "replicate",
            "--json",
        ],
    );
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r:#}");
    assert_eq!(r["results_differed"], 0, "{r:#}");
    // Two ranks read the data file and the tool; the kernel's files are not read.
    assert_eq!(r["read_bytes"], 2 * (65536 + 300));
    assert_eq!(r["write_bytes"], 2 * 3 * 4096);
    let reasons = &r["left_out"]["reasons"];
    for (why, calls) in [
        ("root_directory", 4),
        ("empty_path", 1),
        ("kernel_file", 2),
        ("device", 1),
        ("pipe_socket_or_anonymous", 3),
    ] {
        assert_eq!(reasons[why]["calls"], calls, "{why}: {reasons:#}");
    }
    let rep = target.join("data/rep-0000/data");
    assert!(rep.join("d").is_dir());
    assert_eq!(std::fs::metadata(rep.join("d/f")).unwrap().len(), 65536);
    assert!(
        rep.join("tools/tool").is_file(),
        "a file probed as a directory stays a file"
    );
    for t in 0..2 {
        let own = target.join(format!("ranks/rank-{t:05}/data/x"));
        assert!(own.is_dir(), "{}", own.display());
        assert_eq!(std::fs::metadata(own.join("y")).unwrap().len(), 4096);
        assert!(std::fs::symlink_metadata(own.join("link"))
            .unwrap()
            .file_type()
            .is_symlink());
    }
    for outside in ["proc", "sys", "dev/urandom"] {
        assert!(!rep.join("..").join(outside).exists(), "{outside} prepared");
    }
}

#[test]
fn a_replay_leaves_out_code_by_default_and_prepares_only_what_it_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let site = "/venv/lib/python3.12/site-packages/torch";
    let so = format!("{site}/_C.so");
    let init = format!("{site}/__init__.py");
    let trace = trace_of(
        tmp.path(),
        &[
            (Op::Stat, &init, -1, None, 0, None, None),
            (
                Op::Stat,
                "/venv/lib/python3.12/site-packages/torch/missing.py",
                -1,
                None,
                ENOENT,
                None,
                None,
            ),
            (Op::Open, &so, 3, None, 3, RO, None),
            (Op::Read, &so, 3, Some(0), 4 << 20, None, None),
            (Op::Close, &so, 3, None, 0, None, None),
            (Op::Open, "/data/train/0.bin", 4, None, 4, RO, None),
            (Op::Read, "/data/train/0.bin", 4, Some(0), 65536, None, None),
            (Op::Close, "/data/train/0.bin", 4, None, 0, None, None),
            (Op::Read, "/etc/hosts", 5, Some(0), 200, None, None),
        ],
    );
    let target = tmp.path().join("target");
    let out = replay_into(
        &trace,
        &target,
        &["--ranks", "2", "--data", "replicate", "--json"],
    );
    let r = json_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("left out"),
        "said before it starts: {stderr}"
    );
    assert_eq!(r["read_bytes"], 2 * 65536);
    let left = &r["left_out"];
    assert_eq!(left["roles"]["code"]["calls"], 5, "{left:#}");
    assert_eq!(left["roles"]["code"]["read_bytes"], 4 << 20);
    assert_eq!(left["roles"]["system"]["calls"], 1);
    assert_eq!(left["reasons"]["role_code"]["files"], 3);
    // One replica per traced rank's copy: the dataset file twice, nothing else.
    assert_eq!(
        r["prepare"]["bytes_written"],
        2 * 65536,
        "{:#}",
        r["prepare"]
    );
    assert!(!target.join("data/rep-0000/venv").exists());
    // Asked for, code replays too.
    let t2 = tmp.path().join("t2");
    let all = replay_ok(&trace, &t2, &["--roles", "all", "--ranks", "2", "--json"]);
    // Each rank makes its own start-up reads (/etc/hosts is a system file,
    // not a kernel one: all roles read it too); the dataset is shared out.
    assert_eq!(all["read_bytes"], 2 * ((4 << 20) + 200) + 65536);
    // Code is read-only input: one copy for every replica, and the shared-out
    // dataset one copy too.
    assert_eq!(
        all["prepare"]["bytes_written"],
        (4 << 20) + 200 + 65536,
        "{:#}",
        all["prepare"]
    );
    assert!(t2.join("data/rep-0000").join(&so[1..]).is_file());
    assert!(!t2.join("data/rep-0001/venv").exists());
    // One copy of the shared-out dataset, in the first replica's place.
    assert!(t2.join("data/rep-0000/data/train/0.bin").is_file());
    assert!(!t2.join("data/rep-0001/data/train/0.bin").exists());
    let inc = replay_ok(
        &trace,
        &tmp.path().join("t3"),
        &["--include", "/venv/", "--exclude", "/data", "--json"],
    );
    assert_eq!(inc["read_bytes"], 4 << 20);
}

#[test]
fn empty_and_incomplete_traces_and_a_file_target_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = trace_of(tmp.path(), &[]);
    let target = tmp.path().join("target");
    let out = replay_into(&empty, &target, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds no calls"));
    assert!(replay_into(&empty, &target, &["--allow-incomplete"])
        .status
        .success());

    let dir = tmp.path().join("b");
    std::fs::create_dir(&dir).unwrap();
    let trace = trace_of(&dir, &[(Op::Read, "/data/f", 3, Some(0), 4096, None, None)]);
    let manifest = trace.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    m["complete"] = false.into();
    std::fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
    let out = replay_into(&trace, &target, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("incomplete"));
    assert!(replay_into(&trace, &target, &["--allow-incomplete"])
        .status
        .success());

    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let out = replay_into(&trace, &file, &["--allow-incomplete"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a directory"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_descriptor_the_trace_shows_on_another_file_is_reopened_on_it() {
    // A shell exec'ing another script reuses its script's descriptor with no
    // close in the trace (execve closed it).
    let tmp = tempfile::tempdir().unwrap();
    let trace = trace_of(
        tmp.path(),
        &[
            (Op::Open, "/data/a.sh", 9, None, 9, RO, None),
            (Op::Read, "/data/a.sh", 9, Some(0), 278, None, None),
            (Op::Read, "/data/b.sh", 9, Some(0), 3341, None, None),
            (Op::Read, "/data/b.sh", 9, Some(1162), 2179, None, None),
        ],
    );
    let r = replay_ok(&trace, &tmp.path().join("target"), &["--json"]);
    assert_eq!(r["read_bytes"], 278 + 3341 + 2179);
    assert_eq!(r["errors"].as_array().unwrap().len(), 0);
}
