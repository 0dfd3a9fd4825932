//! Arbitrary workload TOML: parsing must return an error or a checked workload,
//! and a small checked workload must synthesize exactly the events it promises.
#![no_main]

use iorepro_format::{Source, WriterOptions};
use iorepro_interchange::synth::Workload;
use libfuzzer_sys::fuzz_target;

/// Larger workloads are only parsed: writing them would slow the search down.
const MAX_WRITTEN_EVENTS: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(w) = Workload::parse(text) else {
        return;
    };
    assert!(w.ranks > 0 && w.read_size <= w.file_size);
    let passes = u64::from(w.steps) * u64::from(w.ranks);
    if w.events() > MAX_WRITTEN_EVENTS || passes > MAX_WRITTEN_EVENTS {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut opts = WriterOptions::new(Source::Synth);
    opts.segment_rows = 1000; // rotate segments too
    let m = w
        .write_trace(&dir.path().join("t"), opts)
        .expect("a checked workload synthesizes");
    assert_eq!(m.events, w.events());
});
