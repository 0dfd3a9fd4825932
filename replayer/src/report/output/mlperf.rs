//! The report as MLPerf Storage's benchmark (DLIO) writes its
//! `summary.json`, for the scripts and dashboards built on it: accelerator
//! utilisation (`train_au_percentage`, the share of time a GPU would have
//! been computing, with `--timing original` or a scale) and checkpoint
//! bandwidth (`save_checkpoint_io_mean_GB_per_second`, GiB/s as DLIO
//! computes it, over the checkpoint phases).
//!
//! `epochs` is how many times the traced job read its dataset (each file's
//! reads, on the whole); the per-epoch lists hold the whole run as one
//! entry. `checkpoint_size_GB` is one checkpoint's size (the mean over the
//! checkpoint phases of the bytes all ranks wrote in each), as MLPerf
//! Storage gives it, not the sum over checkpoints.
//! Keys that need what a trace does not hold (samples per second) are left
//! out rather than made up. AU meets the expectation at 90 %, MLPerf
//! Storage's threshold for its training workloads.

use serde_json::{json, Value};

use super::Exporter;
use crate::report::summary::Report;
use iorepro_analysis::phases::PhaseKind;
use iorepro_format::units::{GIB, MIB};

pub struct Mlperf;

/// MLPerf Storage's accelerator-utilisation threshold (percent).
const AU_EXPECTATION: f64 = 90.0;

fn mean_stdev(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
    (mean, var.sqrt())
}

impl Exporter for Mlperf {
    fn render(&self, report: &Report) -> String {
        let mut metric = serde_json::Map::new();
        if let Some(busy) = report.gpu_busy {
            let au = busy * 100.0;
            metric.insert("train_au_percentage".into(), json!([au]));
            metric.insert("train_au_mean_percentage".into(), json!(au));
            metric.insert("train_au_stdev_percentage".into(), json!(0.0));
            metric.insert(
                "train_au_meet_expectation".into(),
                json!(if au >= AU_EXPECTATION {
                    "success"
                } else {
                    "fail"
                }),
            );
        }
        let read_mib_s = if report.duration_s > 0.0 {
            report.read_bytes as f64 / MIB / report.duration_s
        } else {
            0.0
        };
        metric.insert("train_io_mean_MB_per_second".into(), json!(read_mib_s));
        metric.insert("train_io_stdev_MB_per_second".into(), json!(0.0));
        let checkpoints: Vec<_> = report
            .phases
            .iter()
            .filter(|p| {
                // A save the job at N does not make leaves a phase without writes.
                p.kind == PhaseKind::Checkpoint
                    && p.replayed
                    && p.duration_s > 0.0
                    && p.write_bytes > 0
            })
            .collect();
        if !checkpoints.is_empty() {
            let rates: Vec<f64> = checkpoints
                .iter()
                .map(|p| p.write_bytes as f64 / GIB / p.duration_s)
                .collect();
            let durations: Vec<f64> = checkpoints.iter().map(|p| p.duration_s).collect();
            let sizes: Vec<f64> = checkpoints
                .iter()
                .map(|p| p.write_bytes as f64 / GIB)
                .collect();
            let (rate, rate_sd) = mean_stdev(&rates);
            let (dur, dur_sd) = mean_stdev(&durations);
            metric.insert("save_checkpoint_io_mean_GB_per_second".into(), json!(rate));
            metric.insert(
                "save_checkpoint_io_stdev_GB_per_second".into(),
                json!(rate_sd),
            );
            metric.insert("save_checkpoint_duration_mean_seconds".into(), json!(dur));
            metric.insert(
                "save_checkpoint_duration_stdev_seconds".into(),
                json!(dur_sd),
            );
            metric.insert("checkpoint_size_GB".into(), json!(mean_stdev(&sizes).0));
        }
        let hostname = report
            .per_rank
            .first()
            .map_or(String::new(), |r| r.host.clone());
        let doc: Value = json!({
            "num_accelerators": report.ranks,
            "num_hosts": report.nodes,
            "hostname": hostname,
            "epochs": report.epochs.unwrap_or(1),
            "metric": metric,
            "errors": report.errors,
        });
        serde_json::to_string_pretty(&doc).expect("summary serialises") + "\n"
    }
}
