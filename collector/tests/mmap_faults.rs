//! mmap-based loading is not invisible: the mmap call and every file page the
//! mapping faults in are recorded (numpy.load(mmap_mode="r") and a plain
//! mmap'd read).

mod common;

use std::path::Path;

use common::*;
use iorepro_traces::Op;

const SCRIPT: &str = r#"
import mmap, os, sys
import numpy as np
a = np.load(sys.argv[1], mmap_mode="r")
assert float(a.sum()) == float(np.arange(a.size, dtype=np.float64).sum())
with open(sys.argv[2], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    assert sum(m[i] for i in range(0, len(m), 4096)) >= 0
"#;

const PAGE: i64 = 4096;

/// Pages of `[0, size)` covered by the fault rows of one file.
fn faulted_pages(rows: &[&Row], size: i64) -> Vec<bool> {
    let mut pages = vec![false; ((size + PAGE - 1) / PAGE) as usize];
    for r in rows.iter().filter(|r| r.op == Op::Fault) {
        let (off, len) = (r.offset.unwrap(), r.size.unwrap());
        for p in (off / PAGE)..((off + len) / PAGE) {
            if let Some(slot) = pages.get_mut(p as usize) {
                *slot = true;
            }
        }
    }
    pages
}

fn check_file(rows: &[Row], f: &Path) {
    let size = std::fs::metadata(f).unwrap().len() as i64;
    let mine = rows_for(rows, f);
    assert!(
        mine.iter()
            .any(|r| r.op == Op::Mmap && r.size.unwrap() >= size - PAGE),
        "{}: mmap row",
        f.display()
    );
    let pages = faulted_pages(&mine, size);
    let missing: Vec<usize> = pages
        .iter()
        .enumerate()
        .filter(|(_, c)| !**c)
        .map(|(i, _)| i)
        .collect();
    assert!(
        missing.is_empty(),
        "{}: pages never faulted in: {missing:?}",
        f.display()
    );
}

#[test]
fn mmap_and_faulted_pages_are_recorded() {
    if !can_trace() || !have("python3") {
        return;
    }
    let ok = std::process::Command::new("python3")
        .args(["-c", "import numpy"])
        .status();
    if !ok.is_ok_and(|s| s.success()) {
        eprintln!("skipped: numpy is not installed");
        return;
    }
    let dir = scratch();
    let npy = dir.path().join("arr.npy");
    let raw = dir.path().join("blob.bin");
    let made = std::process::Command::new("python3")
        .args([
            "-c",
            &format!(
                "import numpy as np; np.save('{}', np.arange(300000, dtype=np.float64))",
                npy.display()
            ),
        ])
        .status()
        .unwrap();
    assert!(made.success());
    write_file(&raw, 50 * 4096 + 100);
    let script = dir.path().join("load.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = dir.path().join("trace");
    let o = collect(
        &out,
        &["--path-prefix", dir.path().to_str().unwrap()],
        &[
            "python3",
            script.to_str().unwrap(),
            npy.to_str().unwrap(),
            raw.to_str().unwrap(),
        ],
    );
    assert!(o.status.success());
    let (_, rows) = read_rows(&out);
    check_file(&rows, &npy);
    check_file(&rows, &raw);
}
