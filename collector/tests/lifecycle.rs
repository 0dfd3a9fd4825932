//! The collector's own life: the job's exit status is its own, a stop signal
//! closes the trace cleanly, a SIGKILL leaves finished segments readable, and
//! a flood that overflows the ring buffer is counted exactly.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use iorepro_format::{Op, TraceReader};

#[test]
fn a_failing_job_keeps_its_exit_status_and_a_complete_trace() {
    if !can_trace() {
        return;
    }
    let dir = scratch();
    let f = dir.path().join("in.dat");
    write_file(&f, 10000);
    let out = dir.path().join("trace");
    let o = collect(
        &out,
        &[],
        &[
            "sh",
            "-c",
            &format!("cat {} > /dev/null; exit 7", f.display()),
        ],
    );
    assert_eq!(o.status.code(), Some(7));
    let (manifest, rows) = read_rows(&out);
    assert!(manifest.complete);
    let read: i64 = rows_for(&rows, &f)
        .iter()
        .filter(|r| r.op == Op::Read)
        .map(|r| r.ret)
        .sum();
    assert_eq!(read, 10000);
    let o = collect(&dir.path().join("t2"), &[], &["/nonexistent/program"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/program"));
}

#[test]
fn sigterm_stops_the_job_and_closes_the_trace() {
    let Some(mut cap) = ReaderCapture::start(&[], Stdio::piped()) else {
        return;
    };
    std::thread::sleep(Duration::from_millis(800));
    // SAFETY: signals the collector we started.
    unsafe { libc::kill(cap.collector.id() as i32, libc::SIGTERM) };
    let status = cap.collector.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(128 + libc::SIGTERM),
        "the job died of the forwarded SIGTERM"
    );
    let (manifest, rows) = read_rows(&cap.out);
    assert!(manifest.complete);
    assert!(
        rows_for(&rows, &cap.data).len() >= 200,
        "reads before the signal are in the trace"
    );
}

#[test]
fn sigkill_leaves_finished_segments_readable() {
    let Some(mut cap) = ReaderCapture::start(&["--segment-events", "500"], Stdio::inherit()) else {
        return;
    };
    std::thread::sleep(Duration::from_millis(2000));
    cap.kill_collector_then_job();
    let out = &cap.out;
    let reader = TraceReader::open(out).expect("a killed collector leaves a readable trace");
    assert!(!reader.manifest().complete);
    assert!(
        reader.segments().len() >= 2,
        "segments of 500 rows were finished"
    );
    let rows = reader.rows();
    assert!(rows >= 1000, "{rows} rows readable");
    // Rows may stand for runs of calls: every call they stand for reads back.
    let calls = reader.manifest().calls.expect("the manifest counts calls");
    assert!(calls >= rows);
    let (_, all) = read_rows(out);
    assert_eq!(all.len() as u64, calls);
}

const FLOOD_C: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char b[1];
    long n = atol(argv[2]);
    struct timespec pause = {0, 200000000};
    int fd = open(argv[1], O_RDONLY);
    for (long i = 0; i < 1000; i++) pread(fd, b, 1, 0); /* warm up before the flood */
    nanosleep(&pause, 0);
    for (long i = 0; i < n; i++) pread(fd, b, 1, i & 4095);
    nanosleep(&pause, 0); /* let the collector drain before exit */
    close(fd);
    return 0;
}
"#;

#[test]
fn a_flood_past_the_ring_buffer_is_counted_exactly() {
    if !can_trace() || !have("cc") {
        return;
    }
    let dir = scratch();
    // Static: no loader reads of libraries, whose records a full ring could
    // also drop (drops are counted by op, not by file).
    let bin = compile_c_with(dir.path(), "flood", FLOOD_C, &["-static"]);
    let f = dir.path().join("d.dat");
    write_file(&f, 4096);
    let n: i64 = 300_000;
    let out = dir.path().join("trace");
    // One record per call (no runs): the flood must overflow the ring.
    let o = collect(
        &out,
        &["--ring-buffer-bytes", "16384", "--no-runs"],
        &[bin.to_str().unwrap(), f.to_str().unwrap(), &n.to_string()],
    );
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("warning"),
        "drops are announced"
    );
    let (manifest, rows) = read_rows(&out);
    let reads = rows_for(&rows, &f)
        .iter()
        .filter(|r| r.op == Op::Read)
        .count() as u64;
    let dropped_reads = manifest.extra["dropped_by_op"]["read"]
        .as_u64()
        .unwrap_or(0);
    assert!(dropped_reads > 0, "a 16 KiB buffer cannot hold the flood");
    assert!(manifest.dropped_events >= dropped_reads);
    assert_eq!(
        reads + dropped_reads,
        n as u64 + 1000,
        "captured + dropped = issued"
    );
}
