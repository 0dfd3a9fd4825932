//! The replay's AU rule ([`iorepro_replayer::report::au::from_steps`])
//! against a real run of MLPerf Storage's benchmark, DLIO 2.0.0: its
//! per-rank record of each block's steps (`{rank}_output.json`) and its
//! `summary.json`, trimmed to the fields the rule reads (see
//! `tests/data/dlio-2.0.0/README.md` for how they were made).
//!
//! DLIO saves each step's time (`proc`: from its batch's loading to the
//! end of its compute) and compute, and each block's AU and throughput,
//! but not the block's time. Its throughput is the block's steps times the
//! batch size over that time (`compute_metrics_train`), so the time is the
//! steps times the batch size over the throughput.

use std::path::PathBuf;

use iorepro_replayer::report::au::from_steps;
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/dlio-2.0.0")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1e-12)
}

/// One block of one rank's epoch, as DLIO recorded it.
struct Block {
    block_s: f64,
    proc_s: Vec<f64>,
    compute_s: Vec<f64>,
    au: f64,
}

/// Rank `rank`'s blocks in `epoch` (1-based, as DLIO keys them).
fn blocks(output: &Value, epoch: usize, batch_size: f64) -> Vec<Block> {
    let e = &output[epoch.to_string()];
    let proc = e["proc"].as_object().expect("proc per block");
    assert!(!proc.is_empty(), "epoch {epoch}: no block");
    proc.iter()
        .map(|(key, proc)| {
            let proc_s = floats(proc);
            let compute_s = floats(&e["compute"][key]);
            assert_eq!(proc_s.len(), compute_s.len(), "epoch {epoch} {key}");
            let throughput = e["throughput"][key].as_f64().expect("throughput");
            Block {
                block_s: compute_s.len() as f64 * batch_size / throughput,
                proc_s,
                compute_s,
                au: e["au"][key].as_f64().expect("au"),
            }
        })
        .collect()
}

struct Run {
    ranks: Vec<Value>,
    summary: Value,
    batch_size: f64,
    epochs: usize,
}

fn run() -> Run {
    let meta = fixture("run.json");
    let summary = fixture("summary.json");
    let n = summary["num_accelerators"]
        .as_u64()
        .expect("num_accelerators") as usize;
    assert_eq!(meta["comm_size"].as_u64(), Some(n as u64));
    Run {
        ranks: (0..n)
            .map(|r| fixture(&format!("{r}_output.json")))
            .collect(),
        batch_size: meta["batch_size"].as_f64().expect("batch_size"),
        epochs: summary["epochs"].as_u64().expect("epochs") as usize,
        summary,
    }
}

#[test]
fn each_ranks_block_au_is_dlios() {
    let run = run();
    let mut checked = 0;
    for epoch in 1..=run.epochs {
        for (rank, output) in run.ranks.iter().enumerate() {
            for b in blocks(output, epoch, run.batch_size) {
                let au = from_steps(b.block_s, &b.proc_s, &b.compute_s);
                assert!(
                    close(au, b.au),
                    "epoch {epoch} rank {rank}: {au} vs DLIO's {}",
                    b.au
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, run.epochs * run.ranks.len());
}

#[test]
fn the_mean_over_ranks_is_the_summarys() {
    let run = run();
    let recorded = floats(&run.summary["metric"]["train_au_percentage"]);
    assert_eq!(recorded.len(), run.epochs);
    for (i, &summary_au) in recorded.iter().enumerate() {
        let epoch = i + 1;
        // A rank's epoch: its blocks' AU weighted by their steps
        // (`end_train`); the run's: the mean over ranks (`end_run`).
        let per_rank: Vec<f64> = run
            .ranks
            .iter()
            .map(|output| {
                let (mut au_steps, mut steps) = (0.0, 0.0);
                for b in blocks(output, epoch, run.batch_size) {
                    let n = b.proc_s.len() as f64;
                    au_steps += from_steps(b.block_s, &b.proc_s, &b.compute_s) * n;
                    steps += n;
                }
                au_steps / steps
            })
            .collect();
        let mean = per_rank.iter().sum::<f64>() / per_rank.len() as f64;
        assert!(
            close(mean, summary_au),
            "epoch {epoch}: {mean} vs summary's {summary_au}"
        );
    }
}

/// The block's time recovered from the throughput is the one rank 0's
/// log gives (`per_epoch_stats.json`, timestamps taken a moment after
/// DLIO's own), and the fixture tells the rule from the whole block's
/// figure: the first epoch's first step waits for the loader's workers.
#[test]
fn the_block_time_is_the_logs_and_the_first_step_matters() {
    let run = run();
    let stats = fixture("per_epoch_stats.json");
    let stamp = |s: &Value| -> f64 {
        // "YYYY-MM-DDTHH:MM:SS.ffffff", all within one day here.
        let t = s.as_str().expect("a timestamp");
        let clock = t.split('T').nth(1).expect("a time");
        let mut parts = clock
            .split(':')
            .map(|p| p.parse::<f64>().expect("a number"));
        let (h, m, s) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        h * 3600.0 + m * 60.0 + s
    };
    for epoch in 1..=run.epochs {
        let logged = &stats[epoch.to_string()]["block1"];
        let log_s = stamp(&logged["end"]) - stamp(&logged["start"]);
        let b = &blocks(&run.ranks[0], epoch, run.batch_size)[0];
        assert!(
            (b.block_s - log_s).abs() < 0.05,
            "epoch {epoch}: {} s vs the log's {log_s} s",
            b.block_s
        );
    }
    let b = &blocks(&run.ranks[0], 1, run.batch_size)[0];
    let whole = 100.0 * b.compute_s.iter().sum::<f64>() / b.block_s;
    assert!(b.au > whole + 5.0, "{} vs {whole}", b.au);
}
