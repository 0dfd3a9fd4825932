//! Where a read's bytes came from: a 256 MiB file read twice (its pages
//! dropped before the first pass only) is served by the storage in the
//! first pass and by the page cache in the second. The trace's
//! `storage_bytes` say so, row by row, and their sum over the first pass
//! is the block device's own count (`/sys/block/loopN/stat` of an ext4
//! file system of the test's own on a loop device), within [`TOLERANCE`]:
//! the device also reads the file's inode and extent blocks, and a second
//! process start reads nothing of the file.
//!
//! And a file opened `O_DIRECT` (dd's `iflag=direct`) is all storage, with
//! no fill to see. Needs root (the probes, a loop device and a mount).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use iorepro_analysis::summary::Summary;
use iorepro_format::{FromStorage, Op, TraceReader};
use iorepro_tests::loop_mount::LoopMount;

const FILE_BYTES: i64 = 256 << 20;

/// Per process, in the order they started: bytes read and those the
/// storage served, as DuckDB sums the trace's columns.
const DUCKDB_PER_PROCESS: &str = r#"
import duckdb, json
rows = duckdb.sql('''
    SELECT sum(ret)::BIGINT, sum(storage_bytes)::BIGINT FROM read_parquet('@DIR@/*.parquet')
    WHERE op = 'read' AND path LIKE '%/data.bin' GROUP BY pid ORDER BY min(ts)
''').fetchall()
print(json.dumps([list(r) for r in rows]))
"#;
const IMAGE_BYTES: u64 = 384 << 20;

/// How far the first pass's count and the device's may be apart, as a
/// share of the device's.
const TOLERANCE: f64 = 0.02;

/// The most the second pass may take from the storage: the page cache
/// held the whole file (but for pages the machine reclaimed meanwhile).
const WARM_SLACK: i64 = FILE_BYTES / 50;

/// What the storage served of the reads of `file`, per process, in the
/// order the processes first read it; every such row must say.
fn served_per_process(trace: &Path, file: &Path) -> Vec<(i32, FromStorage, i64)> {
    let reader = TraceReader::open(trace).unwrap_or_else(|e| panic!("{e}"));
    let mut by_pid: BTreeMap<i32, (i64, FromStorage, i64)> = BTreeMap::new();
    let want = file.to_str().unwrap();
    for batch in reader.events().unwrap() {
        let ev = batch.unwrap();
        for i in 0..ev.len() {
            if ev.op(i) != Op::Read || ev.path_at(i) != Some(want) {
                continue;
            }
            let from = ev
                .from_storage_at(i)
                .unwrap_or_else(|| panic!("read row {i} of {want} does not say where from"));
            let pid = ev.pid().value(i);
            let e = by_pid
                .entry(pid)
                .or_insert((ev.ts().value(i), FromStorage::default(), 0));
            e.1.bytes += from.bytes;
            e.1.read_ahead += from.read_ahead;
            e.2 += ev.ret().value(i).max(0);
        }
    }
    let mut out: Vec<_> = by_pid.into_iter().collect();
    out.sort_by_key(|(_, (first, ..))| *first);
    out.into_iter()
        .map(|(pid, (_, from, read))| (pid, from, read))
        .collect()
}

/// The loop mount holding a fresh `FILE_BYTES` file, or `None` where this
/// machine cannot trace or mount.
fn prepared(scratch: &Path) -> Option<(LoopMount, std::path::PathBuf)> {
    if !can_trace() {
        return None;
    }
    let fs = LoopMount::for_test(scratch, IMAGE_BYTES)?;
    let data = fs.dir.join("data.bin");
    write_file(&data, FILE_BYTES as usize);
    Some((fs, data))
}

#[test]
fn a_file_read_twice_comes_from_storage_once() {
    let scratch = scratch();
    let Some((fs, data)) = prepared(scratch.path()) else {
        return;
    };
    fs.drop_own_pages();
    let before = fs.device_bytes().0;
    let trace = scratch.path().join("trace");
    // The pause between the passes makes them two reading phases.
    let job = format!(
        "cat {0} > /dev/null && sleep 2 && cat {0} > /dev/null",
        data.display()
    );
    let prefix = fs.dir.to_str().unwrap();
    let out = collect(&trace, &["--path-prefix", prefix], &["sh", "-c", &job]);
    assert!(out.status.success(), "{out:?}");
    let device = (fs.device_bytes().0 - before) as i64;

    let passes = served_per_process(&trace, &data);
    assert_eq!(passes.len(), 2, "two processes read the file: {passes:?}");
    let (cold, warm) = (passes[0].1, passes[1].1);
    eprintln!(
        "device read {device} bytes; the trace: first pass {} from storage ({} of them \
         read-ahead), second pass {}",
        cold.bytes, cold.read_ahead, warm.bytes
    );
    assert_eq!(
        passes[0].2, FILE_BYTES,
        "the first pass read the whole file"
    );
    assert_eq!(
        passes[1].2, FILE_BYTES,
        "the second pass read the whole file"
    );
    // Both passes against the device: a page the machine reclaimed between
    // them is read again, by the device and in the trace alike.
    let both = cold.bytes + warm.bytes;
    let off = (both - device).abs() as f64 / device as f64;
    assert!(
        off <= TOLERANCE,
        "{both} from storage in all, the device read {device} ({:.2} % apart)",
        off * 100.0
    );
    assert!(
        cold.bytes >= FILE_BYTES - FILE_BYTES / 50,
        "first pass: {} from storage",
        cold.bytes
    );
    assert!(
        cold.read_ahead > 0 && cold.read_ahead < cold.bytes,
        "read-ahead counted apart: {cold:?}"
    );
    assert!(
        warm.bytes <= WARM_SLACK,
        "second pass: {} bytes from storage, the page cache held the file",
        warm.bytes
    );

    // The summary says so: a line per reading phase, and the warning.
    let reader = TraceReader::open(&trace).unwrap();
    let summary = Summary::compute(&reader).unwrap();
    let text = summary.render();
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("from storage"))
        .collect();
    eprintln!("{}", lines.join("\n"));
    assert!(
        lines[0].starts_with("from storage 256.00 MiB of 512.00 MiB read"),
        "{text}"
    );
    // The reading phases (the detector may cut a pass in two): those of
    // the first pass from storage, the last pass's from memory. Read-ahead
    // made at the end of one phase serves the next, so where a pass is cut
    // its parts' shares move by what was read ahead; the pass's sum holds.
    let reading: Vec<_> = summary
        .overview
        .phases
        .iter()
        .filter(|p| p.read_bytes > 0)
        .collect();
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("  ")).count(),
        reading.len(),
        "a line per reading phase: {text}"
    );
    let (last, first_pass) = reading.split_last().expect("reading phases");
    assert!(!first_pass.is_empty(), "{text}");
    let read: u64 = first_pass.iter().map(|p| p.read_bytes).sum();
    let stored: u64 = first_pass.iter().filter_map(|p| p.storage_read_bytes).sum();
    assert_eq!(
        (read, stored),
        (FILE_BYTES as u64, cold.bytes as u64),
        "{text}"
    );
    assert_eq!(last.storage_read_bytes, Some(warm.bytes as u64), "{text}");
    let last_line = lines.iter().rfind(|l| l.starts_with("  ")).unwrap();
    assert!(
        warm.bytes > 0 || last_line.ends_with("(100.0 % page cache)"),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("warning: the page cache served the reads after the first pass")),
        "{text}"
    );
    // DuckDB reads the columns as they are: the pass of each process.
    let script = DUCKDB_PER_PROCESS.replace("@DIR@", trace.to_str().unwrap());
    if let Some(text) = iorepro_tests::python::require_python(&script, &["duckdb"]) {
        let duck: Vec<(i64, i64)> = serde_json::from_str(&text).unwrap();
        assert_eq!(duck, [(FILE_BYTES, cold.bytes), (FILE_BYTES, warm.bytes)]);
    }
    // And `files`, per file: read twice, served once.
    let files = iorepro_analysis::served::per_file(&reader)
        .unwrap()
        .unwrap();
    let file = files
        .iter()
        .find(|f| f.path == data.to_str().unwrap())
        .unwrap();
    assert_eq!(file.read_bytes, 2 * FILE_BYTES as u64);
    assert_eq!(file.storage_read_bytes, Some(cold.bytes as u64));
}

#[test]
fn direct_reads_are_all_storage() {
    let scratch = scratch();
    let Some((fs, data)) = prepared(scratch.path()) else {
        return;
    };
    let trace = scratch.path().join("trace");
    let input = format!("if={}", data.display());
    let prefix = fs.dir.to_str().unwrap();
    let out = collect(
        &trace,
        &["--path-prefix", prefix],
        &["dd", &input, "of=/dev/null", "bs=1M", "iflag=direct"],
    );
    assert!(out.status.success(), "{out:?}");
    let passes = served_per_process(&trace, &data);
    assert_eq!(passes.len(), 1, "{passes:?}");
    let (_, from, read) = passes[0];
    assert_eq!(read, FILE_BYTES);
    assert_eq!(from.bytes, FILE_BYTES, "O_DIRECT: every byte from storage");
    assert_eq!(from.read_ahead, 0);
}

/// What the storage was sent by the write, fsync and fdatasync rows of
/// `file`, all of which must say.
fn sent_to_device(trace: &Path, file: &Path) -> i64 {
    let reader = TraceReader::open(trace).unwrap_or_else(|e| panic!("{e}"));
    let want = file.to_str().unwrap();
    let mut sent = 0;
    for batch in reader.events().unwrap() {
        let ev = batch.unwrap();
        for i in 0..ev.len() {
            let op = ev.op(i);
            let writes = matches!(op, Op::Write | Op::Fsync | Op::Fdatasync);
            if !writes || ev.path_at(i) != Some(want) {
                continue;
            }
            let from = ev
                .from_storage_at(i)
                .unwrap_or_else(|| panic!("{op:?} row {i} of {want} does not say what it sent"));
            sent += from.bytes;
        }
    }
    sent
}

/// A 64 MiB save written three ways, each against the device's count of
/// bytes written while the job ran: buffered and then synced (`conv=fsync`:
/// the fsync sends it all), buffered alone (nothing reaches the device
/// before the job ends: write-back does, later), and `O_DIRECT` (each write
/// sends its own bytes). The device also writes the journal's commit and
/// the inode, a few blocks.
#[test]
fn a_save_reaches_the_device_in_its_fsync_or_its_direct_writes() {
    const SAVE_BYTES: i64 = 64 << 20;
    let scratch = scratch();
    if !can_trace() {
        return;
    }
    let Some(fs) = LoopMount::for_test(scratch.path(), IMAGE_BYTES) else {
        return;
    };
    let prefix = fs.dir.to_str().unwrap();
    for (name, flag, expect_all) in [
        ("synced", "conv=fsync", true),
        ("buffered", "conv=notrunc", false),
        ("direct", "oflag=direct", true),
    ] {
        let file = fs.dir.join(format!("{name}.ckpt"));
        let trace = scratch.path().join(format!("trace-{name}"));
        fs.drop_own_pages();
        let before = fs.device_bytes().1 as i64;
        let output = format!("of={}", file.display());
        let out = collect(
            &trace,
            &["--path-prefix", prefix],
            &["dd", "if=/dev/zero", &output, "bs=1M", "count=64", flag],
        );
        assert!(out.status.success(), "{out:?}");
        let device = fs.device_bytes().1 as i64 - before;
        let sent = sent_to_device(&trace, &file);
        eprintln!("{name}: the trace says {sent} bytes sent, the device wrote {device}");
        if expect_all {
            assert!(
                (SAVE_BYTES..=SAVE_BYTES + (SAVE_BYTES / 50)).contains(&device),
                "{name}: the device wrote {device}"
            );
            let off = (sent - device).abs() as f64 / device as f64;
            assert!(
                off <= TOLERANCE,
                "{name}: {sent} against the device's {device}"
            );
        } else {
            assert!(
                device < SAVE_BYTES / 8 && sent <= device,
                "{name}: {sent} sent, the device wrote {device} before the job ended"
            );
        }
    }
}

/// The `writeback` rows of `file`: their bytes, and the processes they
/// name (the file's writer).
fn written_back(trace: &Path, file: &Path) -> (i64, Vec<i32>) {
    let reader = TraceReader::open(trace).unwrap_or_else(|e| panic!("{e}"));
    let want = file.to_str().unwrap();
    let (mut bytes, mut pids) = (0, Vec::new());
    for batch in reader.events().unwrap() {
        let ev = batch.unwrap();
        for i in 0..ev.len() {
            if ev.op(i) != Op::Writeback || ev.path_at(i) != Some(want) {
                continue;
            }
            let from = ev
                .from_storage_at(i)
                .unwrap_or_else(|| panic!("writeback row {i} of {want} does not say its bytes"));
            assert_eq!(from.bytes, ev.ret().value(i), "row {i}");
            bytes += from.bytes;
            pids.push(ev.pid().value(i));
        }
    }
    pids.dedup();
    (bytes, pids)
}

/// The pid of the first process that wrote `file`.
fn first_writer(trace: &Path, file: &Path) -> i32 {
    let reader = TraceReader::open(trace).unwrap_or_else(|e| panic!("{e}"));
    for batch in reader.events().unwrap() {
        let ev = batch.unwrap();
        for i in 0..ev.len() {
            if ev.op(i) == Op::Write && ev.path_at(i) == Some(file.to_str().unwrap()) {
                return ev.pid().value(i);
            }
        }
    }
    panic!("no write of {}", file.display())
}

/// A 64 MiB save written through the page cache with no fsync, then a
/// `sync` a second later (by another process, as a job's launcher or the
/// flusher's timer would): no call of the writer's sent a byte, and the
/// kernel's write-back of it is in the trace as `writeback` rows of the
/// writer's, whose bytes are the device's own count of what it wrote
/// (within [`TOLERANCE`]: the journal's commit and the inode); the summary
/// says so.
#[test]
fn a_save_without_fsync_is_written_back_by_the_kernel_later() {
    const SAVE_BYTES: i64 = 64 << 20;
    let scratch = scratch();
    if !can_trace() {
        return;
    }
    let Some(fs) = LoopMount::for_test(scratch.path(), IMAGE_BYTES) else {
        return;
    };
    let file = fs.dir.join("later.ckpt");
    let trace = scratch.path().join("trace-later");
    let before = fs.device_bytes().1 as i64;
    let job = format!(
        "dd if=/dev/zero of={} bs=1M count=64 status=none && sleep 1 && sync",
        file.display()
    );
    let out = collect(
        &trace,
        &["--path-prefix", fs.dir.to_str().unwrap()],
        &["sh", "-c", &job],
    );
    assert!(out.status.success(), "{out:?}");
    let device = fs.device_bytes().1 as i64 - before;
    let sent = sent_to_device(&trace, &file);
    let (back, pids) = written_back(&trace, &file);
    eprintln!("sent by the calls {sent}, written back {back}, the device wrote {device}");
    assert_eq!(sent, 0, "the writes were buffered");
    assert!(
        (SAVE_BYTES..=SAVE_BYTES + (SAVE_BYTES / 50)).contains(&device),
        "the device wrote {device}"
    );
    let off = (back - device).abs() as f64 / device as f64;
    assert!(
        off <= TOLERANCE,
        "{back} written back against the device's {device}"
    );
    assert_eq!(
        pids,
        vec![first_writer(&trace, &file)],
        "rows of the writer's"
    );
    let reader = TraceReader::open(&trace).unwrap();
    let summary = Summary::compute(&reader).unwrap();
    assert_eq!(
        summary.overview.storage_written_back_bytes,
        Some(back as u64)
    );
    let text = summary.render();
    assert!(
        text.contains("written back by the kernel later"),
        "the summary says what write-back sent:\n{text}"
    );
}

/// Pages of `file` in the page cache, by util-linux's `fincore`.
fn resident_bytes(file: &Path) -> i64 {
    let out = std::process::Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES"])
        .arg(file)
        .output()
        .expect("run fincore");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// fio's own runs, each captured alone, against the device's counts of
/// bytes read and written while it ran, and `fincore`'s count of the
/// file's pages in memory before it: a cold sequential read (fio's
/// `invalidate=1` drops the file's pages first), the same read warm, a
/// cold random read of 4 KiB blocks (read-ahead barely helps), an
/// `O_DIRECT` read, and a buffered save that fio syncs at its end.
#[test]
fn fio_runs_agree_with_the_device() {
    const FILE: i64 = 64 << 20;
    let scratch = scratch();
    if !can_trace() || !have("fio") || !have("fincore") {
        return;
    }
    let Some(fs) = LoopMount::for_test(scratch.path(), IMAGE_BYTES) else {
        return;
    };
    let data = fs.dir.join("fio.dat");
    write_file(&data, FILE as usize);
    fs.drop_own_pages();
    let prefix = fs.dir.to_str().unwrap();
    // (name, fio's options, reads from storage as a share of the file)
    let runs: [(&str, &[&str], f64); 5] = [
        ("cold", &["--rw=read", "--bs=128k", "--invalidate=1"], 1.0),
        ("warm", &["--rw=read", "--bs=128k", "--invalidate=0"], 0.0),
        (
            "random",
            &["--rw=randread", "--bs=4k", "--io_size=8m", "--invalidate=1"],
            -1.0, // whatever the device read
        ),
        ("direct", &["--rw=read", "--bs=1m", "--direct=1"], 1.0),
        (
            "save",
            &["--rw=write", "--bs=1m", "--end_fsync=1", "--invalidate=1"],
            0.0,
        ),
    ];
    for (name, options, share) in runs {
        let trace = scratch.path().join(format!("trace-{name}"));
        let resident = resident_bytes(&data);
        let before = fs.device_bytes();
        let mut job = vec![
            "fio".to_string(),
            format!("--name={name}"),
            format!("--filename={}", data.display()),
            format!("--size={FILE}"),
            "--ioengine=psync".to_string(),
        ];
        job.extend(options.iter().map(|o| o.to_string()));
        let job: Vec<&str> = job.iter().map(String::as_str).collect();
        let out = collect(&trace, &["--path-prefix", prefix], &job);
        assert!(out.status.success(), "{name}: {out:?}");
        let after = fs.device_bytes();
        let (device_read, device_written) =
            ((after.0 - before.0) as i64, (after.1 - before.1) as i64);
        let read: i64 = served_per_process(&trace, &data)
            .iter()
            .map(|(_, from, _)| from.bytes)
            .sum();
        let sent = sent_to_device(&trace, &data);
        eprintln!(
            "{name}: {resident} bytes resident before; the device read {device_read} and \
             wrote {device_written}; the trace: {read} read from storage, {sent} sent"
        );
        let near = |trace: i64, device: i64| {
            (trace - device).abs() as f64 <= TOLERANCE * (device.max(FILE) as f64)
        };
        assert!(
            near(read, device_read),
            "{name}: reads {read} against {device_read}"
        );
        assert!(
            near(sent, device_written),
            "{name}: writes {sent} against {device_written}"
        );
        if share >= 0.0 {
            let expected = (share * FILE as f64) as i64;
            assert!(
                near(read, expected),
                "{name}: {read} read from storage, expected {expected}"
            );
        }
        if name == "warm" {
            assert_eq!(resident, FILE, "the warm read found the file in memory");
        }
        if name == "save" {
            assert!(near(sent, FILE), "the save's fsync sent it: {sent}");
        }
    }
}
