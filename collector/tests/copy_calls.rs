//! Bytes the kernel moves between descriptors, with strace as ground truth:
//! `sendfile` with and without an offset, `copy_file_range` with explicit
//! offsets, `splice` from a file into a pipe and from the pipe into a file,
//! a failed `sendfile`, `shutil.copyfile` (sendfile), `cp` (copy_file_range)
//! and busybox `cat` into a file (sendfile). Each call must be a read of
//! its source file and a write of its destination file, named by `via`,
//! with the bytes it moved, at the offsets strace shows (pipe ends have no
//! row), and a failed call one row on its source. The strace log, imported
//! (`iorepro-trace import --strace`), must give the same rows. Replayed
//! into a directory, each copy between two files is made as the call it
//! was (strace of the replay), and the report counts them.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use iorepro_format::Op;

const JOB: &str = r#"
import os, sys, shutil
d = sys.argv[1]
src = f"{d}/src.bin"
with open(src, "wb") as f:
    f.write(bytes(range(256)) * 1024)                 # 256 KiB
i = os.open(src, os.O_RDONLY)
o = os.open(f"{d}/sf.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(o, b"h" * 100)
assert os.sendfile(o, i, 4096, 10000) == 10000        # src @4096 -> sf @100
os.lseek(i, 1000, 0)
assert os.sendfile(o, i, None, 5000) == 5000          # src @1000 -> sf @10100
os.close(o)
o = os.open(f"{d}/cfr.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
assert os.copy_file_range(i, o, 20000, 8192, 512) == 20000   # src @8192 -> cfr @512
r, w = os.pipe()
os.lseek(i, 3000, 0)
assert os.splice(i, w, 4096) == 4096                  # src @3000 -> pipe
o2 = os.open(f"{d}/sp.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
assert os.splice(r, o2, 4096, offset_dst=777) == 4096 # pipe -> sp @777
try:
    os.sendfile(o2, o2, 0, 10)                        # EBADF: sp.bin is write-only
except OSError:
    pass
shutil.copyfile(src, f"{d}/copy.bin")
"#;

/// One row a copy call should leave: (via, op, path, offset if known, size, ret).
type Want = (String, Op, String, Option<i64>, i64, i64);

/// One end of a call as `strace -y` prints it: `3</path>` or `5<pipe:[..]>`.
fn end_path(arg: &str) -> Option<String> {
    let p = arg.split_once('<')?.1.strip_suffix('>')?;
    p.starts_with('/').then(|| p.to_string())
}

/// An offset argument: `NULL`, `[N]` or `[N] => [M]`; the start N.
fn offset_arg(arg: &str) -> Option<i64> {
    let n = arg.strip_prefix('[')?.split(']').next()?;
    n.parse().ok()
}

/// The rows every sendfile, copy_file_range and splice call in an
/// `strace -f -y` log stands for, in call order, one group per call.
fn from_strace(log: &str) -> Vec<Vec<Want>> {
    let mut calls = Vec::new();
    for line in log.lines() {
        let Some((_pid, call)) = line.split_once(' ') else {
            continue;
        };
        // `-ttt`: the entry time, then the call.
        let Some((_ts, call)) = call.trim_start().split_once(' ') else {
            continue;
        };
        let Some((name, rest)) = call.split_once('(') else {
            continue;
        };
        if !["sendfile", "copy_file_range", "splice"].contains(&name) {
            continue;
        }
        let Some((args, ret)) = rest.rsplit_once(") = ") else {
            continue;
        };
        // `-T`: the call's duration closes the line.
        let ret = ret.rsplit_once(" <").map_or(ret, |(r, _)| r);
        let ret: i64 = ret.split_whitespace().next().unwrap().parse().unwrap();
        let errno = |r: &str| -> i64 {
            match r.split_whitespace().nth(1) {
                Some("EBADF") => -9,
                Some("EINVAL") => -22,
                other => panic!("an errno this test does not know: {other:?} in {line}"),
            }
        };
        let ret = if ret < 0 {
            errno(
                rest.rsplit_once(") = ")
                    .unwrap()
                    .1
                    .rsplit_once(" <")
                    .unwrap()
                    .0,
            )
        } else {
            ret
        };
        // "[4096] => [14096]" holds a comma-free " => ": split on ", ".
        let a: Vec<&str> = args.split(", ").collect();
        // (source, its offset, destination, its offset, length)
        let (from, from_off, to, to_off, len) = match name {
            "sendfile" => (a[1], offset_arg(a[2]), a[0], None, a[3]),
            "copy_file_range" | "splice" => (a[0], offset_arg(a[1]), a[2], offset_arg(a[3]), a[4]),
            _ => continue,
        };
        let len: i64 = len.parse().unwrap();
        let size = if ret >= 0 { ret } else { len };
        let mut rows = Vec::new();
        let (from, to) = (end_path(from), end_path(to));
        if let Some(p) = &from {
            rows.push((name.to_string(), Op::Read, p.clone(), from_off, size, ret));
        }
        if let Some(p) = to.filter(|_| ret >= 0 || from.is_none()) {
            rows.push((name.to_string(), Op::Write, p, to_off, size, ret));
        }
        if !rows.is_empty() {
            calls.push(rows);
        }
    }
    calls
}

/// The trace's rows of copy calls under `dir`, one group per call (the rows
/// of one call share its start time), in call order.
fn from_trace(rows: &[Row], dir: &Path) -> Vec<Vec<Want>> {
    let mut calls: Vec<(i64, Vec<Want>)> = Vec::new();
    for r in rows.iter().filter(|r| r.under(dir)) {
        let Some(via) = r.via.as_deref().filter(|v| *v != "io_uring") else {
            continue;
        };
        let want = (
            via.to_string(),
            r.op,
            r.path.clone().unwrap(),
            r.offset,
            r.size.unwrap(),
            r.ret,
        );
        match calls.last_mut() {
            Some((ts, group)) if *ts == r.ts_ns => group.push(want),
            _ => calls.push((r.ts_ns, vec![want])),
        }
    }
    calls
        .into_iter()
        .map(|(_, mut g)| {
            g.sort_by_key(|w| w.1 != Op::Read);
            g
        })
        .collect()
}

fn shell_job(dir: &Path, busybox: bool) -> String {
    let d = dir.to_str().unwrap();
    let mut sh = format!("python3 -c \"$JOB\" {d} && cp {d}/src.bin {d}/cp.bin");
    if busybox {
        sh += &format!(" && busybox cat {d}/src.bin > {d}/bb.bin");
    }
    sh
}

#[test]
fn copy_calls_match_strace() {
    if !can_trace() || !have("strace") || !have("python3") || !have("cp") {
        return;
    }
    let busybox = Command::new("sh")
        .args(["-c", "command -v busybox"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !busybox {
        eprintln!("busybox is not installed: its cat (sendfile) is left out");
    }
    let scratch = scratch();
    let d_collect = scratch.path().join("job-c");
    let d_strace = scratch.path().join("job-s");
    std::fs::create_dir_all(&d_collect).unwrap();
    std::fs::create_dir_all(&d_strace).unwrap();

    let trace = scratch.path().join("trace");
    let mut c = collector();
    c.env("JOB", JOB).arg("--out").arg(&trace).args([
        "--",
        "sh",
        "-c",
        &shell_job(&d_collect, busybox),
    ]);
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let log = scratch.path().join("strace.log");
    let st = Command::new("strace")
        .args(["-f", "-ttt", "-T", "-qq", "-y", "-e", "signal=none", "-o"])
        .arg(&log)
        .env("JOB", JOB)
        .args(["sh", "-c", &shell_job(&d_strace, busybox)])
        .status()
        .unwrap();
    assert!(st.success());

    let norm = |calls: Vec<Vec<Want>>, dir: &Path| -> Vec<Vec<Want>> {
        let from = dir.to_str().unwrap();
        calls
            .into_iter()
            .map(|g| {
                g.into_iter()
                    .map(|(v, op, p, off, size, ret)| {
                        (v, op, p.replacen(from, "D", 1), off, size, ret)
                    })
                    .collect()
            })
            .collect()
    };
    let imported = strace_rows(&log, scratch.path());
    let imported = norm(from_trace(&imported, &d_strace), &d_strace);
    let log = std::fs::read_to_string(&log).unwrap();
    let want = norm(from_strace(&log), &d_strace);
    let (_, rows) = read_rows(&trace);
    let got = norm(from_trace(&rows, &d_collect), &d_collect);

    // The job did what this test means to check.
    for via in ["sendfile", "copy_file_range", "splice"] {
        assert!(
            want.iter().flatten().any(|w| w.0 == via),
            "strace saw no {via} call: {log}"
        );
    }
    assert!(want.iter().flatten().any(|w| w.5 < 0), "a failed call");
    assert_eq!(
        got.len(),
        want.len(),
        "one group of rows per call\ntrace: {got:#?}\nstrace: {want:#?}"
    );
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.len(), w.len(), "rows of one call: {g:?} against {w:?}");
        for (g, w) in g.iter().zip(w) {
            // strace shows an offset only where the call was given one.
            let w_off = w.3.or(g.3);
            assert_eq!(
                (&g.0, g.1, &g.2, g.3, g.4, g.5),
                (&w.0, w.1, &w.2, w_off, w.4, w.5),
                "(via, op, path, offset, size, ret)\ntrace: {got:#?}\nstrace: {want:#?}"
            );
        }
    }

    // The strace log imported: the same calls, rows and offsets as captured.
    assert_eq!(imported, got, "imported strace log against the capture");

    // Where a call used the file positions, the offsets the job set up.
    let at = |via: &str, op: Op, path: &str| -> Vec<Option<i64>> {
        got.iter()
            .flatten()
            .filter(|w| w.0 == via && w.1 == op && w.2 == path)
            .map(|w| w.3)
            .collect()
    };
    assert_eq!(
        at("sendfile", Op::Write, "D/sf.bin"),
        [Some(100), Some(10100)]
    );
    assert_eq!(
        at("sendfile", Op::Read, "D/src.bin")[..2],
        [Some(4096), Some(1000)]
    );
    assert_eq!(at("splice", Op::Read, "D/src.bin"), [Some(3000)]);
    assert_eq!(at("splice", Op::Write, "D/sp.bin"), [Some(777)]);
    assert_eq!(
        at("copy_file_range", Op::Write, "D/cp.bin"),
        [Some(0), Some(262144)]
    );
    assert_eq!(
        at("sendfile", Op::Write, "D/copy.bin"),
        [Some(0), Some(262144)]
    );
    if busybox {
        assert_eq!(
            at("sendfile", Op::Write, "D/bb.bin"),
            [Some(0), Some(262144)]
        );
    }
    // Every byte copied is a byte read and a byte written.
    let moved = |op: Op| -> i64 {
        got.iter()
            .flatten()
            .filter(|w| w.1 == op && w.5 > 0)
            .map(|w| w.5)
            .sum()
    };
    let copies = if busybox { 3 } else { 2 };
    assert_eq!(
        moved(Op::Read),
        10000 + 5000 + 20000 + 4096 + copies * 262144
    );
    assert_eq!(
        moved(Op::Write),
        10000 + 5000 + 20000 + 4096 + copies * 262144
    );

    replayed_as_the_same_calls(scratch.path(), &trace, &got);
}

/// A copy between two files, by the names of its ends: (via, source,
/// its offset, destination, its offset where the call took one, bytes).
type Copy = (String, String, Option<i64>, String, Option<i64>, i64);

/// The copies with a file at both ends among `calls` (rows grouped per
/// call), each end named by its file's name.
fn copies(calls: &[Vec<Want>]) -> Vec<Copy> {
    let name = |p: &str| p.rsplit('/').next().unwrap().to_string();
    calls
        .iter()
        .filter_map(|g| match g.as_slice() {
            [r, w] if r.1 == Op::Read && w.1 == Op::Write && r.5 > 0 => {
                let to = if r.0 == "sendfile" { None } else { w.3 };
                Some((r.0.clone(), name(&r.2), r.3, name(&w.2), to, r.5))
            }
            _ => None,
        })
        .collect()
}

/// The trace replayed into a directory (under strace): each copy between
/// two files is the call it was, the same bytes at the same offsets, and
/// the report counts them; the splice's halves (a pipe at one end) are a
/// read and a write.
fn replayed_as_the_same_calls(scratch: &Path, trace: &Path, traced: &[Vec<Want>]) {
    let log = scratch.join("replay-strace.log");
    let report = iorepro_tests::bins::run_json(
        Command::new("strace")
            .args(["-f", "-ttt", "-T", "-qq", "-y", "-e", "signal=none"])
            .args(["-e", "trace=sendfile,copy_file_range,splice", "-o"])
            .arg(&log)
            .arg(iorepro_tests::bins::bin("iorepro-replay"))
            .arg(trace)
            .arg("--target")
            .arg(scratch.join("replayed"))
            .arg("--json"),
    );
    let log = std::fs::read_to_string(&log).unwrap();
    let made = copies(&from_strace(&log));
    let want = copies(traced);
    assert!(want.len() >= 4, "{want:#?}");
    assert_eq!(made, want, "the replay's copies (strace) against the job's");
    assert_eq!(report["copies"]["made"], want.len() as u64, "{report:#}");
    // The splice into the pipe and the one out of it.
    assert_eq!(report["copies"]["split"], 2, "{report:#}");
}
