//! Faults around a capture: a collector killed with SIGKILL whose manifest is
//! then lost is rebuilt by `validate --repair` from its finished segments; a
//! job killed from outside ends the capture cleanly with the job's status; a
//! trace disk that fills up mid-capture stops the capture, not the job, and
//! leaves a readable trace marked incomplete.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use iorepro_format::validate::{repair, validate};
use iorepro_format::TraceReader;

/// A tmpfs mounted for one test, unmounted when dropped (also on a failed assert).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .ok()?;
        if !out.status.success() {
            iorepro_tests::skip::cannot_run(format!(
                "cannot mount a tmpfs here ({})",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            return None;
        }
        Some(Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Rows of every finished segment file in `dir`, whatever the manifest says,
/// in a canonical order.
fn rows_of_finished_segments(dir: &Path) -> Vec<String> {
    let mut rows = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "parquet") {
            rows.extend(read_rows(&p).1.iter().map(|r| format!("{r:?}")));
        }
    }
    rows.sort();
    rows
}

/// Names of the finished segment files in a trace directory.
fn segment_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".parquet"))
        .collect()
}

fn all_rows(trace: &Path) -> Vec<String> {
    let mut rows: Vec<String> = read_rows(trace)
        .1
        .iter()
        .map(|r| format!("{r:?}"))
        .collect();
    rows.sort();
    rows
}

#[test]
fn a_killed_capture_with_a_broken_manifest_is_repaired() {
    let Some(mut cap) = ReaderCapture::start(&["--segment-events", "500"], Stdio::inherit()) else {
        return;
    };
    // Kill it once a few segments are finished: on a busy machine (another
    // test flooding the CPUs) that takes longer than any fixed sleep.
    let deadline = Instant::now() + Duration::from_secs(60);
    while segment_names(&cap.out).len() < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    cap.kill_collector_then_job();
    let out = cap.out.clone();

    let mut finished = rows_of_finished_segments(&out);
    let named_before = segment_names(&out);
    assert!(finished.len() >= 1000, "{} rows finished", finished.len());
    // The manifest is cut in half, as by a crash of the disk under it.
    let manifest = out.join("manifest.json");
    let text = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, &text[..text.len() / 2]).unwrap();
    assert!(TraceReader::open(&out).is_err());

    let r = repair(&out).expect("repair");
    assert!(r.changed);
    assert!(
        r.old_manifest.starts_with("unreadable"),
        "{}",
        r.old_manifest
    );
    assert!(
        r.set_aside.iter().any(|s| s.file == "manifest.json"),
        "the broken manifest is set aside, not deleted"
    );
    assert!(out.join("manifest.json.corrupt").exists());
    assert!(!r.complete);
    // The repaired trace holds exactly the rows of the finished segments,
    // and those of one whose footer was on disk when the kill came (still
    // named `.partial` then, adopted by the repair).
    for name in r.adopted.iter().filter(|n| !named_before.contains(*n)) {
        finished.extend(
            read_rows(&out.join(name))
                .1
                .iter()
                .map(|r| format!("{r:?}")),
        );
    }
    finished.sort();
    assert_eq!(all_rows(&out), finished);
    assert_eq!(r.events, finished.len() as u64);
    let v = validate(&out).expect("the repaired trace validates");
    assert_eq!(v.events, finished.len() as u64);
    assert!(!v.complete);
}

#[test]
fn a_job_killed_from_outside_gives_its_status_and_a_complete_trace() {
    // As by the OOM killer or a scheduler: the job dies, the capture ends cleanly.
    let Some(mut cap) = ReaderCapture::start(&[], Stdio::inherit()) else {
        return;
    };
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: the job this test started.
    unsafe { libc::kill(cap.job, libc::SIGKILL) };
    let status = cap.collector.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGKILL));
    let (manifest, rows) = read_rows(&cap.out);
    assert!(manifest.complete, "the collector closed the trace");
    assert!(
        rows_for(&rows, &cap.data).len() >= 200,
        "the job's reads are kept"
    );
    validate(&cap.out).expect("validates");
}

/// A job that makes `n` small reads at scattered offsets (rows that compress
/// poorly, so a small trace disk fills quickly), then writes `n` to `done`.
const READS_C: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char b[16];
    long n = atol(argv[2]);
    unsigned long x = 12345;
    int fd = open(argv[1], O_RDONLY);
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        pread(fd, b, 1 + (x >> 60), (x >> 33) & 1048575);
    }
    close(fd);
    FILE *f = fopen(argv[3], "w");
    fprintf(f, "%ld\n", n);
    fclose(f);
    return 0;
}
"#;

#[test]
fn a_full_trace_disk_stops_the_capture_not_the_job() {
    if !can_trace() || !have("cc") {
        return;
    }
    let dir = scratch();
    let bin = compile_c(dir.path(), "reads", READS_C);
    let data = dir.path().join("d.dat");
    write_file(&data, 1 << 20);
    let done = dir.path().join("done");
    let Some(disk) = Tmpfs::mount(&dir.path().join("small"), "256k") else {
        return;
    };
    let out = disk.0.join("trace");
    // About 7 bytes per row: 300k rows need ~2 MiB, the disk holds 256 KiB.
    let n = 300_000;
    let o = collect(
        &out,
        &["--segment-events", "10000"],
        &[
            bin.to_str().unwrap(),
            data.to_str().unwrap(),
            &n.to_string(),
            done.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    // The job ran to the end, untraced once the disk was full.
    assert_eq!(
        std::fs::read_to_string(&done).unwrap().trim(),
        n.to_string(),
        "the job finished: {stderr}"
    );
    // The collector says so on one line and exits non-zero.
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("Error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains(out.to_str().unwrap()) && errors[0].contains("ENOSPC"),
        "{stderr}"
    );
    // What was written is a readable trace, marked incomplete, with the cause.
    let reader = TraceReader::open(&out).expect("the trace stays readable");
    let m = reader.manifest().clone();
    assert!(!m.complete);
    assert!(m.extra["capture_stopped"]["error"]
        .as_str()
        .unwrap()
        .contains("ENOSPC"));
    let rows = reader.rows();
    assert!(rows >= 10_000 && rows < n, "{rows} rows kept");
    assert_eq!(read_rows(&out).1.len() as u64, rows);
    let v = validate(&out).expect("validate passes");
    assert_eq!(v.events, rows);
    assert!(
        v.warnings.iter().any(|w| w.contains("stopped early")),
        "{:?}",
        v.warnings
    );
    let leftovers: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".partial") || n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
