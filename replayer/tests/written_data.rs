//! What the replay writes: incompressible bytes in which no two 4 KiB blocks
//! are alike, so storage that compresses or deduplicates cannot flatter it,
//! with buffered writes (gathered from the process's one shared buffer
//! behind each rank's stamps) and with O_DIRECT (a stamped private copy).

mod common;

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use common::*;

/// Every file under `dir`'s checkpoints, as (path, bytes).
fn checkpoints(target: &Path) -> Vec<(String, Vec<u8>)> {
    listing(target)
        .into_iter()
        .filter(|f| f.contains("checkpoints/") && f.ends_with(".pt"))
        .map(|f| {
            let bytes = std::fs::read(target.join(&f)).unwrap();
            (f, bytes)
        })
        .collect()
}

fn assert_unique_incompressible(target: &Path, expected_bytes: u64) {
    let files = checkpoints(target);
    let total: usize = files.iter().map(|(_, b)| b.len()).sum();
    assert_eq!(total as u64, expected_bytes, "{:?}", files.len());
    let mut seen = HashSet::new();
    for (name, bytes) in &files {
        for (i, block) in bytes.chunks(4096).enumerate() {
            assert!(
                seen.insert(block.to_vec()),
                "{name}: block {i} repeats another"
            );
        }
    }
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for (_, b) in &files {
        z.write_all(b).unwrap();
    }
    let packed = z.finish().unwrap().len();
    assert!(
        packed as f64 > 0.99 * total as f64,
        "compressed to {packed} of {total}"
    );
}

#[test]
fn buffered_and_direct_writes_are_unique_per_block() {
    let (_tmp, trace, target) = synth_with_target(TWO_RANKS);
    for (i, direct) in [false, true].into_iter().enumerate() {
        let target = target.join(i.to_string());
        let mut args = vec!["--ranks", "4", "--json"];
        if direct {
            args.push("--direct");
        }
        let out = replay_into(&trace, &target, &args);
        if direct && String::from_utf8_lossy(&out.stderr).contains("refuses O_DIRECT") {
            eprintln!("skipped the O_DIRECT half: this filesystem refuses O_DIRECT");
            continue;
        }
        let r = json_ok(&out);
        assert_unique_incompressible(&target, r["write_bytes"].as_u64().unwrap());
    }
}

/// One 9 MiB write and one of 1 MiB, as a job saving a large tensor does.
fn big_and_small_writes(dir: &Path) -> std::path::PathBuf {
    use iorepro_format::Op;
    let rows: Vec<Row<'_>> = vec![
        (0, Op::Open, "/ckpt/w.pt", 5, None, 0, Some(O_WRITE_CREATE)),
        (0, Op::Write, "/ckpt/w.pt", 5, Some(0), 9 << 20, None),
        (0, Op::Write, "/ckpt/w.pt", 5, Some(9 << 20), 1 << 20, None),
        (0, Op::Close, "/ckpt/w.pt", 5, None, 0, None),
    ];
    write_rows(dir, &rows)
}

#[test]
fn each_trace_write_is_one_call_of_its_own_size() {
    let strace_ok = std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !strace_ok {
        iorepro_tests::skip::cannot_run("strace is not installed (cargo xtask setup installs it)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = big_and_small_writes(tmp.path());
    let target = tmp.path().join("target");
    let log = tmp.path().join("calls");
    let out = std::process::Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=pwrite64,pwritev,write", "-o"])
        .arg(&log)
        .arg(replay_bin())
        .arg(&trace)
        .arg("--target")
        .arg(&target)
        .arg("--json")
        .output()
        .unwrap();
    let r = json_ok(&out);
    assert_eq!(r["write_bytes"], 10 << 20);
    let calls = std::fs::read_to_string(&log).unwrap();
    // The kernel's cost per byte depends on the call's size: a 9 MiB write
    // is one call of 9 MiB (a private copy), the 1 MiB one is gathered.
    let sizes: Vec<&str> = calls
        .lines()
        .filter(|l| l.contains("pwrite64(") || l.contains("pwritev("))
        .filter_map(|l| l.rsplit("= ").next())
        .collect();
    assert_eq!(sizes, vec!["9437184", "1048576"], "{calls}");
    let file = std::fs::read(target.join("ranks/rank-00000/ckpt/w.pt")).unwrap();
    let blocks: HashSet<&[u8]> = file.chunks(4096).collect();
    assert_eq!(blocks.len(), file.len() / 4096, "every 4 KiB block unique");
}
