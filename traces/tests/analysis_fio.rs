//! fio as ground truth for the iolog converters: fio replays an exported
//! trace and moves exactly the trace's bytes; a log fio itself wrote, imported,
//! has exactly the bytes fio reported.

mod analysis_util;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use analysis_util::*;
use iorepro_tests::skip::cannot_run;

fn have_fio() -> bool {
    Command::new("fio")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// fio's JSON report: (read bytes, write bytes) over all jobs.
fn fio_bytes(report: &Path) -> (u64, u64) {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
    v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .fold((0, 0), |(r, w), j| {
            (
                r + j["read"]["io_bytes"].as_u64().unwrap(),
                w + j["write"]["io_bytes"].as_u64().unwrap(),
            )
        })
}

#[test]
fn fio_replays_the_export_moving_the_same_bytes() {
    if !have_fio() {
        return cannot_run("fio is not installed: cannot check the export against it");
    }
    let tmp = tempfile::tempdir().unwrap();
    let toml = workload(2, 1, 6, "random")
        .replace("96MiB", "8MiB")
        .replace("\"32MiB\"", "\"4MiB\"")
        .replace("\"64MiB\"", "\"6MiB\"")
        .replace("compute_time = \"30ms\"", "compute_time = \"1ms\"");
    let trace = synth(tmp.path(), "t", &toml);
    let summary = json(&["summary", trace.to_str().unwrap(), "--json"]);
    let logs = tmp.path().join("iologs");
    let target = tmp.path().join("target");
    let report = json(&[
        "export",
        trace.to_str().unwrap(),
        "--fio-iolog",
        logs.to_str().unwrap(),
        "--target",
        target.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(report["logs"].as_array().unwrap().len(), 2, "{report}");
    assert_eq!(report["read_bytes"], summary["read_bytes"]);
    assert_eq!(report["write_bytes"], summary["write_bytes"]);

    // Files that are read must exist at their size before fio reads them.
    let mut extents: HashMap<String, u64> = HashMap::new();
    for log in report["logs"].as_array().unwrap() {
        let text = std::fs::read_to_string(logs.join(log.as_str().unwrap())).unwrap();
        assert_eq!(text.lines().next(), Some("fio version 3 iolog"));
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            assert!(
                f[0].parse::<u64>().is_ok(),
                "v3 lines start with a timestamp: {line}"
            );
            assert!(
                f[1].starts_with(target.to_str().unwrap()),
                "paths are under --target: {line}"
            );
            if f[2] == "read" {
                let end = f[3].parse::<u64>().unwrap() + f[4].parse::<u64>().unwrap();
                let e = extents.entry(f[1].to_string()).or_default();
                *e = (*e).max(end);
            }
        }
    }
    for (path, size) in &extents {
        std::fs::create_dir_all(Path::new(path).parent().unwrap()).unwrap();
        std::fs::write(path, vec![7u8; *size as usize]).unwrap();
    }
    // Writes go to per-step checkpoint directories fio does not create.
    for log in report["logs"].as_array().unwrap() {
        let text = std::fs::read_to_string(logs.join(log.as_str().unwrap())).unwrap();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            std::fs::create_dir_all(Path::new(f[1]).parent().unwrap()).unwrap();
        }
    }
    let out_json = tmp.path().join("fio.json");
    let st = Command::new("fio")
        .current_dir(&logs)
        .args(["job.fio", "--output-format=json", "--replay_no_stall=1"])
        .arg(format!("--output={}", out_json.display()))
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "fio failed: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let (r, w) = fio_bytes(&out_json);
    assert_eq!(r, summary["read_bytes"].as_u64().unwrap(), "bytes fio read");
    assert_eq!(
        w,
        summary["write_bytes"].as_u64().unwrap(),
        "bytes fio wrote"
    );
    assert!(r > 0 && w > 0);
}

#[test]
fn import_of_fio_own_iolog_has_fio_bytes() {
    if !have_fio() {
        return cannot_run("fio is not installed: cannot produce an iolog");
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let log = tmp.path().join("rank-3.iolog");
    let out_json = tmp.path().join("fio.json");
    let st = Command::new("fio")
        .args([
            "--name=mix",
            "--size=4M",
            "--rw=randrw",
            "--bs=16k",
            "--ioengine=psync",
            "--output-format=json",
        ])
        .arg(format!("--filename={}", data.display()))
        .arg(format!("--write_iolog={}", log.display()))
        .arg(format!("--output={}", out_json.display()))
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let (r, w) = fio_bytes(&out_json);
    let trace = tmp.path().join("imported");
    let out = trace_cmd()
        .args([
            "import",
            "--fio-iolog",
            log.to_str().unwrap(),
            "-o",
            trace.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = json(&["summary", trace.to_str().unwrap(), "--json"]);
    assert_eq!(s["read_bytes"].as_u64().unwrap(), r);
    assert_eq!(s["write_bytes"].as_u64().unwrap(), w);
    assert_eq!(
        s["ranks"],
        serde_json::json!([3]),
        "rank from the log's name"
    );
    assert_eq!(s["ops"]["read"]["count"].as_u64().unwrap(), r / 16384);
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(trace.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["source"], "import");
}
