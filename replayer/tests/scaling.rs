//! Scaling a trace. By default N ranks do what N ranks of the job would:
//! the traced reads shared out over them (the data bytes stay the trace's)
//! and each checkpoint written once, split over all N. As clones
//! (`--data replicate --checkpoint replicate`), target rank t replays source
//! rank t mod R, so N ranks move exactly N/R times the trace's bytes, data
//! replicas stay distinct and written files stay each rank's own.

mod common;

use common::*;

fn trace_bytes(trace: &std::path::Path) -> (u64, u64) {
    let r = iorepro_format::TraceReader::open(trace).unwrap();
    let mut read = 0;
    let mut write = 0;
    for ev in r.events().unwrap() {
        let ev = ev.unwrap();
        for (i, op) in ev.ops().iter().enumerate() {
            let ret = ev.ret().value(i);
            if ret > 0 && op.is_read_data() {
                read += ret as u64;
            }
            if ret > 0 && op.is_write_data() {
                write += ret as u64;
            }
        }
    }
    (read, write)
}

#[test]
fn by_default_n_ranks_share_the_reads_and_write_each_checkpoint_once() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), TWO_RANKS);
    let (read, write) = trace_bytes(&trace);
    // 8, a multiple of the trace's 2 ranks; 3, not one; 1, fewer. The trace
    // saves every 4 of its 8 steps per rank. By default the job holds its
    // global batch and makes both saves at any N; holding each rank's
    // batch, at N each rank makes 2/N of those steps, so the job at 8
    // saves never, at 3 once, at 1 twice.
    let cases = [
        (None, 8u64, 2u64),
        (None, 3, 2),
        (Some("per-rank"), 8, 0),
        (Some("per-rank"), 3, 1),
        (Some("per-rank"), 1, 2),
    ];
    for (batch, n, saves) in cases {
        let target = tmp
            .path()
            .join(format!("target-{n}-{}", batch.unwrap_or("default")));
        let mut args = vec!["--ranks".to_string(), n.to_string(), "--json".into()];
        if let Some(b) = batch {
            args.extend(["--batch".into(), b.into()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = replay_ok(&trace, &target, &args);
        let verdict = &r["verdict"];
        assert_eq!(verdict["saves_traced"], 2, "{verdict}");
        assert_eq!(verdict["saves_made"], saves, "{verdict}");
        assert_eq!(r["ranks"], n);
        assert_eq!(r["read_bytes"].as_u64().unwrap(), read, "at {n}");
        assert_eq!(
            r["write_bytes"].as_u64().unwrap(),
            write / 2 * saves,
            "at {n}, --batch {batch:?}"
        );
        assert_eq!(r["errors"].as_array().unwrap().len(), 0);
        let files = listing(&target);
        assert!(
            !files.iter().any(|f| f.starts_with("data/rep-0001")),
            "one copy of the data: {files:?}"
        );
        // Each save made is 2 x 2 MiB: every rank writes a share of it.
        let steps: &[u32] = match saves {
            0 => &[],
            1 => &[8],
            _ => &[4, 8],
        };
        for step in steps {
            for t in 0..n {
                let src = t % 2;
                let ck = target.join(format!(
                    "ranks/rank-{t:05}/checkpoints/step-{step:06}/rank-{src:05}.pt"
                ));
                // Shares differ by a byte at most where N does not divide the state.
                let len = std::fs::metadata(&ck).unwrap().len();
                assert!(len.abs_diff(write / 2 / n) <= 1, "{}: {len}", ck.display());
            }
        }
        let per_rank: Vec<u64> = r["per_rank"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["read_bytes"].as_u64().unwrap())
            .collect();
        assert!(
            per_rank.iter().all(|b| *b > 0),
            "every rank reads a share: {per_rank:?}"
        );
    }
}

#[test]
fn the_plan_alone_says_what_n_ranks_will_do() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), TWO_RANKS);
    let (read, write) = trace_bytes(&trace);
    let out = assert_cmd::Command::new(replay_bin())
        .arg(&trace)
        .args([
            "--ranks",
            "4",
            "--batch",
            "per-rank",
            "--plan-only",
            "--json",
            "--bandwidth",
            "1GiB/s",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["ranks"], 4);
    assert_eq!(plan["trace_ranks"], 2);
    assert_eq!(plan["read_bytes"].as_u64().unwrap(), read);
    assert_eq!(plan["dataset"]["copies"], 1);
    // Step-bound: at 4 ranks each makes half the steps, so one of the two
    // saves is made, by all 4 ranks.
    assert_eq!(plan["saves"]["bound"], "steps");
    assert_eq!(plan["write_bytes"].as_u64().unwrap(), write / 2);
    let ckpts = plan["checkpoints"].as_array().unwrap();
    assert_eq!(ckpts.len(), 2, "{ckpts:?}");
    let made: Vec<&serde_json::Value> = ckpts.iter().filter(|c| c["bytes"] != 0).collect();
    assert_eq!(made.len(), 1, "{ckpts:?}");
    for c in made {
        assert_eq!(c["writers"], 4, "{c}");
        assert_eq!(c["traced_writers"], 2, "{c}");
        assert_eq!(c["bytes"].as_u64().unwrap(), write / 2);
        // Its bytes at the bandwidth, after what the traced save did before
        // its first write and between its writes.
        let secs = c["seconds_at_bandwidth"].as_f64().unwrap();
        let lead = c["before_first_write_s"].as_f64().unwrap();
        let work = c["between_writes_s"].as_f64().unwrap();
        assert!(lead >= 0.0 && work >= 0.0, "{c}");
        let at_rate = (write / 2) as f64 / (1u64 << 30) as f64;
        assert!((secs - lead - work - at_rate).abs() < 1e-9, "{c}");
    }
    let clones = assert_cmd::Command::new(replay_bin())
        .arg(&trace)
        .args(["--ranks", "8", "--plan-only", "--json"])
        .args(["--data", "replicate", "--checkpoint", "replicate"])
        .output()
        .unwrap();
    let plan: serde_json::Value = serde_json::from_slice(&clones.stdout).unwrap();
    assert_eq!(plan["read_bytes"].as_u64().unwrap(), 4 * read);
    assert_eq!(plan["write_bytes"].as_u64().unwrap(), 4 * write);
    assert_eq!(plan["dataset"]["copies"], 4);
    // Nothing is created without a target.
    assert!(!tmp.path().join("target").exists());
}

#[test]
fn eight_ranks_from_two_move_four_times_the_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), TWO_RANKS);
    let (read, write) = trace_bytes(&trace);
    assert!(read > 0 && write > 0);
    let target = tmp.path().join("target");
    let clones = ["--data", "replicate", "--checkpoint", "replicate"];
    let r = replay_ok(
        &trace,
        &target,
        &[&["--ranks", "8", "--json"][..], &clones].concat(),
    );
    assert_eq!(r["ranks"], 8);
    assert_eq!(r["read_bytes"].as_u64().unwrap(), 4 * read);
    assert_eq!(r["write_bytes"].as_u64().unwrap(), 4 * write);
    assert_eq!(r["ops"]["read"]["bytes"].as_u64().unwrap(), 4 * read);
    assert_eq!(r["errors"].as_array().unwrap().len(), 0);
    for k in [
        "duration_s",
        "read_gib_s",
        "write_gib_s",
        "stall_s",
        "nodes",
    ] {
        assert!(r[k].is_number(), "missing {k}");
    }
    for k in ["p50", "p90", "p99", "p999", "max"] {
        assert!(r["ops"]["read"]["lat_us"][k].as_f64().unwrap() > 0.0);
    }
    let kinds: Vec<&str> = r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "checkpoint").count(),
        2,
        "{kinds:?}"
    );
    assert_eq!(kinds[0], "load", "{kinds:?}");
    let ckpt_bytes: u64 = r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "checkpoint")
        .map(|p| p["write_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(
        ckpt_bytes,
        4 * write,
        "all writes fall in checkpoint phases"
    );

    // Four replicas of the data, each a distinct copy; each rank writes its own checkpoints.
    let files = listing(&target);
    for rep in 0..4 {
        assert!(
            files.contains(&format!("data/rep-{rep:04}/data/train/shard-00000.bin")),
            "{files:?}"
        );
    }
    let a = std::fs::read(target.join("data/rep-0000/data/train/shard-00000.bin")).unwrap();
    let b = std::fs::read(target.join("data/rep-0001/data/train/shard-00000.bin")).unwrap();
    assert_eq!(a.len(), b.len());
    assert_ne!(a, b, "replicas hold different bytes");
    for t in 0..8 {
        let src = t % 2;
        let ck = target.join(format!(
            "ranks/rank-{t:05}/checkpoints/step-000004/rank-{src:05}.pt"
        ));
        assert_eq!(
            std::fs::metadata(&ck).unwrap().len(),
            write / 4,
            "{}",
            ck.display()
        );
    }
    assert!(
        !files.iter().any(|f| f.starts_with(".iorepro-rendezvous/")),
        "threads leave no rendezvous files"
    );

    // A second run finds the data prepared and reuses it.
    let again = replay_into(
        &trace,
        &target,
        &[&["--ranks", "8", "--json"][..], &clones].concat(),
    );
    let r2 = json(&again);
    assert_eq!(r2["prepare"]["files_created"], 0);
    assert!(r2["prepare"]["files_present"].as_u64().unwrap() > 0);
}

#[test]
fn shared_data_reads_one_copy_and_phase_filter_replays_checkpoints_only() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), TWO_RANKS);
    let (_, write) = trace_bytes(&trace);
    let target = tmp.path().join("target");
    let r = replay_ok(
        &trace,
        &target,
        &[
            "--ranks",
            "4",
            "--data",
            "replicate",
            "--checkpoint",
            "replicate",
            "--shared-data",
            "--phases",
            "checkpoint",
            "--json",
            "--engine",
            "io_uring",
        ],
    );
    assert_eq!(r["read_bytes"], 0);
    assert_eq!(r["write_bytes"].as_u64().unwrap(), 2 * write);
    let files = listing(&target);
    assert!(
        !files.iter().any(|f| f.starts_with("data/rep-0001")),
        "{files:?}"
    );
    assert!(r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["replayed"] == false));
}

#[test]
fn original_timing_keeps_compute_gaps_and_reports_stall() {
    let tmp = tempfile::tempdir().unwrap();
    // Compute gaps long enough that no busy machine makes the I/O alone
    // (afap) take as long as I/O plus compute.
    let workload = TWO_RANKS.replace("compute_time = \"20ms\"", "compute_time = \"150ms\"");
    assert_ne!(workload, TWO_RANKS);
    let trace = synth(tmp.path(), &workload);
    let target = tmp.path().join("target");
    let r = replay_ok(&trace, &target, &["--timing", "original", "--json"]);
    // 8 steps of 150 ms compute per rank are kept.
    assert!(
        r["duration_s"].as_f64().unwrap() >= 1.2,
        "{}",
        r["duration_s"]
    );
    let busy = r["gpu_busy"].as_f64().unwrap();
    assert!(busy > 0.3 && busy <= 1.0, "gpu_busy {busy}");
    assert!(r["stall_s"].as_f64().unwrap() >= 0.0);
    let afap = replay_into(&trace, &target, &["--json"]);
    let a = json(&afap);
    assert!(a["gpu_busy"].is_null());
    assert!(a["duration_s"].as_f64().unwrap() < r["duration_s"].as_f64().unwrap());
}

#[test]
fn record_ops_writes_a_replay_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), TWO_RANKS);
    let target = tmp.path().join("target");
    let rec = tmp.path().join("rec");
    let recording = ["--record-ops", rec.to_str().unwrap()];
    let r = replay_ok(
        &trace,
        &target,
        &[&recording[..], &["--ranks", "4", "--json"]].concat(),
    );
    let reader = iorepro_format::TraceReader::open(&rec).unwrap();
    assert_eq!(reader.manifest().source, iorepro_format::Source::Replay);
    let replayed: u64 = r["ops"]
        .as_object()
        .unwrap()
        .values()
        .map(|o| o["count"].as_u64().unwrap())
        .sum();
    assert_eq!(reader.rows(), replayed);
    let (read, write) = trace_bytes(&rec);
    assert_eq!(read, r["read_bytes"].as_u64().unwrap());
    assert_eq!(write, r["write_bytes"].as_u64().unwrap());
    let mut ranks = std::collections::BTreeSet::new();
    for ev in reader.events().unwrap() {
        let ev = ev.unwrap();
        for i in 0..ev.len() {
            ranks.insert(ev.rank().value(i));
            assert!(ev.path_at(i).unwrap().starts_with(target.to_str().unwrap()));
        }
    }
    assert_eq!(ranks.into_iter().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    // The four ranks' rows overlap in time; the record still holds them in
    // one time order (no segment begun for a late batch).
    assert_eq!(reader.segments().len(), 1, "{:?}", reader.manifest());
    assert!(
        !reader.manifest().extra.contains_key("late_batch_segments"),
        "{:?}",
        reader.manifest().extra
    );
    let v = iorepro_format::validate::validate(&rec).unwrap();
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
}

#[test]
fn table_report_and_bad_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), TWO_RANKS);
    let out = replay_into(&trace, &tmp.path().join("t"), &[]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in ["checkpoint", "p99 us", "GiB/s", "rank"] {
        assert!(text.contains(needle), "{needle} missing in\n{text}");
    }
    let bad = replay_into(&tmp.path().join("nope"), &tmp.path().join("t"), &[]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).starts_with("Error: "));
}

/// A one-rank trace whose checkpoint is one file of many small writes, with
/// many reads after it, replayed as threads at 2 ranks: rank 0 alone writes
/// the checkpoint while rank 1 has only the reads after it. Ranks meet at
/// the checkpoint's barriers, so the reader must hand rank 0 all of its
/// checkpoint before rank 1's channel fills with what follows (it once
/// waited forever here).
#[test]
fn ranks_with_different_streams_meet_at_every_barrier() {
    const ONE_WRITER: &str = r#"
name = "one-writer"
ranks = 1
seed = 3
[dataset]
dir = "/data/train"
files = 4
file_size = "16MiB"
read_size = "4KiB"
[training]
steps = 4
compute_time = "1ms"
reads_per_step = 8192
[checkpoint]
every = 2
bytes_per_rank = "24MiB"
write_size = "4KiB"
dir = "/checkpoints"
"#;
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), ONE_WRITER);
    let (read, write) = trace_bytes(&trace);
    let out = replay()
        .arg(&trace)
        .arg("--target")
        .arg(tmp.path().join("target"))
        .args(["--ranks", "2", "--checkpoint", "rank0", "--timing", "afap"])
        .arg("--json")
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let r = json_ok(&out);
    assert_eq!(r["write_bytes"].as_u64().unwrap(), write, "{r:#}");
    assert_eq!(r["read_bytes"].as_u64().unwrap(), read, "{r:#}");
}

#[test]
fn a_digit_run_is_a_rank_number_only_where_ranks_share_the_name() {
    use iorepro_format::Op;
    let tmp = tempfile::tempdir().unwrap();
    // Each rank writes its shard of a save; rank 0 alone also writes a
    // temporary file whose random name ends in `00`.
    let rows: Vec<Row<'_>> = vec![
        (
            0,
            Op::Open,
            "/ckpt/shard_0.pt",
            5,
            None,
            0,
            Some(O_WRITE_CREATE),
        ),
        (
            1,
            Op::Open,
            "/ckpt/shard_1.pt",
            5,
            None,
            0,
            Some(O_WRITE_CREATE),
        ),
        (0, Op::Write, "/ckpt/shard_0.pt", 5, Some(0), 1 << 20, None),
        (1, Op::Write, "/ckpt/shard_1.pt", 5, Some(0), 1 << 20, None),
        (0, Op::Close, "/ckpt/shard_0.pt", 5, None, 0, None),
        (1, Op::Close, "/ckpt/shard_1.pt", 5, None, 0, None),
        (
            0,
            Op::Open,
            "/ckpt/tmpmskd_c00",
            6,
            None,
            0,
            Some(O_WRITE_CREATE),
        ),
        (0, Op::Write, "/ckpt/tmpmskd_c00", 6, Some(0), 4096, None),
        (0, Op::Close, "/ckpt/tmpmskd_c00", 6, None, 0, None),
    ];
    let trace = write_rows(tmp.path(), &rows);
    let out = assert_cmd::Command::new(replay_bin())
        .arg(&trace)
        .args(["--ranks", "4", "--plan-only", "--explain"])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("/ckpt/shard_{rank}.pt"), "{text}");
    assert!(text.contains("/ckpt/tmpmskd_c00"), "{text}");
    assert!(!text.contains("tmpmskd_c{rank}"), "{text}");
}

/// A save rank 0 makes alone, with its run's record written in the same
/// phase (a benchmark's summary as it ends): at N the save is still one
/// writer's file, and the record, each of rank 0's heirs' own, is told
/// apart rather than counted as the save's second writer.
#[test]
fn a_save_is_told_apart_from_what_else_its_phase_writes() {
    use iorepro_format::Op;
    let dir = tempfile::tempdir().unwrap();
    let mut rows: Vec<Row> = Vec::new();
    for rank in 0..2 {
        for f in 0..4 {
            let path: &'static str =
                Box::leak(format!("/data/train/s{rank}{f}.npz").into_boxed_str());
            rows.push((rank, Op::Open, path, 3, None, 0, Some(libc::O_RDONLY)));
            for i in 0..4 {
                rows.push((rank, Op::Read, path, 3, Some(i << 20), 1 << 20, None));
            }
            rows.push((rank, Op::Close, path, 3, None, 0, None));
        }
    }
    rows.extend(checkpoint_rows(8));
    let record = "/out/summary.json";
    rows.push((0, Op::Open, record, 6, None, 0, Some(O_WRITE_CREATE)));
    rows.push((0, Op::Write, record, 6, Some(0), 700, None));
    rows.push((0, Op::Close, record, 6, None, 0, None));
    let trace = write_rows(dir.path(), &rows);
    let plan = json_ok(
        &replay()
            .arg(&trace)
            .args(["--ranks", "4", "--plan-only", "--json"])
            .output()
            .unwrap(),
    );
    let ckpts = plan["checkpoints"].as_array().unwrap();
    let save = ckpts
        .iter()
        .find(|c| c["traced_bytes"] == 8 << 20)
        .unwrap_or_else(|| panic!("the save: {ckpts:?}"));
    assert_eq!(
        (save["writers"].as_u64(), save["files"].as_u64()),
        (Some(1), Some(1)),
        "{save}"
    );
    assert_eq!(save["bytes"], 8 << 20, "{save}");
    let besides = &save["besides"];
    assert_eq!(besides["traced_bytes"], 700, "{save}");
    assert_eq!(besides["bytes"], 2 * 700, "{save}");
    let text = replay()
        .arg(&trace)
        .args(["--ranks", "4", "--plan-only", "--explain"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("-> 8.00 MiB by 1 writer(s) in 1 file(s)")
            && text.contains("and 1.37 KiB by 2 writer(s) in 2 other file(s)"),
        "{text}"
    );
}
