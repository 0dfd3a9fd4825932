//! The report as MLPerf Storage's benchmark (DLIO) writes its
//! `summary.json`, for the scripts and dashboards built on it: accelerator
//! utilisation per epoch (`train_au_percentage`, the share of time a GPU
//! would have been computing, with `--timing original` or a scale),
//! samples and bytes read per second of the epochs, and checkpoint time and
//! bandwidth (`save_checkpoint_*`, GiB/s as DLIO computes it; and
//! `load_checkpoint_*` for the phases that read a checkpoint back), all from the
//! replay's own clock ([`crate::report::training`]: an epoch is the
//! reading between two checkpoints).
//!
//! `epochs` is how many times the traced job read its dataset (each file's
//! reads, on the whole). `checkpoint_size_GB` is one checkpoint's size (the
//! mean over the checkpoint phases of the bytes all ranks wrote in each),
//! as MLPerf Storage gives it, not the sum over checkpoints. A sample is a
//! dataset file opened (one a file, as DLIO's formats of one sample a file
//! read). AU meets the expectation at 90 %, MLPerf Storage's threshold for
//! its training workloads.

use serde_json::{json, Value};

use super::Exporter;
use crate::report::summary::Report;
use crate::report::training::mean_stdev;
use iorepro_format::units::GIB;

pub struct Mlperf;

/// MLPerf Storage's accelerator-utilisation threshold (percent).
const AU_EXPECTATION: f64 = 90.0;

impl Exporter for Mlperf {
    fn render(&self, report: &Report) -> String {
        serde_json::to_string_pretty(&summary(report)).expect("summary serialises") + "\n"
    }
}

/// The replay's `summary.json` as DLIO writes it: the run's shape, the
/// hosts (`host_memory_GB` and `host_cpu_count`, one entry a node, as
/// MLPerf Storage's report generator sums them: the figures of the host
/// that writes the report, for every node, as MLPerf's rules ask nodes
/// alike) and the metrics.
pub fn summary(report: &Report) -> serde_json::Map<String, Value> {
    let mut metric = serde_json::Map::new();
    let t = &report.training;
    let aus: Vec<f64> = t.epochs.iter().filter_map(|e| e.au_percent).collect();
    if let (Some(mean), Some(sd)) = (t.au_mean_percent, t.au_stdev_percent) {
        metric.insert("train_au_percentage".into(), json!(aus));
        metric.insert("train_au_mean_percentage".into(), json!(mean));
        metric.insert("train_au_stdev_percentage".into(), json!(sd));
        metric.insert(
            "train_au_meet_expectation".into(),
            json!(if mean >= AU_EXPECTATION {
                "success"
            } else {
                "fail"
            }),
        );
    }
    let list = |f: &dyn Fn(&crate::report::training::EpochFigures) -> f64| -> Vec<f64> {
        t.epochs.iter().map(f).collect()
    };
    let throughput = list(&|e| e.samples_per_s);
    let io = list(&|e| e.read_mib_s);
    let (tp, tp_sd) = mean_stdev(&throughput);
    let (io_mean, io_sd) = mean_stdev(&io);
    metric.insert(
        "train_throughput_samples_per_second".into(),
        json!(throughput),
    );
    metric.insert("train_throughput_mean_samples_per_second".into(), json!(tp));
    metric.insert(
        "train_throughput_stdev_samples_per_second".into(),
        json!(tp_sd),
    );
    metric.insert("train_io_mean_MB_per_second".into(), json!(io_mean));
    metric.insert("train_io_stdev_MB_per_second".into(), json!(io_sd));
    if !t.checkpoints.is_empty() {
        let saves: Vec<(f64, f64)> = t
            .checkpoints
            .iter()
            .map(|c| (c.gib_s, c.duration_s))
            .collect();
        checkpoint_figures(&mut metric, "save", &saves);
        let sizes: Vec<f64> = t
            .checkpoints
            .iter()
            .map(|c| c.write_bytes as f64 / GIB)
            .collect();
        metric.insert("checkpoint_size_GB".into(), json!(mean_stdev(&sizes).0));
    }
    if !t.loads.is_empty() {
        let loads: Vec<(f64, f64)> = t.loads.iter().map(|l| (l.gib_s, l.duration_s)).collect();
        checkpoint_figures(&mut metric, "load", &loads);
    }
    let hostname = report
        .per_rank
        .first()
        .map_or(String::new(), |r| r.host.clone());
    let nodes = report.nodes.max(1) as usize;
    let doc: Value = json!({
        "num_accelerators": report.ranks,
        "num_hosts": report.nodes,
        "hostname": hostname,
        "epochs": report.epochs.unwrap_or(1),
        "host_memory_GB": vec![host_memory_gib(); nodes],
        "host_cpu_count": vec![host_cpus(); nodes],
        "metric": metric,
        "errors": report.errors,
    });
    match doc {
        Value::Object(map) => map,
        _ => unreachable!("a JSON object"),
    }
}

/// This host's memory in GiB (`MemTotal`), as DLIO reads it; 0 where
/// `/proc/meminfo` does not say.
fn host_memory_gib() -> f64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?.to_owned();
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        })
        .map_or(0.0, |kib| kib * 1024.0 / GIB)
}

/// This host's CPUs, as DLIO counts them (all of them, not this process's share).
fn host_cpus() -> usize {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|c| c.lines().filter(|l| l.starts_with("processor")).count())
        .ok()
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `{kind}_checkpoint_io_*_GB_per_second` and `{kind}_checkpoint_duration_*`
/// (mean and stdev) of checkpoints given as (GiB/s, seconds).
fn checkpoint_figures(
    metric: &mut serde_json::Map<String, Value>,
    kind: &str,
    figures: &[(f64, f64)],
) {
    let rates: Vec<f64> = figures.iter().map(|f| f.0).collect();
    let durations: Vec<f64> = figures.iter().map(|f| f.1).collect();
    let (rate, rate_sd) = mean_stdev(&rates);
    let (dur, dur_sd) = mean_stdev(&durations);
    for (name, value) in [
        ("io_mean_GB_per_second", rate),
        ("io_stdev_GB_per_second", rate_sd),
        ("duration_mean_seconds", dur),
        ("duration_stdev_seconds", dur_sd),
    ] {
        metric.insert(format!("{kind}_checkpoint_{name}"), json!(value));
    }
}
