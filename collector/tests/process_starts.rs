//! The manifest's `process_starts`: each traced process that made a row,
//! with its parent and the time it was forked, checked against the job's own
//! clock around each `fork()`; a process that made no row is not listed.

mod common;

use common::*;

const FORKING_JOB: &str = r#"
import json, os, sys, time
data, quiet = sys.argv[1], sys.argv[2]
seen = []
for i in range(4):
    before = time.time_ns()
    pid = os.fork()
    if pid == 0:
        # A worker starting: 60 ms before its first file call.
        time.sleep(0.06)
        path = quiet if i == 3 else os.path.join(data, f"w{i}")
        with open(path, "wb") as f:
            f.write(b"x" * 4096)
        os._exit(0)
    after = time.time_ns()
    os.waitpid(pid, 0)
    seen.append({"pid": pid, "before": before, "after": after, "rows": i != 3})
print(json.dumps({"parent": os.getpid(), "children": seen}))
"#;

#[test]
fn a_forked_process_that_made_rows_is_recorded_with_its_parent_and_fork_time() {
    if !can_trace() || !have("python3") {
        return;
    }
    let dir = scratch();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let script = dir.path().join("job.py");
    std::fs::write(&script, FORKING_JOB).unwrap();
    let trace = dir.path().join("trace");
    let quiet = dir.path().join("elsewhere");
    let out = collect(
        &trace,
        &["--path-prefix", data.to_str().unwrap()],
        &[
            "python3",
            script.to_str().unwrap(),
            data.to_str().unwrap(),
            quiet.to_str().unwrap(),
        ],
    );
    assert!(out.status.success());
    let said: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let parent = said["parent"].as_i64().unwrap() as i32;
    let (manifest, rows) = read_rows(&trace);
    for child in said["children"].as_array().unwrap() {
        let pid = child["pid"].as_i64().unwrap() as i32;
        let starts: Vec<_> = manifest
            .process_starts
            .iter()
            .filter(|s| s.pid == pid)
            .collect();
        if !child["rows"].as_bool().unwrap() {
            assert!(starts.is_empty(), "a process with no row: {starts:?}");
            continue;
        }
        assert_eq!(starts.len(), 1, "{:?}", manifest.process_starts);
        let s = starts[0];
        assert_eq!(s.parent, parent);
        assert_eq!(s.host, None, "one node's capture names its host once");
        // The collector's wall clock is the kernel's monotonic one plus an
        // offset taken at its start: a millisecond of slack covers them.
        let (before, after) = (
            child["before"].as_i64().unwrap(),
            child["after"].as_i64().unwrap(),
        );
        assert!(
            s.forked_unix_ns >= before - 1_000_000 && s.forked_unix_ns <= after + 1_000_000,
            "fork at {} outside the job's {before}..{after}",
            s.forked_unix_ns
        );
        let first_row = rows
            .iter()
            .filter(|r| r.pid == pid)
            .map(|r| r.ts_ns)
            .min()
            .unwrap();
        assert!(
            first_row - s.forked_unix_ns >= 50_000_000,
            "the worker's 60 ms start: fork {} first row {first_row}",
            s.forked_unix_ns
        );
    }
}
