//! `export --perfetto`: trace-event JSON that ui.perfetto.dev opens. It
//! parses, holds one complete event per row with the row's timing and file
//! details, and one process track per rank with its threads under it.

mod analysis_util;

use analysis_util::*;

#[test]
fn perfetto_json_has_one_complete_event_per_row_and_a_track_per_rank() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), "t", &workload(3, 1, 6, "sequential"));
    let out = tmp.path().join("t.json");
    let report = json(&[
        "export",
        trace.to_str().unwrap(),
        "--perfetto",
        out.to_str().unwrap(),
        "--json",
    ]);
    let summary = json(&["summary", trace.to_str().unwrap(), "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let complete: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(complete.len() as u64, summary["events"].as_u64().unwrap());
    assert_eq!(report["events"], summary["events"]);
    // Calls in time order from 0, in microseconds; data calls carry their file and size.
    assert_eq!(complete[0]["ts"].as_f64(), Some(0.0));
    let mut last = 0.0;
    let mut read_bytes = 0;
    for e in &complete {
        let ts = e["ts"].as_f64().unwrap();
        assert!(ts >= last, "{e}");
        last = ts;
        assert!(e["dur"].as_f64().unwrap() >= 0.0, "{e}");
        if e["name"] == "read" {
            assert!(e["args"]["path"].as_str().unwrap().starts_with('/'), "{e}");
            assert!(
                e["args"]["offset"].is_i64() && e["args"]["size"].is_i64(),
                "{e}"
            );
            read_bytes += e["args"]["ret"].as_i64().unwrap().max(0);
        }
    }
    assert_eq!(read_bytes as u64, summary["read_bytes"].as_u64().unwrap());
    // The last call ends where the trace does.
    let end = complete
        .iter()
        .map(|e| e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!((end / 1e6 - summary["duration_s"].as_f64().unwrap()).abs() < 1e-6);
    // One process track per rank, named; thread tracks under them.
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["rank 0 @ node0", "rank 1 @ node0", "rank 2 @ node0"]
    );
    let pids: std::collections::BTreeSet<i64> = complete
        .iter()
        .map(|e| e["pid"].as_i64().unwrap())
        .collect();
    assert_eq!(pids.into_iter().collect::<Vec<_>>(), [0, 1, 2]);
    let threads = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .count();
    assert_eq!(threads as u64, report["threads"].as_u64().unwrap());
    assert!(
        threads >= 3,
        "a rank's loader workers are threads of its track"
    );
}
