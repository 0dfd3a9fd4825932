//! A Python job whose workers are forked and spawned (multiprocessing), run
//! under RANK=3: every read of the data files is captured, made by the
//! workers, and carries rank 3.

mod common;

use std::collections::HashSet;

use common::*;
use iorepro_format::Op;

const WORKER_SCRIPT: &str = r#"
import multiprocessing as mp, sys

def work(path):
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(65536)
            if not b:
                return n
            n += len(b)

if __name__ == "__main__":
    files = sys.argv[1:]
    procs = [mp.get_context("fork").Process(target=work, args=(files[0],)),
             mp.get_context("spawn").Process(target=work, args=(files[1],))]
    for p in procs: p.start()
    for p in procs: p.join()
    with mp.get_context("spawn").Pool(2) as pool:
        assert pool.map(work, files[2:]) == [300000 + i for i in range(len(files) - 2)]
"#;

#[test]
fn forked_and_spawned_workers_are_traced_with_the_inherited_rank() {
    if !can_trace() || !have("python3") {
        return;
    }
    let dir = scratch();
    let script = dir.path().join("job.py");
    std::fs::write(&script, WORKER_SCRIPT).unwrap();
    let mut files = Vec::new();
    for i in 0..4usize {
        let f = dir.path().join(format!("shard{i}.bin"));
        write_file(&f, 300000 + i.saturating_sub(2));
        files.push(f);
    }
    let out = dir.path().join("trace");
    let mut c = collector();
    c.env("RANK", "3")
        .arg("--out")
        .arg(&out)
        .args([
            "--path-prefix",
            dir.path().to_str().unwrap(),
            "--",
            "python3",
        ])
        .arg(&script)
        .args(&files);
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let (manifest, rows) = read_rows(&out);
    assert_eq!(manifest.dropped_events, 0);
    let main_pid = rows_for(&rows, &script)
        .iter()
        .find(|r| r.op == Op::Open)
        .expect("the main process opens its script")
        .pid;
    let mut readers = HashSet::new();
    for f in &files {
        let size = std::fs::metadata(f).unwrap().len() as i64;
        let reads: Vec<_> = rows_for(&rows, f)
            .into_iter()
            .filter(|r| r.op == Op::Read)
            .collect();
        let bytes: i64 = reads.iter().map(|r| r.ret).sum();
        assert_eq!(bytes, size, "{}: every byte read is captured", f.display());
        let mut expect_off = 0;
        for r in &reads {
            assert_eq!(r.offset, Some(expect_off), "{r:?}");
            expect_off += r.ret;
            assert_eq!(r.rank, Some(3), "rank is inherited: {r:?}");
            assert_ne!(r.pid, main_pid, "the workers read, not the main process");
            readers.insert(r.pid);
        }
        assert_eq!(reads.last().unwrap().ret, 0, "the EOF read is captured too");
    }
    assert!(
        readers.len() >= 3,
        "fork, spawn and pool workers: {readers:?}"
    );
}
