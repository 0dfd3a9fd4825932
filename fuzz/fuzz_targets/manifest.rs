//! Arbitrary manifest.json text: loading must return an error or a manifest
//! whose segment names stay inside the trace directory.
#![no_main]

use iorepro_traces::Manifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("manifest.json"), data).unwrap();
    if let Ok(m) = Manifest::load(dir.path()) {
        for s in &m.segments {
            assert!(!s.contains('/') && s.ends_with(".parquet"));
        }
    }
});
