//! Traces written by other tools (pyarrow alone, DuckDB) are read like our own:
//! plain strings, timestamps in other units and zones, wider integers.

use arrow_array::Array;
use iorepro_format::{Op, TraceReader};
use iorepro_tests::python::require_python;

fn write_pyarrow(dir: &std::path::Path) -> Option<()> {
    let script = format!(
        r#"
import os, json, pyarrow as pa, pyarrow.parquet as pq
d = {dir:?}
os.makedirs(d, exist_ok=True)
n = 1000
t0 = 1_700_000_000_000_000  # microseconds
table = pa.table({{
    "ts": pa.array([t0 + i * 10 for i in range(n)], pa.timestamp("us", tz="Europe/Paris")),
    "dur_ns": pa.array([1500 + i for i in range(n)], pa.int64()),
    "host": pa.array(["gpu-node-%d" % (i % 2) for i in range(n)], pa.large_string()),
    "pid": pa.array([100 + i % 3 for i in range(n)], pa.int64()),
    "tid": pa.array([100 + i % 3 for i in range(n)], pa.int64()),
    "rank": pa.array([None if i % 10 == 0 else i % 4 for i in range(n)], pa.int64()),
    "comm": pa.array(["python"] * n, pa.string()),
    "op": pa.array(["read" if i % 2 else "write" for i in range(n)], pa.string()),
    "path": pa.array(["/data/f%d" % (i % 7) for i in range(n)], pa.string()),
    "fd": pa.array([3] * n, pa.int32()),
    "offset": pa.array([i * 4096 for i in range(n)], pa.int64()),
    "size": pa.array([4096] * n, pa.int64()),
    "ret": pa.array([4096] * n, pa.int64()),
    "flags": pa.array([None] * n, pa.int32()),
    "extra_column": pa.array([1.5] * n, pa.float64()),
}})
pq.write_table(table.slice(0, 600), os.path.join(d, "part-a.parquet"))
pq.write_table(table.slice(600), os.path.join(d, "part-b.parquet"))
json.dump({{"format": "iorepro-trace", "schema_version": 1, "tool_version": "pyarrow",
           "source": "import", "hosts": ["gpu-node-0", "gpu-node-1"],
           "start_unix_ns": t0 * 1000, "end_unix_ns": (t0 + 9990) * 1000, "events": n,
           "dropped_events": 0, "segments": ["part-a.parquet", "part-b.parquet"]}},
          open(os.path.join(d, "manifest.json"), "w"))
"#
    );
    require_python(&script, &["pyarrow"]).map(|_| ())
}

#[test]
fn a_trace_written_by_pyarrow_alone_reads_back_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("foreign");
    if write_pyarrow(&dir).is_none() {
        return;
    }
    let reader = TraceReader::open(&dir).unwrap();
    let mut n = 0usize;
    let t0 = 1_700_000_000_000_000_000i64;
    for ev in reader.events().unwrap() {
        let ev = ev.unwrap();
        for i in 0..ev.len() {
            let k = n + i;
            assert_eq!(
                ev.ts().value(i),
                t0 + k as i64 * 10_000,
                "row {k}: ts converted to ns UTC"
            );
            assert_eq!(ev.host_at(i), format!("gpu-node-{}", k % 2));
            assert_eq!(ev.pid().value(i), 100 + (k % 3) as i32);
            assert_eq!(ev.rank().is_null(i), k.is_multiple_of(10));
            assert_eq!(ev.op(i), if k % 2 == 1 { Op::Read } else { Op::Write });
            assert_eq!(ev.path_at(i), Some(format!("/data/f{}", k % 7).as_str()));
            assert_eq!(ev.offset().value(i), k as i64 * 4096);
            assert!(ev.flags().is_null(i));
        }
        n += ev.len();
    }
    assert_eq!(n, 1000);

    // A lone segment file is a trace too.
    let single = TraceReader::open(&dir.join("part-b.parquet")).unwrap();
    assert_eq!(single.rows(), 400);
    assert_eq!(single.manifest().events, 400);
}

#[test]
fn a_parquet_file_written_by_duckdb_is_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("duck.parquet");
    let script = format!(
        r#"
import duckdb
duckdb.sql('''
COPY (SELECT
    to_timestamp(1700000000 + i / 1000.0) AS ts,
    CAST(1000 AS BIGINT) AS dur_ns, 'h' AS host,
    CAST(42 AS INTEGER) AS pid, CAST(42 AS INTEGER) AS tid, CAST(i % 2 AS INTEGER) AS rank,
    'python' AS comm, 'read' AS op, '/d/x' AS path, CAST(5 AS INTEGER) AS fd,
    CAST(i * 4096 AS BIGINT) AS "offset", CAST(4096 AS BIGINT) AS size,
    CAST(4096 AS BIGINT) AS ret, CAST(NULL AS INTEGER) AS flags
  FROM range(5000) t(i) ORDER BY i) TO '{}' (FORMAT parquet)
''')
"#,
        file.display()
    );
    if require_python(&script, &["duckdb"]).is_none() {
        return;
    }
    let reader = TraceReader::open(&file).unwrap();
    let mut rows = 0;
    let mut last = i64::MIN;
    for ev in reader.events().unwrap() {
        let ev = ev.unwrap();
        for &t in ev.ts().values().iter() {
            assert!(t >= last);
            last = t;
        }
        rows += ev.len();
    }
    assert_eq!(rows, 5000);
}
