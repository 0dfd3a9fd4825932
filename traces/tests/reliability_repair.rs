//! `iorepro-trace validate --repair`: a damaged trace directory is rebuilt from
//! the segments that are complete and readable; unreadable and unfinished
//! segments are set aside under a `.corrupt` name (never deleted) and named in
//! the output; what the old manifest knew is kept; a healthy trace is left
//! untouched. Plain `validate` on a damaged trace points to `--repair`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use iorepro_format::{EventRow, Manifest, Op, Source, TraceReader, TraceWriter, WriterOptions};

const SEGMENT_ROWS: usize = 100;

fn row(i: i64) -> EventRow<'static> {
    EventRow {
        ts_ns: 1_000_000 + i * 1000,
        dur_ns: 10,
        host: if i % 2 == 0 { "node-a" } else { "node-b" },
        pid: 7,
        tid: 7,
        rank: Some((i % 2) as i32),
        comm: "python",
        op: Op::Read,
        path: Some("/data/shard"),
        fd: Some(3),
        offset: Some(i * 4096),
        size: Some(4096),
        ret: 4096,
        flags: None,
        calls: 1,
        span_ns: None,
        path2: None,
        via: None,
        exchange: None,
        from_storage: None,
    }
}

fn writer(dir: &Path) -> TraceWriter {
    let mut opts = WriterOptions::new(Source::Ebpf);
    opts.segment_rows = SEGMENT_ROWS;
    opts.batch_rows = 10;
    opts.command = Some(vec!["python".into(), "train.py".into()]);
    let mut w = TraceWriter::create(dir, opts).unwrap();
    w.set_dropped_events(5);
    w.set_extra("collector", serde_json::json!({ "hooks": ["x"] }));
    w
}

/// A finished trace of `rows` rows in segments of 100.
fn finished_trace(dir: &Path, rows: i64) {
    let mut w = writer(dir);
    for i in 0..rows {
        w.push(&row(i)).unwrap();
    }
    w.finish().unwrap();
}

/// A scratch directory holding, in `t`, a finished trace of `rows` rows.
fn scratch_trace(rows: i64) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    finished_trace(&dir, rows);
    (tmp, dir)
}

/// Rewrites the manifest of `dir` as `edit` leaves its JSON.
fn edit_manifest(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("manifest.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, v.to_string()).unwrap();
}

fn trace_cmd(args: &[&str]) -> Output {
    Command::cargo_bin("iorepro-trace")
        .unwrap()
        .args(args)
        .output()
        .unwrap()
}

/// `iorepro-trace validate --repair [--json] DIR`.
fn run_repair(dir: &Path, json: bool) -> Output {
    let d = dir.to_str().unwrap();
    if json {
        trace_cmd(&["validate", "--repair", "--json", d])
    } else {
        trace_cmd(&["validate", "--repair", d])
    }
}

fn repair(dir: &Path) -> (String, serde_json::Value) {
    let out = run_repair(dir, true);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "repair failed: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The plain form prints the same decisions as lines (checked on a copy of
    // the result: a second repair must find nothing left to do).
    let again = run_repair(dir, false);
    assert!(again.status.success());
    let text = String::from_utf8_lossy(&again.stdout).to_string();
    assert!(
        text.contains("nothing to repair"),
        "repair is idempotent: {text}"
    );
    (text, json)
}

fn ts_of(trace: &Path) -> Vec<i64> {
    let reader = TraceReader::open(trace).unwrap();
    let mut ts = Vec::new();
    for ev in reader.events().unwrap() {
        ts.extend(ev.unwrap().ts().values().iter().copied());
    }
    ts
}

fn ts_range(rows: std::ops::Range<i64>) -> Vec<i64> {
    rows.map(|i| row(i).ts_ns).collect()
}

fn validate_ok(dir: &Path) -> String {
    let out = trace_cmd(&["validate", dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn validate_fails_pointing_to_repair(dir: &Path) -> String {
    let out = trace_cmd(&["validate", dir.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("validate --repair") && err.contains(dir.to_str().unwrap()),
        "{err}"
    );
    err
}

#[test]
fn a_corrupt_and_an_unfinished_segment_are_set_aside() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    // 450 rows: four finished segments and a fifth left open, as by a killed writer.
    let mut w = writer(&dir);
    for i in 0..450 {
        w.push(&row(i)).unwrap();
    }
    drop(w);
    let partial = dir.join("seg-000004.parquet.partial");
    assert!(partial.exists(), "the open segment is a .partial file");
    // Segment 2 gets its middle overwritten (its footer still parses, its pages do not).
    let seg2 = dir.join("seg-000002.parquet");
    let mut bytes = std::fs::read(&seg2).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid - 200..mid] {
        *b = 0xA5;
    }
    std::fs::write(&seg2, bytes).unwrap();

    validate_fails_pointing_to_repair(&dir);
    let (text, r) = repair(&dir);

    assert_eq!(
        r["segments"],
        serde_json::json!([
            "seg-000000.parquet",
            "seg-000001.parquet",
            "seg-000003.parquet"
        ])
    );
    assert_eq!(r["events"], 300);
    let set_aside: BTreeMap<String, String> = r["set_aside"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["file"].as_str().unwrap().to_string(),
                s["renamed_to"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        set_aside,
        BTreeMap::from([
            (
                "seg-000002.parquet".to_string(),
                "seg-000002.parquet.corrupt".to_string()
            ),
            (
                "seg-000004.parquet.partial".to_string(),
                "seg-000004.parquet.partial.corrupt".to_string()
            ),
        ])
    );
    for (from, to) in &set_aside {
        assert!(!dir.join(from).exists(), "{from} moved");
        assert!(dir.join(to).exists(), "{to} kept, not deleted");
    }
    assert!(r["complete"] == false, "rows were lost: not complete");

    // Exactly the rows of the good segments read back, and the manifest says so.
    let mut want = ts_range(0..200);
    want.extend(ts_range(300..400));
    assert_eq!(ts_of(&dir), want);
    let m = Manifest::load(&dir).unwrap();
    assert_eq!(m.events, 300);
    assert_eq!(
        (m.start_unix_ns, m.end_unix_ns),
        (row(0).ts_ns, row(399).ts_ns)
    );
    assert!(!m.complete);
    // What only the old manifest knew is kept.
    assert_eq!(m.source, Source::Ebpf);
    assert_eq!(m.dropped_events, 5);
    assert_eq!(m.command.as_deref().unwrap()[1], "train.py");
    assert_eq!(m.extra["collector"]["hooks"][0], "x");
    assert_eq!(m.hosts, vec!["node-a".to_string(), "node-b".to_string()]);
    let out = validate_ok(&dir);
    assert!(out.contains("300 events"), "{out}");
    assert!(text.contains("nothing to repair"));
    // The manifest the repair rewrote stays beside the trace, as it says.
    let bak: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json.bak")).unwrap()).unwrap();
    assert_eq!(bak["dropped_events"], 5);
    assert!(
        r["old_manifest"]
            .as_str()
            .unwrap()
            .ends_with("as manifest.json.bak"),
        "{}",
        r["old_manifest"]
    );
}

#[test]
fn the_plain_output_names_what_was_set_aside() {
    let (_tmp, dir) = scratch_trace(300);
    std::fs::write(dir.join("seg-000001.parquet"), b"PAR1 not really").unwrap();
    let out = run_repair(&dir, false);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("set aside: seg-000001.parquet -> seg-000001.parquet.corrupt"),
        "{text}"
    );
    assert!(text.contains("200 events in 2 segments"), "{text}");
    assert!(text.contains("incomplete"), "{text}");
}

#[test]
fn a_lost_manifest_is_rebuilt_from_the_segments() {
    let (_tmp, dir) = scratch_trace(250);
    std::fs::remove_file(dir.join("manifest.json")).unwrap();
    validate_fails_pointing_to_repair(&dir);
    let (_, r) = repair(&dir);
    assert_eq!(r["old_manifest"], "missing");
    assert_eq!(ts_of(&dir), ts_range(0..250));
    let m = Manifest::load(&dir).unwrap();
    assert_eq!(m.events, 250);
    assert_eq!(m.segments.len(), 3);
    assert!(!m.complete, "nothing says the capture finished");
    validate_ok(&dir);
}

#[test]
fn a_truncated_manifest_is_set_aside_and_a_mistyped_one_salvaged() {
    let (tmp, dir) = scratch_trace(150);
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, &text[..text.len() / 2]).unwrap();
    let (_, r) = repair(&dir);
    assert!(r["old_manifest"]
        .as_str()
        .unwrap()
        .starts_with("unreadable"));
    assert_eq!(
        std::fs::read_to_string(dir.join("manifest.json.corrupt")).unwrap(),
        &text[..text.len() / 2],
        "the broken manifest is kept for inspection"
    );
    assert_eq!(ts_of(&dir), ts_range(0..150));

    // Keys of the wrong type: the manifest is salvaged, what parses is kept.
    let dir2 = tmp.path().join("t2");
    finished_trace(&dir2, 150);
    edit_manifest(&dir2, |v| {
        v["events"] = serde_json::json!("many");
        v["segments"] = serde_json::json!(["../../etc/passwd.parquet", "seg-000000.parquet"]);
    });
    validate_fails_pointing_to_repair(&dir2);
    let (_, r) = repair(&dir2);
    assert!(r["old_manifest"].as_str().unwrap().starts_with("salvaged"));
    assert_eq!(r["adopted"], serde_json::json!(["seg-000001.parquet"]));
    let m = Manifest::load(&dir2).unwrap();
    assert_eq!(m.events, 150);
    assert_eq!(m.dropped_events, 5);
    assert_eq!(m.source, Source::Ebpf);
    assert!(
        m.complete,
        "the old manifest said complete and nothing was lost"
    );
    assert_eq!(ts_of(&dir2), ts_range(0..150));
}

#[test]
fn a_partial_segment_with_its_footer_is_adopted() {
    // A writer killed after the footer was written but before the rename.
    let (_tmp, dir) = scratch_trace(200);
    std::fs::rename(
        dir.join("seg-000001.parquet"),
        dir.join("seg-000001.parquet.partial"),
    )
    .unwrap();
    let mut m = Manifest::load(&dir).unwrap();
    m.segments.pop();
    m.events = 100;
    m.complete = false;
    m.store(&dir).unwrap();
    let out = validate_ok(&dir);
    assert!(out.contains("seg-000001.parquet.partial"), "{out}");
    let (_, r) = repair(&dir);
    assert_eq!(r["adopted"], serde_json::json!(["seg-000001.parquet"]));
    assert_eq!(r["set_aside"], serde_json::json!([]));
    assert_eq!(ts_of(&dir), ts_range(0..200));
}

/// Every file's bytes and modification time.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let meta = std::fs::metadata(&p).unwrap();
            (
                p.clone(),
                (std::fs::read(&p).unwrap(), meta.modified().unwrap()),
            )
        })
        .collect()
}

#[test]
fn repair_of_a_healthy_trace_changes_nothing() {
    let (_tmp, dir) = scratch_trace(250);
    let before = snapshot(&dir);
    let out = run_repair(&dir, true);
    assert!(out.status.success());
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["changed"], false);
    assert_eq!(r["complete"], true);
    assert_eq!(snapshot(&dir), before);
    let out = run_repair(&dir, false);
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to repair"));
    assert_eq!(snapshot(&dir), before);
}

#[test]
fn repair_refuses_what_it_cannot_handle() {
    let tmp = tempfile::tempdir().unwrap();
    // A single Parquet file is not a directory to repair.
    let dir = tmp.path().join("t");
    finished_trace(&dir, 10);
    let seg = dir.join("seg-000000.parquet");
    let out = trace_cmd(&["validate", "--repair", seg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("trace directory"));
    // A manifest of a newer format is not rewritten by an older iorepro.
    edit_manifest(&dir, |v| v["schema_version"] = serde_json::json!(99));
    let before = snapshot(&dir);
    let out = run_repair(&dir, false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("upgrade iorepro"), "{err}");
    assert_eq!(snapshot(&dir), before);
}
