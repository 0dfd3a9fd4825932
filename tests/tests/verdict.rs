//! The answer in one look, on the bundled DDP capture: every traced save
//! made at any N by default, the verdict last on one screen, and a sizing
//! sweep whose rows are the single plans' verdicts.

use std::process::Command;

use iorepro_tests::bins::{bin, run_json, scratch};
use iorepro_tests::samples::{sample, TORCH_DDP};

fn plan(args: &[&str]) -> serde_json::Value {
    run_json(
        Command::new(bin("iorepro-replay"))
            .arg(sample(TORCH_DDP))
            .args(["--plan-only", "--json"])
            .args(args),
    )
}

#[test]
fn planned_at_64_ranks_the_sample_makes_its_three_saves() {
    let p = plan(&["--ranks", "64"]);
    let v = &p["verdict"];
    assert_eq!(v["saves_traced"], 3, "{v:#}");
    assert_eq!(v["saves_made"], 3, "{v:#}");
    let saves = v["saves"].as_array().unwrap();
    assert_eq!(saves.len(), 3, "{v:#}");
    let bytes: u64 = saves.iter().map(|s| s["bytes"].as_u64().unwrap()).sum();
    // The three saves of the capture: 15.1 MiB each, about 45 MiB.
    assert!(
        (44 << 20..=47 << 20).contains(&bytes),
        "saves write {bytes} B"
    );
    // Holding each rank's batch instead, a step-bound job saves R/N as often.
    let per_rank = plan(&["--ranks", "64", "--batch", "per-rank"]);
    let made = per_rank["verdict"]["saves_made"].as_u64().unwrap();
    assert!(made < 3, "{:#}", per_rank["verdict"]);
}

#[test]
fn a_sweep_prints_one_table_whose_rows_are_the_single_plans() {
    let ranks = ["64", "512", "4096"];
    let rates = ["1GiB/s", "10GiB/s", "50GiB/s"];
    let sweep = plan(&["--ranks", &ranks.join(","), "--bandwidth", &rates.join(",")]);
    let rows = sweep["sweep"].as_array().unwrap();
    assert_eq!(rows.len(), 9);
    let mut k = 0;
    for n in ranks {
        for b in rates {
            let single = plan(&["--ranks", n, "--bandwidth", b]);
            assert_eq!(rows[k]["verdict"], single["verdict"], "{n} ranks at {b}");
            assert_eq!(rows[k]["ranks"].to_string(), n);
            k += 1;
        }
    }
    // The table for people, and its picture.
    let dir = scratch("verdict-sweep");
    let svg = dir.join("sweep.svg");
    let out = Command::new(bin("iorepro-replay"))
        .arg(sample(TORCH_DDP))
        .args(["--plan-only", "--ranks", &ranks.join(",")])
        .args(["--bandwidth", &rates.join(","), "--plot"])
        .arg(&svg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let table_rows = text
        .lines()
        .filter(|l| ranks.iter().any(|n| l.trim_start().starts_with(n)))
        .count();
    assert_eq!(table_rows, 9, "{text}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    for n in ranks {
        assert!(
            drawn.contains(&format!("{n} ranks")),
            "{n} missing from the plot"
        );
    }
}

#[test]
fn a_replay_at_four_ranks_fits_one_screen_and_ends_with_its_verdict() {
    let dir = scratch("verdict-screen");
    let replay = |json: bool| {
        let mut c = Command::new(bin("iorepro-replay"));
        c.arg(sample(TORCH_DDP))
            .arg("--target")
            .arg(dir.join(if json { "json" } else { "table" }))
            .args(["--ranks", "4", "--timing", "original"]);
        if json {
            c.arg("--json");
        }
        c.output().unwrap()
    };
    let out = replay(false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let lines = stdout.lines().count() + stderr.lines().count();
    assert!(lines <= 45, "{lines} lines:\n{stderr}{stdout}");
    let verdict_at = stdout
        .lines()
        .position(|l| l.starts_with("== verdict: 4 rank(s)"))
        .unwrap_or_else(|| panic!("no verdict:\n{stdout}"));
    let after = stdout.lines().count() - verdict_at;
    assert!(after <= 10, "the verdict is the last block, {after} lines");
    assert!(
        stdout.contains("saves: all 3 traced"),
        "every save made:\n{stdout}"
    );
    // The model's details only when asked for.
    assert!(!stderr.contains("Scaling model"), "{stderr}");
    // Every figure of the verdict is in --json under one key.
    let json = replay(true);
    let r: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let v = &r["verdict"];
    assert_eq!(v["ranks"], 4);
    assert_eq!(v["epochs"].as_array().unwrap().len(), 3, "{v:#}");
    for e in v["epochs"].as_array().unwrap() {
        let au = e["au_percent"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&au), "{e}");
    }
    assert!(v["read_burst"]["gib_s"].as_f64().unwrap() > 0.0, "{v:#}");
    assert!(v["read_gib_s_for_au"].as_f64().unwrap() > 0.0, "{v:#}");
    let _ = std::fs::remove_dir_all(&dir);
}
