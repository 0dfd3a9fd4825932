//! The fuzz targets' seeds (fuzz/seeds) and hand-made hostile inputs
//! (tests/fuzz_inputs) replayed through the same public entry points the
//! targets call: `TraceReader::open` and reading every batch, `Manifest::load`,
//! `Workload::parse` and `write_trace`. Each input must read cleanly or give a
//! one-line error naming the file and the problem; none may panic or allocate
//! without bound.

use std::path::{Path, PathBuf};

use iorepro_format::{Manifest, Source, TraceError, TraceReader, WriterOptions};
use iorepro_interchange::synth::{Workload, MAX_SYNTH_EVENTS};

fn inputs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_inputs")
}

fn seeds(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target)
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no files in {}", dir.display());
    files
}

/// Opens a trace and reads every batch, as the trace_reader target does.
fn read_all(path: &Path) -> Result<(TraceReader, u64), TraceError> {
    let reader = TraceReader::open(path)?;
    let mut rows = 0;
    for batch in reader.batches()? {
        rows += batch?.num_rows() as u64;
    }
    Ok((reader, rows))
}

/// All `ts` values of a trace, sorted.
fn timestamps(path: &Path) -> Vec<i64> {
    let reader = TraceReader::open(path).unwrap();
    let mut ts = Vec::new();
    for events in reader.events().unwrap() {
        ts.extend(events.unwrap().ts().values().iter().copied());
    }
    ts.sort_unstable();
    ts
}

/// Asserts a one-line error that names `file` and says `needle`.
fn assert_error(err: impl std::fmt::Display, file: &str, needle: &str) {
    let msg = err.to_string();
    assert_eq!(msg.lines().count(), 1, "one line: {msg}");
    assert!(msg.contains(file), "expected `{file}` in: {msg}");
    assert!(msg.contains(needle), "expected `{needle}` in: {msg}");
}

fn read_error(name: &str) -> TraceError {
    match read_all(&inputs().join(name)) {
        Ok((_, rows)) => panic!("{name}: read {rows} rows, expected an error"),
        Err(e) => e,
    }
}

/// A trace directory whose manifest.json holds `text`.
fn manifest_dir(text: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("manifest.json"), text).unwrap();
    dir
}

fn manifest_error(text: &[u8]) -> TraceError {
    let dir = manifest_dir(text);
    match Manifest::load(dir.path()) {
        Ok(m) => panic!(
            "manifest loaded ({} segments), expected an error",
            m.segments.len()
        ),
        Err(e) => e,
    }
}

fn workload_error(name: &str) -> String {
    match Workload::load(&inputs().join(name)) {
        Ok(w) => panic!(
            "{name}: accepted ({} events), expected an error",
            w.events()
        ),
        Err(e) => e.to_string(),
    }
}

#[test]
fn seed_segments_read_cleanly() {
    for seg in files_in(&seeds("trace_reader")) {
        let (reader, rows) = read_all(&seg).unwrap_or_else(|e| panic!("{e}"));
        assert!(rows > 0, "{}", seg.display());
        assert_eq!(
            rows,
            reader.rows(),
            "{}: rows read vs footer",
            seg.display()
        );
    }
}

/// Regression: foreign segments with `ts` as Int64 nanoseconds or as a
/// timestamp without a zone (pandas' default) failed with "Invalid timezone
/// \"UTC\"". All re-encodings of the synthetic seed must give its instants.
#[test]
fn foreign_timestamps_of_any_zone_read_as_the_same_instants() {
    let dir = seeds("trace_reader");
    let want = timestamps(&dir.join("synth-tiny.parquet"));
    assert_eq!(want.len(), 52);
    for name in [
        "foreign-plain-v2.parquet", // Int64 ns, no dictionaries, v2 pages, no statistics
        "foreign-view-naive.parquet", // zoneless timestamp, Utf8View strings
        "foreign-zstd-large.parquet", // +02:00 timestamp, LargeUtf8 strings
        "foreign-snappy-reversed.parquet", // rows in reverse time order
    ] {
        assert_eq!(timestamps(&dir.join(name)), want, "{name}");
    }
}

#[test]
fn seed_manifests_load() {
    for path in files_in(&seeds("manifest")) {
        let dir = manifest_dir(&std::fs::read(&path).unwrap());
        let m = Manifest::load(dir.path()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(m.schema_version, 1, "{}", path.display());
    }
}

/// Every seed workload parses, and synthesizes exactly the events it promises.
#[test]
fn seed_workloads_synthesize_the_promised_events() {
    for path in files_in(&seeds("workload")) {
        let w = Workload::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let out = tempfile::tempdir().unwrap();
        let m = w
            .write_trace(&out.path().join("t"), WriterOptions::new(Source::Synth))
            .unwrap();
        assert_eq!(m.events, w.events(), "{}", path.display());
        assert!(m.events > 0);
    }
}

#[test]
fn truncated_footer_is_an_error() {
    let e = read_error("truncated-footer.parquet");
    assert_error(e, "truncated-footer.parquet", "Corrupt footer");
}

#[test]
fn footer_length_past_the_file_is_an_error() {
    let e = read_error("footer-length-huge.parquet");
    assert_error(e, "footer-length-huge.parquet", "Parquet file too small");
}

/// The footer claims 10^15 rows (file and row group `num_rows`, every column's
/// `num_values`) over pages holding 52: the reader allocates by what the pages
/// hold and returns those 52; the claim stays visible for `validate`.
#[test]
fn huge_row_count_claim_reads_the_real_rows() {
    let (reader, rows) = read_all(&inputs().join("huge-row-count.parquet")).unwrap();
    assert_eq!(rows, 52);
    assert_eq!(reader.rows(), 1_000_000_000_000_000);
}

#[test]
fn deeply_nested_manifest_is_rejected() {
    let depth = 100_000;
    let mut text = String::from(r#"{"format":"iorepro-trace","schema_version":1,"nested":"#);
    text.push_str(&"[".repeat(depth));
    text.push_str(&"]".repeat(depth));
    text.push('}');
    assert_error(
        manifest_error(text.as_bytes()),
        "manifest.json",
        "recursion limit exceeded",
    );
}

#[test]
fn absurd_numbers_in_manifest_are_rejected() {
    for (name, needle) in [
        ("manifest-events-1e400.json", "number out of range"),
        (
            "manifest-events-past-u64.json",
            "invalid type: floating point",
        ),
        (
            "manifest-negative-dropped.json",
            "invalid value: integer `-1`",
        ),
        ("manifest-schema-version-max.json", "upgrade iorepro"),
        (
            "manifest-segment-escapes.json",
            "not a .parquet file name inside",
        ),
    ] {
        let text = std::fs::read(inputs().join(name)).unwrap();
        let e = manifest_error(&text);
        assert_error(&e, "manifest.json", needle);
        // The trace reader goes through the same check.
        let dir = manifest_dir(&text);
        let Err(e) = TraceReader::open(dir.path()) else {
            panic!("{name}: trace opened");
        };
        assert_error(e, "manifest.json", needle);
    }
}

/// A manifest listing 100,000 segments that are not there: the first missing
/// one is named, no work is done for the rest.
#[test]
fn manifest_listing_many_missing_segments_names_the_first() {
    let segments: Vec<String> = (0..100_000)
        .map(|i| format!("seg-{i:06}.parquet"))
        .collect();
    let mut m = Manifest::new(Source::Synth);
    m.segments = segments;
    let dir = tempfile::tempdir().unwrap();
    m.store(dir.path()).unwrap();
    let Err(e) = TraceReader::open(dir.path()) else {
        panic!("trace with missing segments opened");
    };
    assert_error(e, "seg-000000.parquet", "No such file");
}

/// Regression: each of these parsed, and `write_trace` then allocated one
/// generator state per rank or a whole phase in memory (OOM), wrote for ever,
/// or overflowed the i64 nanosecond clock.
#[test]
fn workloads_beyond_memory_disk_or_clock_are_rejected() {
    for (name, needle) in [
        (
            "workload-4e9-ranks.toml",
            "ranks = 4294967295 is more than 1048576",
        ),
        (
            "workload-huge-phase.toml",
            "one phase would hold 2199023255556 events",
        ),
        (
            "workload-1e15-events.toml",
            "would make 1000000002000000 events",
        ),
        ("workload-past-2262.toml", "past the year 2255"),
        ("workload-slow-storage.toml", "past the year 2255"),
        (
            "workload-size-past-i64.toml",
            "does not fit a trace's 64-bit offsets",
        ),
    ] {
        let e = workload_error(name);
        assert_error(&e, name, "bad workload");
        assert_error(&e, name, needle);
    }
}

/// The limits leave room for large real uses: the replayer benchmark's
/// 100-million-event workload is accepted.
#[test]
fn large_but_reasonable_workload_is_accepted() {
    let w = Workload::parse(
        "ranks = 4\n[dataset]\ndir = \"/d\"\nfiles = 8\nfile_size = \"1MiB\"\nread_size = \"4KiB\"\n\
         [training]\nsteps = 8333\ncompute_time = \"1us\"\nreads_per_step = 1000\n",
    )
    .unwrap();
    assert_eq!(w.events(), 4 * 8333 * 1000 * 3);
    assert!(w.events() < MAX_SYNTH_EVENTS);
}

/// Found by the trace_reader target: a mutated definition-level run makes the
/// Parquet decoder panic ("offset + len out of bounds") while reading.
#[test]
fn crash_definition_levels_out_of_bounds_is_an_error() {
    let e = read_error("crash-definition-levels-out-of-bounds.parquet");
    assert_error(
        e,
        "crash-definition-levels-out-of-bounds.parquet",
        "corrupt segment",
    );
}

/// The CLI reports the same input on one line with exit status 2: the caught
/// decoder panic prints no panic message.
#[test]
fn crash_definition_levels_out_of_bounds_cli_prints_one_line() {
    let input = inputs().join("crash-definition-levels-out-of-bounds.parquet");
    let out_dir = tempfile::tempdir().unwrap();
    let out = assert_cmd::Command::cargo_bin("iorepro-trace")
        .unwrap()
        .arg("merge")
        .arg("--out")
        .arg(out_dir.path().join("merged"))
        .arg(&input)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert_error(
        err.trim_end(),
        "crash-definition-levels-out-of-bounds.parquet",
        "corrupt segment",
    );
}

/// Found by the trace_reader target (a 20 s timeout): a page header whose
/// Thrift lists claim 2^31 elements made the decoder re-read the end of the
/// file once per element, for minutes. Reading past the end is now an error.
#[test]
fn timeout_page_header_skip_past_the_end_is_a_quick_error() {
    let name = "timeout-page-header-skip.parquet";
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(read_all(&inputs().join(name)).map(|(_, rows)| rows)));
    let result = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("reading still running after 30 s");
    let Err(e) = result else {
        panic!("{name}: read {result:?}, expected an error");
    };
    assert_error(e, name, "read past the end of the file");
}

/// Found by the trace_reader target (a 20 s timeout under AddressSanitizer):
/// a footer field claiming a list of 2^31 booleans. Parquet's Thrift skipping
/// walks such a list without consuming input, which no wrapper of ours can
/// bound; it is finite (about 3 s here) and ends in a one-line error.
#[test]
fn slow_footer_bool_list_skip_ends_in_an_error() {
    let name = "slow-footer-bool-list-skip.parquet";
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(read_all(&inputs().join(name)).map(|(_, rows)| rows)));
    let result = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("reading still running after 60 s");
    let Err(e) = result else {
        panic!("{name}: read {result:?}, expected an error");
    };
    assert_error(e, name, "Unexpected struct field type");
}
