use super::*;
use iorepro_format::event::EventRow;
use iorepro_format::manifest::Source;
use iorepro_format::writer::{TraceWriter, WriterOptions};

/// (op, path, ret, flags, path2)
type Row<'a> = (Op, &'a str, i64, i32, Option<&'a str>);

fn roles_of(rows: &[Row<'_>]) -> FileRoles {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let mut w = TraceWriter::create(&out, WriterOptions::new(Source::Synth)).unwrap();
    for (i, &(op, path, ret, flags, path2)) in rows.iter().enumerate() {
        w.push(&EventRow {
            ts_ns: 1_000_000_000 + i as i64 * 1000,
            dur_ns: 100,
            host: "h",
            pid: 1,
            tid: 1,
            rank: Some(0),
            comm: "python",
            op,
            path: Some(path),
            fd: Some(3),
            offset: matches!(op, Op::Read | Op::Write).then_some(0),
            size: matches!(op, Op::Read | Op::Write).then_some(ret.max(0)),
            ret,
            flags: Some(flags),
            calls: 1,
            span_ns: None,
            path2,
            via: None,
        })
        .unwrap();
    }
    w.finish().unwrap();
    FileRoles::compute(&TraceReader::open(&out).unwrap()).unwrap()
}

#[test]
fn roles_follow_what_the_job_did() {
    let wc = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
    let enoent = -(libc::ENOENT as i64);
    let r = roles_of(&[
        (
            Op::Stat,
            "/venv/lib/python3.12/site-packages/torch/__init__.py",
            0,
            0,
            None,
        ),
        (
            Op::Open,
            "/venv/lib/python3.12/site-packages/torch/_C.so",
            3,
            0,
            None,
        ),
        (Op::Read, "/work/data/train/0001.jpg", 4096, 0, None),
        (Op::Read, "/work/data/train/0002.jpg", 4096, 0, None),
        (Op::Stat, "/work/data/train/0003.jpg", 0, 0, None),
        (Op::Getdents, "/work/data/train", 512, 0, None),
        (Op::Stat, "/work/project/mod.py", enoent, 0, None),
        (Op::Open, "/work/ckpt/step-1.pt.tmp", 3, wc, None),
        (Op::Write, "/work/ckpt/step-1.pt.tmp", 1 << 20, 0, None),
        (
            Op::Rename,
            "/work/ckpt/step-1.pt.tmp",
            0,
            0,
            Some("/work/ckpt/step-1.pt"),
        ),
        (Op::Read, "/work/weights/model.safetensors", 8192, 0, None),
        (Op::Open, "/tmp/job/lock", 3, wc, None),
        (Op::Unlink, "/tmp/job/lock", 0, 0, None),
        (Op::Read, "/proc/self/status", 900, 0, None),
        (Op::Read, "/dev/urandom", 16, 0, None),
        (
            Op::Open,
            "/dev/shm/torch_1_2",
            3,
            libc::O_RDWR | libc::O_CREAT,
            None,
        ),
        (Op::Read, "/etc/hosts", 100, 0, None),
        (Op::Stat, "/", 0, 0, None),
        (Op::Stat, "/work/data/train/.", 0, 0, None),
        (Op::Read, "pipe:[99]", 10, 0, None),
        (
            Op::Read,
            "/home/u/.pyenv/versions/3.12/bin/python3.12",
            278,
            0,
            None,
        ),
    ]);
    let want = [
        (
            "/venv/lib/python3.12/site-packages/torch/__init__.py",
            Role::Code,
        ),
        ("/venv/lib/python3.12/site-packages/torch/_C.so", Role::Code),
        ("/work/data/train/0001.jpg", Role::Dataset),
        ("/work/data/train/0003.jpg", Role::Dataset),
        ("/work/data/train", Role::Dataset),
        ("/work/data/train/", Role::Dataset),
        ("/work/project/mod.py", Role::Code),
        ("/work/ckpt/step-1.pt.tmp", Role::Checkpoint),
        ("/work/ckpt/step-1.pt", Role::Checkpoint),
        ("/work/weights/model.safetensors", Role::Checkpoint),
        ("/tmp/job/lock", Role::Scratch),
        ("/proc/self/status", Role::System),
        ("/dev/urandom", Role::System),
        ("/dev/shm/torch_1_2", Role::Scratch),
        ("/etc/hosts", Role::System),
        ("/", Role::System),
        ("pipe:[99]", Role::System),
        ("/home/u/.pyenv/versions/3.12/bin/python3.12", Role::Code),
    ];
    for (p, role) in want {
        assert_eq!(r.role(p), role, "{p}");
    }
    let t = r.totals();
    assert_eq!(t[&Role::Dataset].read_bytes, 8192);
    assert_eq!(t[&Role::Checkpoint].write_bytes, 1 << 20);
    assert_eq!(t[&Role::Checkpoint].read_bytes, 8192);
    assert_eq!(r.files().count(), r.len());
}

#[test]
fn roles_read_as_lowercase_names() {
    assert_eq!(Role::Checkpoint.to_string(), "checkpoint");
    assert_eq!(
        serde_json::to_string(&Role::Dataset).unwrap(),
        "\"dataset\""
    );
    assert_eq!(Role::parse("scratch"), Some(Role::Scratch));
    assert_eq!(Role::parse("nope"), None);
}
