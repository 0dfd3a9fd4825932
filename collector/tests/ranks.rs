//! Every row carries the rank its process was launched with, even the rows
//! of a child that forked, did its I/O and exited before the collector read
//! of its fork (whose environment is gone by then), on a busy machine.

mod common;

use std::process::{Child, Command, Stdio};

use common::*;

#[test]
fn rows_of_short_lived_children_carry_their_rank_on_a_busy_machine() {
    if !can_trace() {
        return;
    }
    let dir = scratch();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    // Many short children (each forks, writes 8 KiB and exits within a
    // millisecond) beside a noisy sibling whose records keep the collector
    // reading the I/O ring long after it last read the process ring.
    let job = format!(
        "d={0}; ( for j in $(seq 200); do dd if=/dev/zero of=$d/noise bs=4k count=64 status=none; \
         cat $d/noise > /dev/null; done ) & \
         for i in $(seq 300); do dd if=/dev/zero of=$d/f$i bs=4k count=2 status=none; done; wait",
        data.display()
    );
    // Two cores' worth of other work, so the collector is often off its core.
    let _busy = Busy::start(3);
    let trace = dir.path().join("trace");
    let out = collector()
        .arg("--out")
        .arg(&trace)
        .arg("--path-prefix")
        .arg(&data)
        .args(["--", "bash", "-c", &job])
        .env("RANK", "5")
        .output()
        .unwrap();
    drop(_busy);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (manifest, rows) = read_rows(&trace);
    assert_eq!(manifest.dropped_events, 0);
    let children: Vec<_> = rows
        .iter()
        .filter(|r| r.path.as_deref().is_some_and(|p| !p.ends_with("/noise")))
        .collect();
    let written: u64 = children
        .iter()
        .filter(|r| r.op == iorepro_format::Op::Write)
        .map(|r| r.moved())
        .sum();
    assert_eq!(written, 300 * 8192, "every child's writes");
    let unranked: Vec<_> = rows.iter().filter(|r| r.rank != Some(5)).collect();
    assert!(
        unranked.is_empty(),
        "{} of {} rows without the job's rank, first: {:?}",
        unranked.len(),
        rows.len(),
        unranked.first()
    );
}

/// Busy loops, stopped when dropped (a failed assertion included), and
/// within a minute whatever happens to the test.
struct Busy(Vec<Child>);

impl Busy {
    fn start(n: usize) -> Busy {
        Busy(
            (0..n)
                .map(|_| {
                    Command::new("timeout")
                        .args(["60", "sh", "-c", "while :; do :; done"])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for b in &mut self.0 {
            // SIGTERM, which `timeout` passes on to its loop (a SIGKILL
            // would stop `timeout` alone and leave the loop running).
            // SAFETY: kill(2) on a child's pid.
            unsafe { libc::kill(b.id() as i32, libc::SIGTERM) };
            let _ = b.wait();
        }
    }
}
