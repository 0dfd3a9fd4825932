//! Under Open MPI's mpirun each process is one rank: 4 processes replaying a
//! 2-rank trace move exactly twice its bytes, and rank 0 alone prints the
//! report gathered through the rendezvous directory.

mod common;

use std::process::Command;

use common::*;

#[test]
fn mpirun_four_processes_gather_one_report() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), TWO_RANKS);
    let reader = iorepro_traces::TraceReader::open(&trace).unwrap();
    let (mut read, mut write) = (0u64, 0u64);
    for ev in reader.events().unwrap() {
        let ev = ev.unwrap();
        for (i, op) in ev.ops().iter().enumerate() {
            let n = ev.ret().value(i).max(0) as u64;
            if op.is_read_data() {
                read += n;
            } else if op.is_write_data() {
                write += n;
            }
        }
    }
    let target = tmp.path().join("target");
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "4"])
        .arg(replay_bin())
        .arg(&trace)
        .arg("--target")
        .arg(&target)
        .args(["--json", "--timeout", "60s"])
        .output()
        .unwrap();
    let r = json_ok(&out); // fails unless stdout is exactly one JSON document
    assert_eq!(r["ranks"], 4);
    assert_eq!(r["per_rank"].as_array().unwrap().len(), 4);
    assert_eq!(r["read_bytes"].as_u64().unwrap(), 2 * read);
    assert_eq!(r["write_bytes"].as_u64().unwrap(), 2 * write);
    assert_eq!(r["nodes"], 1);
    let files = listing(&target);
    assert!(
        files.contains(&"data/rep-0001/data/train/shard-00000.bin".to_string()),
        "{files:?}"
    );
    assert!(
        !files.iter().any(|f| f.starts_with(".iorepro-rendezvous/")),
        "rendezvous cleaned up: {files:?}"
    );
}
