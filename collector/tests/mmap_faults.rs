//! mmap-based loading is not invisible: the mmap call and every page the
//! mapping faults in from storage (a page-cache fill) are recorded, each page
//! once (numpy.load(mmap_mode="r") and a plain mmap'd read of cold files).

mod common;

use std::path::Path;

use common::*;
use iorepro_format::Op;

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

/// How many fault rows filled each page of `[0, size)`.
fn fills_per_page(rows: &[&Row], size: i64) -> Vec<u32> {
    let mut pages = vec![0u32; ((size + PAGE - 1) / PAGE) as usize];
    for r in rows.iter().filter(|r| r.op == Op::Fault) {
        let (off, len) = (r.offset.unwrap(), r.size.unwrap());
        assert!(off % PAGE == 0 && len % PAGE == 0 && len > 0, "{r:?}");
        for p in (off / PAGE)..((off + len) / PAGE) {
            pages[p as usize] += 1; // a fill past EOF would panic here
        }
    }
    pages
}

/// Every page from `first_page` on was faulted in, and no page twice.
fn check_file(rows: &[Row], f: &Path, first_page: usize) {
    let size = std::fs::metadata(f).unwrap().len() as i64;
    let mine = rows_for(rows, f);
    assert!(
        mine.iter()
            .any(|r| r.op == Op::Mmap && r.size.unwrap() >= size - PAGE),
        "{}: mmap row",
        f.display()
    );
    let fills = fills_per_page(&mine, size);
    let missing: Vec<usize> = (first_page..fills.len())
        .filter(|&p| fills[p] == 0)
        .collect();
    assert!(
        missing.is_empty(),
        "{}: pages never faulted in: {missing:?}",
        f.display()
    );
    assert!(
        fills.iter().all(|&n| n <= 1),
        "{}: a page filled twice",
        f.display()
    );
}

/// Writes the file to disk and drops it from the page cache, so that the
/// job's faults read it from storage.
fn evict(f: &Path) {
    let code = format!(
        "import os; fd = os.open('{}', os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)",
        f.display()
    );
    let ok = std::process::Command::new("python3")
        .args(["-c", &code])
        .status()
        .unwrap();
    assert!(ok.success());
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
        iorepro_tests::skip::cannot_run("numpy is not installed (cargo xtask setup installs it)");
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
    evict(&npy);
    evict(&raw);
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
    // numpy reads the header with read(), whose readahead (at most 512 KiB
    // here) fills the first pages inside that syscall's row.
    check_file(&rows, &npy, 128);
    check_file(&rows, &raw, 0);
}
