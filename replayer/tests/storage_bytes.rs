//! The replay's count of the bytes the storage served and was sent,
//! against the block device's own: an ext4 file system of the test's own
//! on a loop device, whose `/sys/block/loopN/stat` counts every sector read
//! from it and written to it, whoever asked. The bundled shards sample
//! reads its 192 MiB dataset twice and saves four times: from cold caches
//! the first pass comes from the device and the second from memory, and
//! with `--evict-reads` both passes come from the device. Through io_uring
//! the processes' counts, which stand for the run's there, agree too.
//!
//! The device reads a little the ranks did not cause (the target's own
//! directory, looked up by the process's main thread), and writes the
//! journal besides the data: the two counts agree within [`TOLERANCE`].
//! Needs root (a loop device and a mount).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use common::*;
use iorepro_replayer::io::engine::EngineKind;
use iorepro_tests::loop_mount::LoopMount;
use iorepro_tests::samples::{sample, TORCH_DDP_SHARDS};
use serde_json::Value;

/// The shards sample's dataset (192 MiB) and its four saves (63 MiB each)
/// with room to spare; the image is sparse, so what it takes on disk is
/// what was written.
const IMAGE_BYTES: u64 = 768 << 20;

/// How far the replay's count and the device's may be apart, as a share
/// of the device's.
const TOLERANCE: f64 = 0.02;

/// What the device read and was written while `args`' replay of the
/// prepared target ran from cold caches, and the replay's report. The
/// writes are counted once they reached the device (after a sync).
fn replay_cold(fs: &LoopMount, trace: &Path, target: &Path, args: &[&str]) -> (Value, u64, u64) {
    fs.drop_own_pages();
    let before = fs.device_bytes();
    let mut all = vec!["--prepare", "skip", "--timing", "afap", "--json"];
    all.extend_from_slice(args);
    let report = replay_ok(trace, target, &all);
    // SAFETY: as above.
    unsafe { libc::sync() };
    let after = fs.device_bytes();
    (report, after.0 - before.0, after.1 - before.1)
}

/// Asserts that the replay's count `counted` is the device's within
/// [`TOLERANCE`].
fn agree(what: &str, counted: u64, device: u64) {
    let off = (counted as f64 - device as f64).abs() / device as f64;
    eprintln!(
        "{what}: the replay counted {counted}, the device {device} ({:.3} % apart)",
        off * 100.0
    );
    assert!(
        off <= TOLERANCE,
        "{what}: {counted} against the device's {device}"
    );
}

/// Held by each test for its whole run: the two tests' replays, run
/// together, would share the machine's memory and disk time.
static CACHES: Mutex<()> = Mutex::new(());

/// The sample's data prepared on a loop mount of the test's own, or
/// `None` having said why this machine cannot make one.
fn prepared(name: &str) -> Option<(LoopMount, PathBuf, PathBuf)> {
    let scratch = iorepro_tests::bins::scratch(name);
    let fs = LoopMount::for_test(&scratch, IMAGE_BYTES)?;
    let trace = sample(TORCH_DDP_SHARDS);
    let target = fs.dir.join("replay");
    let out = replay_into(&trace, &target, &["--prepare", "only"]);
    assert!(out.status.success(), "{out:?}");
    Some((fs, trace, target))
}

#[test]
fn the_bytes_the_storage_served_are_the_devices_count() {
    let _caches = CACHES.lock().unwrap_or_else(|e| e.into_inner());
    let Some((fs, trace, target)) = prepared("storage_bytes") else {
        return;
    };

    // From cold caches: the first pass over the dataset from the device,
    // the second (the last two epochs) from memory.
    let (r, read, written) = replay_cold(&fs, &trace, &target, &[]);
    let storage = &r["storage"];
    assert_eq!(storage["counted_per"], "ranks", "{storage}");
    agree("reads, cold", u(&storage["read_bytes"]), read);
    agree("writes, cold", u(&storage["write_bytes"]), written);
    let cached = storage["cache_served_percent"].as_f64().unwrap();
    assert!((45.0..=55.0).contains(&cached), "{storage}");
    let epochs = r["training"]["epochs"].as_array().unwrap();
    let first = epochs[0]["cache_served_percent"].as_f64().unwrap();
    let last = epochs.last().unwrap()["cache_served_percent"]
        .as_f64()
        .unwrap();
    assert!(first < 5.0 && last > 95.0, "{epochs:?}");
    for save in r["training"]["checkpoints"].as_array().unwrap() {
        // Every page the save dirtied, counted once: its bytes, rounded up
        // to whole pages.
        let (bytes, sent) = (u(&save["write_bytes"]), u(&save["storage_write_bytes"]));
        assert!(sent >= bytes && sent - bytes < 1 << 20, "{save}");
    }
    let verdict = r["verdict"]["reads_from"].as_str().unwrap();
    assert!(
        verdict.contains("the page cache's result") && verdict.contains("--evict-reads"),
        "{verdict}"
    );

    // Each file dropped from the cache after its reads: both passes from
    // the device.
    let (r, read, _) = replay_cold(&fs, &trace, &target, &["--evict-reads"]);
    let storage = &r["storage"];
    agree("reads, evicted", u(&storage["read_bytes"]), read);
    assert!(
        u(&storage["read_bytes"]) >= u(&r["read_bytes"]),
        "{storage}"
    );
    assert!(
        storage["cache_served_percent"].as_f64().unwrap() < 1.0,
        "{storage}"
    );
    let verdict = r["verdict"]["reads_from"].as_str().unwrap();
    assert!(verdict.starts_with("the storage"), "{verdict}");
}

#[test]
fn through_io_uring_each_process_counts_for_its_ranks() {
    let _caches = CACHES.lock().unwrap_or_else(|e| e.into_inner());
    let Some((fs, trace, target)) = prepared("storage_bytes_uring") else {
        return;
    };
    if let Err(why) = iorepro_replayer::io::engine::new_engine(EngineKind::IoUring) {
        iorepro_tests::skip::cannot_run(format!("io_uring cannot start here: {why}"));
        return;
    }
    // io_uring's workers do part of the ranks' calls: the process's count
    // stands for the run's, and no epoch has one of its own.
    let (r, read, written) = replay_cold(&fs, &trace, &target, &["--engine", "io_uring"]);
    let storage = &r["storage"];
    assert_eq!(storage["counted_per"], "processes", "{storage}");
    agree("reads, io_uring", u(&storage["read_bytes"]), read);
    agree("writes, io_uring", u(&storage["write_bytes"]), written);
    for e in r["training"]["epochs"].as_array().unwrap() {
        assert!(e["storage_read_bytes"].is_null(), "{e}");
    }
}
