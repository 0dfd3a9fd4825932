//! Arbitrary bytes as a Parquet segment: opening and reading must return an
//! error or rows, never panic or hang.
#![no_main]

use iorepro_traces::TraceReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg.parquet");
    std::fs::write(&path, data).unwrap();
    if let Ok(reader) = TraceReader::open(&path) {
        if let Ok(batches) = reader.batches() {
            for b in batches {
                if b.is_err() {
                    break;
                }
            }
        }
    }
});
