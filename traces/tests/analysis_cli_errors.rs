//! Bad input to every analysis subcommand: exit status 2 and one line on
//! stderr that names the file.

mod analysis_util;

use analysis_util::*;
use predicates::prelude::*;

fn fails_with_one_line(args: &[&str], names: &str) {
    let out = trace_cmd().args(args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: one line, got: {err}"
    );
    assert!(err.starts_with("Error: "), "{err}");
    assert!(
        predicate::str::contains(names).eval(&err),
        "{args:?}: `{err}` does not name `{names}`"
    );
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let good = synth(d, "good", &workload(2, 1, 4, "sequential"));
    let good = good.to_str().unwrap();
    let not_trace = d.join("empty");
    std::fs::create_dir(&not_trace).unwrap();
    let nt = not_trace.to_str().unwrap();
    let junk = d.join("junk.parquet");
    std::fs::write(&junk, b"not parquet at all").unwrap();
    let junk = junk.to_str().unwrap();
    let bad_log = d.join("bad.iolog");
    std::fs::write(&bad_log, "fio version 3 iolog\n0 /x add\nzz /x read 0 10\n").unwrap();
    let bad_strace = d.join("strace.txt");
    std::fs::write(&bad_strace, "hello\nworld\n").unwrap();
    let o = |n: &str| d.join(n).to_str().unwrap().to_string();

    fails_with_one_line(&["summary", nt, "--json"], nt);
    fails_with_one_line(&["phases", junk], junk);
    fails_with_one_line(&["plot", nt, "-o", &o("x.svg")], nt);
    fails_with_one_line(&["plot", good, "-o", &o("x.jpg")], "x.jpg");
    fails_with_one_line(&["plot", good, "-o", &o("nodir/x.svg")], "nodir");
    fails_with_one_line(&["compare", good, nt], nt);
    fails_with_one_line(&["compare", junk, good], junk);
    fails_with_one_line(&["export", nt, "--fio-iolog", &o("logs")], nt);
    fails_with_one_line(
        &[
            "import",
            "--fio-iolog",
            bad_log.to_str().unwrap(),
            "-o",
            &o("i1"),
        ],
        "line 3",
    );
    fails_with_one_line(&["import", "--fio-iolog", good, "-o", &o("i2")], "iolog");
    fails_with_one_line(
        &[
            "import",
            "--strace",
            bad_strace.to_str().unwrap(),
            "-o",
            &o("i3"),
        ],
        "strace.txt",
    );
    fails_with_one_line(&["merge", good, nt, "-o", &o("m")], nt);
    fails_with_one_line(&["merge", good, good, "-o", good], "not empty");
    // Usage errors are clap's: also status 2.
    let out = trace_cmd().args(["export", good]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_reader_that_stops_early_ends_the_command_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let tmp = tempfile::tempdir().unwrap();
    // Thousands of files, every one read: `files --json` writes far more
    // than a pipe holds (64 KiB), so the command is still writing when the
    // reader goes.
    let toml = workload(2, 1, 10, "random")
        .replace("files = 16", "files = 4000")
        .replace("reads_per_step = 6", "reads_per_step = 400");
    let trace = synth(tmp.path(), "many", &toml);
    let mut child = trace_cmd()
        .args(["files", "--json", trace.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 1];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The pipe's reader is gone (as `| head -c 1` leaves it).
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let listing = json(&["files", "--json", trace.to_str().unwrap()]);
    assert!(
        listing.to_string().len() > 256 << 10,
        "the listing must outgrow a pipe's buffer"
    );
    assert!(err.is_empty(), "a closed pipe is no error to report: {err}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
}
