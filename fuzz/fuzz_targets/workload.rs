//! Arbitrary workload TOML: parsing must return an error or a checked workload.
#![no_main]

use iorepro_traces::synth::Workload;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(w) = Workload::parse(text) {
            assert!(w.ranks > 0 && w.read_size <= w.file_size);
        }
    }
});
