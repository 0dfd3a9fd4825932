//! Arbitrary manifest.json text: loading must return an error or a manifest
//! whose segment names stay inside the trace directory, and opening the trace
//! must then fail cleanly on the missing segments (or succeed when it lists none).
#![no_main]

use iorepro_format::{Manifest, TraceReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("manifest.json"), data).unwrap();
    let Ok(m) = Manifest::load(dir.path()) else {
        return;
    };
    for s in &m.segments {
        assert!(!s.contains('/') && s.ends_with(".parquet"));
    }
    match TraceReader::open(dir.path()) {
        Ok(r) => assert!(m.segments.is_empty() && r.rows() == 0),
        Err(e) => assert!(!m.segments.is_empty(), "{e}"),
    }
});
