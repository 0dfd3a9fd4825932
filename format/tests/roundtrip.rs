//! Rows written are the rows read back: across segment boundaries, with nulls,
//! and after the writer dies without closing the trace.

use arrow_array::Array;
use iorepro_format::{EventRow, Events, Op, Source, TraceReader, TraceWriter, WriterOptions};
use proptest::prelude::*;

#[derive(Debug, Clone, PartialEq)]
struct Row {
    ts: i64,
    dur: i64,
    host: String,
    pid: i32,
    tid: i32,
    rank: Option<i32>,
    comm: String,
    op: Op,
    path: Option<String>,
    fd: Option<i32>,
    offset: Option<i64>,
    size: Option<i64>,
    ret: i64,
    flags: Option<i32>,
}

fn row_strategy() -> impl Strategy<Value = Row> {
    (
        (
            0i64..1_000_000,
            0i64..i64::MAX / 4,
            "[a-z]{1,6}",
            any::<i32>(),
            any::<i32>(),
        ),
        (
            proptest::option::of(0i32..4096),
            "[ -~]{0,15}",
            proptest::sample::select(Op::ALL[..12].to_vec()),
            proptest::option::of("/[a-zA-Z0-9_/.é-]{0,40}"),
            proptest::option::of(any::<i32>()),
        ),
        (
            proptest::option::of(any::<i64>()),
            proptest::option::of(0i64..1 << 40),
            any::<i64>(),
            proptest::option::of(any::<i32>()),
        ),
    )
        .prop_map(
            |(
                (gap, dur, host, pid, tid),
                (rank, comm, op, path, fd),
                (offset, size, ret, flags),
            )| Row {
                ts: gap,
                dur,
                host,
                pid,
                tid,
                rank,
                comm,
                op,
                path,
                fd,
                offset,
                size,
                ret,
                flags,
            },
        )
}

fn write(
    dir: &std::path::Path,
    rows: &[Row],
    segment_rows: usize,
    batch_rows: usize,
) -> TraceWriter {
    let mut opts = WriterOptions::new(Source::Synth);
    opts.segment_rows = segment_rows;
    opts.batch_rows = batch_rows;
    let mut w = TraceWriter::create(dir, opts).unwrap();
    for r in rows {
        w.push(&event_row(r)).unwrap();
    }
    w
}

/// The writer's view of a test row: one call.
fn event_row(r: &Row) -> EventRow<'_> {
    EventRow {
        ts_ns: r.ts,
        dur_ns: r.dur,
        host: &r.host,
        pid: r.pid,
        tid: r.tid,
        rank: r.rank,
        comm: &r.comm,
        op: r.op,
        path: r.path.as_deref(),
        fd: r.fd,
        offset: r.offset,
        size: r.size,
        ret: r.ret,
        flags: r.flags,
        calls: 1,
        span_ns: None,
        path2: None,
        via: None,
        exchange: None,
        from_storage: None,
    }
}

fn read_all(dir: &std::path::Path) -> Vec<Row> {
    let reader = TraceReader::open(dir).unwrap();
    let mut out = Vec::new();
    for ev in reader.events().unwrap() {
        let ev: Events = ev.unwrap();
        for i in 0..ev.len() {
            out.push(Row {
                ts: ev.ts().value(i),
                dur: ev.dur_ns().value(i),
                host: ev.host_at(i).to_string(),
                pid: ev.pid().value(i),
                tid: ev.tid().value(i),
                rank: Events::opt_i32(ev.rank(), i),
                comm: ev.comm().value(i).to_string(),
                op: ev.op(i),
                path: ev.path_at(i).map(str::to_string),
                fd: Events::opt_i32(ev.fd(), i),
                offset: Events::opt_i64(ev.offset(), i),
                size: Events::opt_i64(ev.size(), i),
                ret: ev.ret().value(i),
                flags: Events::opt_i32(ev.flags(), i),
            });
            assert!(ev.ts().is_valid(i));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn rows_round_trip_across_segments(
        mut rows in proptest::collection::vec(row_strategy(), 0..400),
        segment_rows in 1usize..64,
        batch_rows in 1usize..50,
    ) {
        // `ts` in the strategy is a gap; make it a non-decreasing clock.
        let mut t = 1_700_000_000_000_000_000i64;
        for r in &mut rows {
            t += r.ts;
            r.ts = t;
        }
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t");
        let m = write(&trace, &rows, segment_rows, batch_rows).finish().unwrap();
        prop_assert_eq!(m.events, rows.len() as u64);
        prop_assert_eq!(m.segments.len(), rows.len().div_ceil(segment_rows));
        prop_assert!(m.complete);
        let back = read_all(&trace);
        prop_assert_eq!(back, rows);
    }
}

/// A read at `ts` with nothing else set.
fn bare_row(ts: i64) -> Row {
    Row {
        ts,
        dur: 1,
        host: "h".into(),
        pid: 1,
        tid: 1,
        rank: None,
        comm: "c".into(),
        op: Op::Read,
        path: None,
        fd: None,
        offset: None,
        size: None,
        ret: 0,
        flags: None,
    }
}

#[test]
fn unordered_pushes_come_back_in_ts_order_within_a_batch() {
    let rows: Vec<Row> = [30, 10, 20].iter().map(|&ts| bare_row(ts)).collect();
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("t"), &rows, 100, 100)
        .finish()
        .unwrap();
    let ts: Vec<i64> = read_all(&dir.path().join("t"))
        .iter()
        .map(|r| r.ts)
        .collect();
    assert_eq!(ts, vec![10, 20, 30]);
}

/// Batches that reach back before rows already written (several ranks'
/// rows handed over as they come) each start a segment, so every segment
/// stays sorted and the reader merges them back into one time order.
#[test]
fn late_batches_start_a_segment_and_read_back_in_ts_order() {
    let rows: Vec<Row> = [30, 40, 10, 20, 35, 50]
        .iter()
        .map(|&ts| bare_row(ts))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t");
    // Two rows per batch: [30, 40], [10, 20] (late), [35, 50] (late).
    let m = write(&trace, &rows, 100, 2).finish().unwrap();
    assert_eq!(m.segments.len(), 3, "{m:?}");
    let ts: Vec<i64> = read_all(&trace).iter().map(|r| r.ts).collect();
    assert_eq!(ts, vec![10, 20, 30, 35, 40, 50]);
    let report = iorepro_format::validate::validate(&trace).unwrap();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

#[test]
fn a_writer_that_dies_leaves_its_finished_segments_readable() {
    let rows: Vec<Row> = (0..250)
        .map(|i| Row {
            ts: 1_000 + i,
            dur: 5,
            host: "node".into(),
            pid: 7,
            tid: 7,
            rank: Some(0),
            comm: "python".into(),
            op: Op::Write,
            path: Some("/ckpt/a".into()),
            fd: Some(3),
            offset: Some(i * 10),
            size: Some(10),
            ret: 10,
            flags: None,
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t");
    let w = write(&trace, &rows, 100, 10);
    // As if killed: no finish(), no destructor work.
    std::mem::forget(w);
    let reader = TraceReader::open(&trace).unwrap();
    assert!(!reader.manifest().complete);
    assert_eq!(reader.manifest().segments.len(), 2);
    let back = read_all(&trace);
    assert_eq!(back, rows[..200].to_vec());
    // The manifest describes the finished segments only: their rows and
    // time range, not the 50 rows of the segment still being written.
    let m = reader.manifest();
    assert_eq!(m.events, 200);
    assert_eq!((m.start_unix_ns, m.end_unix_ns), (1_000, 1_199));
    let v = iorepro_format::validate::validate(&trace).unwrap();
    assert!(v.warnings.iter().any(|w| w.contains("not marked complete")));
}

/// Every row group of every segment says it is sorted by `ts` (ascending),
/// and row groups hold at most `row_group_rows` rows, so engines that read
/// the footer (DuckDB, Spark) can rely on the order and split the work.
#[test]
fn segments_record_their_ts_order_and_row_group_size() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let rows: Vec<Row> = (0..2_500).map(bare_row).collect();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t");
    let mut opts = WriterOptions::new(Source::Synth);
    opts.segment_rows = 1_000;
    opts.row_group_rows = 300;
    let mut w = TraceWriter::create(&trace, opts).unwrap();
    for r in &rows {
        w.push(&event_row(r)).unwrap();
    }
    let m = w.finish().unwrap();
    assert_eq!(m.segments.len(), 3);
    let mut groups = Vec::new();
    for seg in &m.segments {
        let file = std::fs::File::open(trace.join(seg)).unwrap();
        let meta = SerializedFileReader::new(file).unwrap().metadata().clone();
        for rg in meta.row_groups() {
            groups.push(rg.num_rows());
            let sorting = rg.sorting_columns().expect("sorting_columns written");
            assert_eq!(sorting.len(), 1);
            assert_eq!(sorting[0].column_idx, 0, "ts is column 0");
            assert!(!sorting[0].descending);
        }
    }
    assert_eq!(
        groups,
        vec![300, 300, 300, 100, 300, 300, 300, 100, 300, 200]
    );
    assert_eq!(read_all(&trace), rows);
}

/// A scan that spares `pid` where `rank` has no null: row groups whose
/// every row has a rank hand `pid` over as nulls (zeros), without decoding
/// it; a row group with a rankless row hands over every `pid` as written.
#[test]
fn a_spared_column_is_read_only_in_row_groups_where_its_guard_has_nulls() {
    use iorepro_format::scan::{scan_sparing, Fold, OnlyWhereNull, ScanBatch};
    use iorepro_format::schema::{COL_PID, COL_RANK, COL_TS};
    // Three row groups of 100 rows: the second has one row without a rank.
    let rows: Vec<Row> = (0..300)
        .map(|i| Row {
            pid: 1000 + i as i32,
            rank: (i != 150).then_some(i as i32 % 4),
            ..bare_row(i)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t");
    let mut opts = WriterOptions::new(Source::Synth);
    opts.row_group_rows = 100;
    let mut w = TraceWriter::create(&trace, opts).unwrap();
    for r in &rows {
        w.push(&event_row(r)).unwrap();
    }
    w.finish().unwrap();

    /// Each row's `ts` and the `pid` the scan handed over with it.
    struct Pids(Vec<(i64, i32)>);
    impl Fold for Pids {
        fn add(&mut self, b: &ScanBatch) {
            self.0
                .extend(b.ts().iter().copied().zip(b.pid().iter().copied()));
        }
    }
    let reader = TraceReader::open(&trace).unwrap();
    let mut seen: Vec<(i64, i32)> = Vec::new();
    let pid_where_no_rank = OnlyWhereNull {
        column: COL_PID,
        where_null: COL_RANK,
    };
    scan_sparing(
        &reader,
        &[COL_TS, COL_PID, COL_RANK],
        &[pid_where_no_rank],
        || Pids(Vec::new()),
        |p| seen.extend(p.0),
    )
    .unwrap();
    assert_eq!(seen.len(), 300);
    for (ts, pid) in seen {
        if (100..200).contains(&ts) {
            assert_eq!(pid, rows[ts as usize].pid, "row {ts}: read as written");
        } else {
            assert_eq!(pid, 0, "row {ts}: spared, so null");
        }
    }
}

/// A row group of single calls hands `calls` over as nulls (which mean 1);
/// one holding a run hands every `calls` over as written. Either way each
/// row counts its calls.
#[test]
fn calls_are_decoded_only_in_row_groups_with_a_run() {
    use iorepro_format::runs::calls_in;
    use iorepro_format::scan::{scan, Fold, ScanBatch};
    use iorepro_format::schema::{COL_CALLS, COL_TS};
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t");
    let mut opts = WriterOptions::new(Source::Synth);
    opts.row_group_rows = 100;
    let mut w = TraceWriter::create(&trace, opts).unwrap();
    // Three row groups of 100 rows: row 150 is a run of 5 calls.
    let rows: Vec<Row> = (0..300).map(bare_row).collect();
    for r in &rows {
        let mut e = event_row(r);
        if r.ts == 150 {
            e.calls = 5;
            e.span_ns = Some(10);
        }
        w.push(&e).unwrap();
    }
    w.finish().unwrap();

    /// Each row's `ts`, its calls, and whether `calls` came decoded.
    struct Calls(Vec<(i64, i64, bool)>);
    impl Fold for Calls {
        fn add(&mut self, b: &ScanBatch) {
            let calls = b.calls();
            for (i, &ts) in b.ts().iter().enumerate() {
                self.0.push((ts, calls_in(calls, i), calls.is_valid(i)));
            }
        }
    }
    let reader = TraceReader::open(&trace).unwrap();
    let mut seen = Vec::new();
    scan(
        &reader,
        &[COL_TS, COL_CALLS],
        || Calls(Vec::new()),
        |p| seen.extend(p.0),
    )
    .unwrap();
    assert_eq!(seen.len(), 300);
    for (ts, calls, decoded) in seen {
        assert_eq!(calls, if ts == 150 { 5 } else { 1 }, "row {ts}");
        assert_eq!(decoded, (100..200).contains(&ts), "row {ts}");
    }
}

/// Paths read as keys (`with_path_keys`) are the paths as written, row by
/// row; a consumer keeping its work per path with [`PerPath`] does it once
/// per distinct path of a row group, not per row; and the writer keeps
/// the dictionary of 30,000 distinct paths (1.9 MB, past Parquet's 1 MiB
/// default, where pages fall back to plain strings that a keyed read must
/// hash row by row to make a dictionary again).
#[test]
fn paths_read_as_keys_are_the_paths_written_and_are_worked_out_once_each() {
    use iorepro_format::columns::PerPath;
    use iorepro_format::schema::{COL_OP, COL_PATH, COL_TS};
    let names: Vec<String> = (0..30_000)
        .map(|i| format!("/data/train/shard-{i:08}/sample-with-a-long-name.npz"))
        .collect();
    let rows: Vec<Row> = (0..60_000)
        .map(|i| Row {
            path: (i % 11 != 0).then(|| names[(i * 7) % names.len()].clone()),
            ..bare_row(i as i64)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t");
    write(&trace, &rows, 100_000, 4096).finish().unwrap();

    let reader = TraceReader::open(&trace).unwrap();
    let seg = &reader.segments()[0].path;
    let file = std::fs::File::open(seg).unwrap();
    let meta = parquet::file::reader::SerializedFileReader::new(file).unwrap();
    use parquet::file::reader::FileReader;
    let group = meta.metadata().row_group(0);
    let path_chunk = (0..group.num_columns())
        .map(|c| group.column(c))
        .find(|c| c.column_path().string() == COL_PATH)
        .unwrap();
    assert!(
        !path_chunk
            .encodings()
            .any(|e| e == parquet::basic::Encoding::DELTA_BYTE_ARRAY
                || e == parquet::basic::Encoding::DELTA_LENGTH_BYTE_ARRAY),
        "path pages fell back from the dictionary: {:?}",
        path_chunk.encodings().collect::<Vec<_>>()
    );

    let keyed = reader
        .clone()
        .with_columns(&[COL_TS, COL_OP, COL_PATH])
        .with_path_keys();
    let mut per_path: PerPath<usize> = PerPath::default();
    let mut worked = 0usize;
    let mut back: Vec<Option<String>> = Vec::new();
    for ev in keyed.events().unwrap() {
        let ev = ev.unwrap();
        assert!(ev.path_keys().is_some(), "path handed over as keys");
        for i in 0..ev.len() {
            let len = per_path.get(&ev, i, |p| {
                worked += 1;
                p.len()
            });
            assert_eq!(len, ev.path_at(i).map(str::len));
            back.push(ev.path_at(i).map(str::to_string));
        }
    }
    let written: Vec<Option<String>> = rows.iter().map(|r| r.path.clone()).collect();
    assert_eq!(back, written);
    let distinct: std::collections::HashSet<&String> =
        rows.iter().filter_map(|r| r.path.as_ref()).collect();
    assert_eq!(worked, distinct.len(), "once per distinct path");
}
