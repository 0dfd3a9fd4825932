//! Prepare creates what the replay reads: a file the trace reads and writes
//! (state read back, a checkpoint resumed in place) becomes each rank's own
//! copy at the size the reads need.

mod common;

use common::*;
use iorepro_format::Op;

#[test]
fn files_read_and_written_are_prepared_per_rank() {
    let tmp = tempfile::tempdir().unwrap();
    let rw = libc::O_RDWR | libc::O_CREAT;
    let trace = write_rows(
        tmp.path(),
        &[
            (0, Op::Open, "/run/state.bin", 5, None, 0, Some(rw)),
            (0, Op::Read, "/run/state.bin", 5, Some(0), 8192, None),
            (0, Op::Write, "/run/state.bin", 5, Some(0), 4096, None),
            (0, Op::Close, "/run/state.bin", 5, None, 0, None),
        ],
    );
    let target = tmp.path().join("target");
    // A one-rank trace cannot show whether every rank keeps such a file:
    // here each does (by name it would be one writer's).
    let r = replay_ok(
        &trace,
        &target,
        &["--ranks", "2", "--json", "--checkpoint", "replicate"],
    );
    assert_eq!(r["read_bytes"], 2 * 8192);
    for t in 0..2 {
        let f = target.join(format!("ranks/rank-{t:05}/run/state.bin"));
        assert_eq!(
            std::fs::metadata(&f).unwrap().len(),
            8192,
            "{}",
            f.display()
        );
    }
}
