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
