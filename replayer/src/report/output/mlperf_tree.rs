//! A replay as one run of MLPerf Storage's results tree (`--mlperf-results
//! DIR`), so that its report generator (`mlpstorage reports reportgen`)
//! and the dashboards built on its tables take the replay for one of their
//! runs: `DIR/training/MODEL/run/YYYYmmdd_HHMMSS/` holds
//!
//! - `summary.json`: DLIO's summary of a run ([`super::mlperf::summary`]),
//!   with the run's `start` and `end` as DLIO stamps them;
//! - `per_epoch_stats.json`: per epoch (`"1"`, `"2"`, ...) its start, end
//!   and duration, its block (`block1`: the epoch's steps, one block an
//!   epoch as DLIO counts them without `total_training_steps`) and the saves
//!   that followed it (`ckpt1`, ...), placed on the replay's clock by the
//!   phases before them;
//! - `dlio_config/config.yaml` and `overrides.yaml`: the workload the replay
//!   ran, as DLIO would run it at the replay's ranks
//!   ([`iorepro_analysis::dlio_workload`]), where MLPerf Storage's
//!   `mlpstorage` has DLIO write its Hydra configuration;
//! - `training_YYYYmmdd_HHMMSS_metadata.json`: what ran it (the run's
//!   marker: the report generator takes a directory with one such file and a
//!   `summary.json` for a run);
//! - `dlio.log`: the replay's report as the table prints it.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Local, TimeDelta};
use serde_json::{json, Map, Value};

use super::mlperf::summary;
use crate::error::{ReplayError, ReplayResult};
use crate::report::summary::Report;
use iorepro_analysis::dlio_workload::{self, render, Ask};

/// DLIO's time stamps (`utility.LOG_TS_FORMAT`): local time, microseconds.
const DLIO_STAMP: &str = "%Y-%m-%dT%H:%M:%S%.6f";
/// `mlpstorage`'s run directory names (`config.DATETIME_STR`).
const RUN_NAME: &str = "%Y%m%d_%H%M%S";

/// What the run directory is for: where, which model, what ran.
pub struct MlperfRun<'a> {
    pub results: &'a Path,
    /// The model's name in the tree; the trace directory's name where `None`.
    pub model: Option<&'a str>,
    pub trace: &'a Path,
    /// The replay's command line, for the metadata.
    pub command_line: Vec<String>,
}

/// Writes the replay's run into the tree and returns its directory.
pub fn write(run: &MlperfRun, report: &Report, log: &str) -> ReplayResult<PathBuf> {
    let model = run
        .model
        .map_or_else(|| dlio_workload::name_from(run.trace), str::to_owned);
    let reader = iorepro_format::TraceReader::open(run.trace)?;
    let ask = Ask {
        name: model.clone(),
        ranks: Some(u64::from(report.ranks)),
        step_overhead_s: 0.0,
    };
    let workload = dlio_workload::infer(&reader, &ask)?;
    let end = Local::now();
    let start = end - seconds(report.duration_s);
    let dir = free_dir(
        &run.results
            .join("training")
            .join(&model)
            .join("run")
            .join(start.format(RUN_NAME).to_string()),
    );
    let io = |what: &'static str, path: &Path, e| ReplayError::io(what, path, e);
    let config = dir.join("dlio_config");
    std::fs::create_dir_all(&config).map_err(|e| io("--mlperf-results: creating", &config, e))?;

    let mut doc = summary(report);
    doc.insert("start".into(), json!(stamp(start)));
    doc.insert("end".into(), json!(stamp(end)));
    for (key, setting) in [
        ("num_files_train", "dataset.num_files_train"),
        ("num_samples_per_file", "dataset.num_samples_per_file"),
    ] {
        if let Some(dlio_workload::Value::Int(n)) = workload.get(setting) {
            doc.insert(key.into(), json!(n));
        }
    }
    let metadata = json!({
        "benchmark_type": "training",
        "model": model,
        "command": "run",
        "num_processes": report.ranks,
        "run_datetime": start.format(RUN_NAME).to_string(),
        "runner": "iorepro-replay",
        "command_line": run.command_line,
        "trace": run.trace,
    });
    let files: [(PathBuf, String); 6] = [
        (dir.join("summary.json"), pretty(&Value::Object(doc))),
        (
            dir.join("per_epoch_stats.json"),
            pretty(&per_epoch_stats(report, start)),
        ),
        (config.join("config.yaml"), render::mlperf_config(&workload)),
        (config.join("overrides.yaml"), "[]\n".into()),
        (
            dir.join(format!("training_{}_metadata.json", start.format(RUN_NAME))),
            pretty(&metadata),
        ),
        (dir.join("dlio.log"), log.to_owned()),
    ];
    for (path, text) in files {
        std::fs::write(&path, text).map_err(|e| io("--mlperf-results: writing", &path, e))?;
    }
    Ok(dir)
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).expect("JSON serialises") + "\n"
}

fn seconds(s: f64) -> TimeDelta {
    TimeDelta::microseconds((s.max(0.0) * 1e6).round() as i64)
}

fn stamp(t: DateTime<Local>) -> String {
    t.format(DLIO_STAMP).to_string()
}

/// `dir`, or `dir_2`, `dir_3`, ... where a run of the same second is there.
fn free_dir(dir: &Path) -> PathBuf {
    let mut candidate = dir.to_path_buf();
    let mut n = 1;
    while candidate.exists() {
        n += 1;
        candidate = PathBuf::from(format!("{}_{n}", dir.display()));
    }
    candidate
}

/// A stretch of the run: its start and end stamps and its duration as
/// DLIO logs it (seconds, two decimals, a string).
fn stretch(start: DateTime<Local>, from_s: f64, duration_s: f64) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("start".into(), json!(stamp(start + seconds(from_s))));
    m.insert(
        "end".into(),
        json!(stamp(start + seconds(from_s + duration_s))),
    );
    m.insert("duration".into(), json!(format!("{duration_s:.2}")));
    m
}

/// DLIO's `per_epoch_stats.json` of the replay: each epoch from where its
/// phases began on the replay's clock (the slowest rank's phases before
/// it, one after another), each save that followed it before the next
/// epoch.
fn per_epoch_stats(report: &Report, start: DateTime<Local>) -> Value {
    let phase_start = |phase: usize| -> f64 {
        report
            .phases
            .iter()
            .take(phase)
            .filter(|p| p.replayed)
            .map(|p| p.duration_s)
            .sum()
    };
    let epochs = &report.training.epochs;
    let mut stats = Map::new();
    for (i, e) in epochs.iter().enumerate() {
        // An epoch's own time leaves out what came before its first
        // sample in its first phase: it ends where its phases end.
        let end_s = phase_start(e.phases.1 + 1);
        let from_s = (end_s - e.duration_s).max(0.0);
        let mut epoch = stretch(start, from_s, e.duration_s);
        epoch.insert(
            "block1".into(),
            Value::Object(stretch(start, from_s, e.duration_s)),
        );
        let next = epochs.get(i + 1).map_or(usize::MAX, |n| n.phases.0);
        let saves = report
            .training
            .checkpoints
            .iter()
            .filter(|c| c.phase > e.phases.1 && c.phase < next);
        for (k, c) in saves.enumerate() {
            epoch.insert(
                format!("ckpt{}", k + 1),
                Value::Object(stretch(start, phase_start(c.phase), c.duration_s)),
            );
        }
        stats.insert((i + 1).to_string(), Value::Object(epoch));
    }
    Value::Object(stats)
}
