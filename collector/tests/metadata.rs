//! The calls a metadata server feels, with strace as ground truth: a Python
//! job that stats, lists, creates directories, writes checkpoints under a
//! temporary name and renames them, links, probes for missing files and
//! walks its tree through `os.scandir`, `os.walk` and `pathlib`. The same
//! job is run under strace and under the collector; the multisets of (op,
//! path, second path, result) under the job's directory must be equal.
//! Also: paths up to PATH_MAX and a 1,024-buffer `writev` are recorded whole.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use iorepro_format::Op;

const JOB: &str = include_str!("../../tests/jobs/metadata_storm.py");

type Key = (Op, String, Option<String>, i64);

/// (op, path, second path, result) of every metadata call (and open) under
/// `dir`, counted. Opens of directories are left out: the collector keeps
/// them only to resolve later relative paths.
fn calls(rows: &[Row], dir: &Path) -> BTreeMap<Key, usize> {
    let mut m = BTreeMap::new();
    for r in rows.iter().filter(|r| r.op.is_metadata()) {
        let judged = match r.op {
            Op::Symlink => r.path2.as_deref(),
            _ => r.path.as_deref(),
        };
        if !judged.is_some_and(|p| Path::new(p).starts_with(dir)) {
            continue;
        }
        if r.op == Op::Open && r.ret >= 0 && Path::new(r.path.as_deref().unwrap()).is_dir() {
            continue;
        }
        let key = (r.op, r.path.clone().unwrap(), r.path2.clone(), r.ret);
        *m.entry(key).or_insert(0) += 1;
    }
    m
}

#[test]
fn metadata_calls_match_strace() {
    if !can_trace() || !have("strace") || !have("python3") {
        return;
    }
    let scratch = scratch();
    let run = |name: &str| {
        let d = scratch.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    // Each tool gets its own, identical tree (the job creates it).
    let d_collect = run("job-c");
    let d_strace = run("job-s");
    let trace = scratch.path().join("trace");
    let o = collect(
        &trace,
        &[],
        &["python3", "-c", JOB, d_collect.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = scratch.path().join("strace.log");
    let st = std::process::Command::new("strace")
        .args(["-f", "-qq", "-ttt", "-T", "-y", "-o"])
        .arg(&log)
        .args(["python3", "-c", JOB, d_strace.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    let (_, captured) = read_rows(&trace);
    let expected = strace_rows(&log, scratch.path());
    // The two trees differ only in their directory's name.
    let rename = |m: BTreeMap<Key, usize>, from: &Path| -> BTreeMap<Key, usize> {
        let norm = |p: &str| p.replacen(from.to_str().unwrap(), "D", 1);
        m.into_iter()
            .map(|((op, p, p2, ret), n)| ((op, norm(&p), p2.map(|q| norm(&q)), ret), n))
            .collect()
    };
    let got = rename(calls(&captured, &d_collect), &d_collect);
    let want = rename(calls(&expected, &d_strace), &d_strace);
    for op in [Op::Stat, Op::Mkdir, Op::Rename, Op::Getdents, Op::Open] {
        assert!(
            want.keys().any(|k| k.0 == op),
            "strace saw no {op} calls: the job or the import is wrong"
        );
    }
    let missing: Vec<_> = want.iter().filter(|(k, n)| got.get(k) != Some(n)).collect();
    let extra: Vec<_> = got.iter().filter(|(k, n)| want.get(k) != Some(n)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "strace has (missing or counted differently in the trace): {missing:#?}\n\
         the trace has (not so in strace): {extra:#?}"
    );
    assert!(
        got.keys().any(|k| k.3 < 0),
        "failed calls (-errno) are recorded"
    );
}

#[test]
fn long_paths_and_a_1024_buffer_writev_are_whole() {
    if !can_trace() || !have("python3") {
        return;
    }
    let scratch = scratch();
    let d = scratch.path().to_str().unwrap().to_string();
    // Ten levels of 250-byte names: a path of more than 2,500 bytes.
    let job = r#"
import os, sys
d = sys.argv[1]
deep = d + "/" + "/".join(["n" * 250] * 10)
os.makedirs(deep)
with open(deep + "/f.bin", "wb") as f:
    f.write(b"x")
fd = os.open(d + "/v.bin", os.O_WRONLY | os.O_CREAT, 0o644)
os.writev(fd, [b"ab"] * 1024)
os.close(fd)
print(deep)
"#;
    let trace = scratch.path().join("trace");
    let o = collect(&trace, &[], &["python3", "-c", job, &d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let deep = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(deep.len() > 2500);
    let (_, rows) = read_rows(&trace);
    let file = format!("{deep}/f.bin");
    assert!(
        rows.iter()
            .any(|r| r.op == Op::Open && r.path.as_deref() == Some(file.as_str())),
        "the open of a {}-byte path is recorded with the whole path",
        file.len()
    );
    assert!(
        rows.iter()
            .any(|r| r.op == Op::Write && r.path.as_deref() == Some(file.as_str())),
        "and so is the write through its descriptor"
    );
    let v = format!("{d}/v.bin");
    let writev: Vec<&Row> = rows
        .iter()
        .filter(|r| r.op == Op::Write && r.path.as_deref() == Some(v.as_str()))
        .collect();
    assert_eq!(writev.len(), 1);
    assert_eq!(writev[0].size, Some(2048), "all 1,024 buffers are counted");
    assert_eq!(writev[0].ret, 2048);
}
