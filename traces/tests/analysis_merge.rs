//! `merge` joins per-node captures: every row kept, rows in `ts` order, both
//! hosts present, dropped events summed.

mod analysis_util;

use analysis_util::*;
use iorepro_format::{Source, TraceReader, TraceWriter, WriterOptions};

/// A copy of `src` that claims `dropped` events were lost at capture.
fn with_drops(src: &std::path::Path, dst: &std::path::Path, dropped: u64) {
    let reader = TraceReader::open(src).unwrap();
    let mut w = TraceWriter::create(dst, WriterOptions::new(Source::Ebpf)).unwrap();
    for b in reader.batches().unwrap() {
        w.write_batch(&b.unwrap()).unwrap();
    }
    w.set_dropped_events(dropped);
    w.finish().unwrap();
}

#[test]
fn merges_nodes_in_time_order() {
    let tmp = tempfile::tempdir().unwrap();
    let a = synth(tmp.path(), "a", &workload(2, 1, 8, "sequential"));
    let b_src = synth(
        tmp.path(),
        "b",
        &workload(2, 1, 8, "random")
            .replace("host = \"node0\"", "host = \"node1\"")
            .replace("seed = 7", "seed = 9"),
    );
    let (a2, b2) = (tmp.path().join("a2"), tmp.path().join("b2"));
    with_drops(&a, &a2, 5);
    with_drops(&b_src, &b2, 7);
    let out = tmp.path().join("merged");
    let st = trace_cmd()
        .args([
            "merge",
            a2.to_str().unwrap(),
            b2.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--segment-events",
            "3000",
        ])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );

    let sa = json(&["summary", a2.to_str().unwrap(), "--json"]);
    let sb = json(&["summary", b2.to_str().unwrap(), "--json"]);
    let sm = json(&["summary", out.to_str().unwrap(), "--json"]);
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap();
    assert_eq!(n(&sm, "events"), n(&sa, "events") + n(&sb, "events"));
    assert_eq!(
        n(&sm, "read_bytes"),
        n(&sa, "read_bytes") + n(&sb, "read_bytes")
    );
    assert_eq!(n(&sm, "dropped_events"), 12);
    assert_eq!(sm["hosts"], serde_json::json!(["node0", "node1"]));

    let v = json(&["validate", out.to_str().unwrap(), "--json"]);
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| !w.as_str().unwrap().contains("out of ts order")),
        "{v}"
    );
    let reader = TraceReader::open(&out).unwrap();
    let mut prev = i64::MIN;
    for ev in reader.events().unwrap() {
        for &t in ev.unwrap().ts().values().iter() {
            assert!(t >= prev, "rows out of order");
            prev = t;
        }
    }
}
