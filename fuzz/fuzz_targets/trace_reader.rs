//! Arbitrary bytes as a Parquet segment: opening and reading must return an
//! error or rows, never panic, hang or allocate without bound. A segment that
//! opens is also read as two overlapping segments of one trace (the k-way
//! merge) and with a column projection.
#![no_main]

use std::path::Path;

use iorepro_format::{Manifest, Source, TraceReader};
use libfuzzer_sys::fuzz_target;

/// Reads every batch; returns the rows read, or None at the first error.
fn read_all(reader: &TraceReader) -> Option<u64> {
    let mut rows = 0u64;
    for batch in reader.batches().ok()? {
        rows += batch.ok()?.num_rows() as u64;
    }
    Some(rows)
}

fn two_segment_trace(dir: &Path, data: &[u8]) -> TraceReader {
    let names = ["a.parquet", "b.parquet"];
    for n in names {
        std::fs::write(dir.join(n), data).unwrap();
    }
    let mut m = Manifest::new(Source::Import);
    m.segments = names.iter().map(|n| n.to_string()).collect();
    m.complete = true;
    m.store(dir).unwrap();
    TraceReader::open(dir).expect("a segment that opened alone opens twice")
}

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg.parquet");
    std::fs::write(&path, data).unwrap();
    let Ok(reader) = TraceReader::open(&path) else {
        return;
    };
    let single = read_all(&reader);
    let projected = read_all(&reader.with_columns(&["op", "size"]));
    if let Some(rows) = single {
        assert_eq!(projected, Some(rows), "projection changed the row count");
    }
    let trace_dir = dir.path().join("trace");
    std::fs::create_dir(&trace_dir).unwrap();
    let merged = read_all(&two_segment_trace(&trace_dir, data));
    if let (Some(rows), Some(both)) = (single, merged) {
        assert_eq!(both, 2 * rows, "merging two copies lost or invented rows");
    }
});
