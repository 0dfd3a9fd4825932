//! Runs: back-to-back equal-sized calls of one thread on one descriptor are
//! one row (column `calls`), and nothing is lost by it. The same job captured
//! with runs and with `--no-runs` (one row per call) gives the same calls,
//! call by call; with runs it takes far fewer rows; and DuckDB, reading the
//! Parquet as it is, gets the exact bytes with `sum(ret)` and the exact call
//! count with `sum(calls)`.

mod common;

use std::collections::BTreeMap;

use common::*;
use iorepro_format::{Op, TraceReader};

const JOB: &str = r#"
import os, random, sys
d = sys.argv[1]
fd = os.open(f"{d}/data.bin", os.O_RDONLY)
while os.read(fd, 4096):                  # a run of reads, then a short one at the end
    pass
rnd = random.Random(7)
for _ in range(300):                      # random preads: no runs
    os.pread(fd, 4096, rnd.randrange(0, 1 << 20, 4096))
os.close(fd)
w = os.open(f"{d}/out.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
block = b"w" * 65536
for _ in range(64):                       # a run of writes
    os.write(w, block)
os.fsync(w)
os.close(w)
"#;

type Call = (String, Op, Option<i64>, Option<i64>, i64);

/// Every read and write under `dir`, as (path, op, offset, size, ret), counted.
fn calls(rows: &[Row], dir: &std::path::Path) -> BTreeMap<Call, usize> {
    let mut m = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| matches!(r.op, Op::Read | Op::Write) && r.under(dir))
    {
        let key = (r.path.clone().unwrap(), r.op, r.offset, r.size, r.ret);
        *m.entry(key).or_insert(0) += 1;
    }
    m
}

/// Rows stored in the trace for paths under `dir` (a run is one row).
fn stored_rows_under(trace: &std::path::Path, dir: &std::path::Path) -> usize {
    let reader = TraceReader::open(trace).unwrap_or_else(|e| panic!("{e}"));
    let mut n = 0;
    for batch in reader.events().unwrap_or_else(|e| panic!("{e}")) {
        let ev = batch.unwrap_or_else(|e| panic!("{e}"));
        n += (0..ev.ops().len())
            .filter(|&i| {
                ev.path_at(i)
                    .is_some_and(|p| std::path::Path::new(p).starts_with(dir))
            })
            .count();
    }
    n
}

#[test]
fn runs_keep_every_call_in_fewer_rows() {
    if !can_trace() || !have("python3") {
        return;
    }
    let dir = scratch();
    write_file(&dir.path().join("data.bin"), 1 << 20);
    let d = dir.path().to_str().unwrap();
    let merged = dir.path().join("merged");
    let each = dir.path().join("each");
    for (out, extra) in [(&merged, &[][..]), (&each, &["--no-runs"][..])] {
        let o = collect(out, extra, &["python3", "-c", JOB, d]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let (m_merged, rows_merged) = read_rows(&merged);
    let (_, rows_each) = read_rows(&each);
    let a = calls(&rows_merged, dir.path());
    let b = calls(&rows_each, dir.path());
    // 256 + 1 sequential reads (the last returns 0), 300 preads, 64 writes.
    assert_eq!(a.values().sum::<usize>(), 256 + 1 + 300 + 64);
    assert_eq!(a, b, "runs expand to exactly the calls made");
    // Merged: the 256 reads and the 64 writes are a handful of rows. Only the
    // job's own rows are compared: the interpreter's start-up around them
    // differs from one run to the next by hundreds of rows.
    let (merged_rows, each_rows) = (
        stored_rows_under(&merged, dir.path()),
        stored_rows_under(&each, dir.path()),
    );
    assert!(
        merged_rows + 300 < each_rows,
        "rows with runs {merged_rows} vs one per call {each_rows}"
    );
    assert_eq!(m_merged.dropped_events, 0);

    if !have_duckdb() {
        return;
    }
    let sql = format!(
        "SELECT op, sum(ret), sum(calls), count(*) FROM read_parquet('{}/*.parquet') \
         WHERE path LIKE '{d}/%' AND op IN ('read', 'write') GROUP BY op ORDER BY op",
        merged.display()
    );
    let o = std::process::Command::new("python3")
        .args([
            "-c",
            "import duckdb, sys; print(duckdb.sql(sys.argv[1]).fetchall())",
            &sql,
        ])
        .output()
        .unwrap();
    let got = String::from_utf8_lossy(&o.stdout);
    let reads = 256 * 4096 + 300 * 4096;
    let writes = 64 * 65536;
    assert!(
        got.contains(&format!("('read', {reads}, {}, ", 257 + 300))
            && got.contains(&format!("('write', {writes}, 64, ")),
        "DuckDB sums: {got} {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn have_duckdb() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import duckdb"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        iorepro_tests::skip::cannot_run("the DuckDB part: python3 cannot import duckdb");
    }
    ok
}
