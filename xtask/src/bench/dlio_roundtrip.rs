//! DLIO round trip of jobs DLIO did not write: `tests/jobs/train_ddp.py`
//! (torchrun, 2 ranks, DataLoader workers, a DCP save every 10 steps) and
//! the DLIO-like `tests/jobs/bench_like.py` (mpirun, 2 ranks, 1 MiB reads
//! in the training loop, rank 0's synced save at each epoch's end), each
//! captured, `iorepro-trace export --dlio` tells its DLIO workload, DLIO
//! 2.0.0 makes that workload's dataset and runs it at the same 2 processes
//! under the collector, and the two runs are set side by side, field by
//! field, each with its error: dataset bytes and files read (per epoch),
//! checkpoint bytes (per save) and saves, epoch times (the job's own record
//! against DLIO's `per_epoch_stats.json`) and AU (the job's whole-epoch
//! compute share against DLIO's `train_au_percentage`, which leaves each
//! epoch's first step out). DLIO's own run coming back is
//! tests/tests/dlio_roundtrip.rs.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::{output_json, Ctx};

const RANKS: u32 = 2;
const EPOCHS: u32 = 3;
const COMPUTE_S: &str = "0.05";
/// The jobs, by the name of their line.
const JOBS: [&str; 2] = ["train_ddp.py", "bench_like.py"];
/// Where `cargo xtask setup` puts DLIO (see `setup::dlio`).
const DLIO_VENV: &str = ".cache/iorepro/dlio-2.0.0";

pub fn run(ctx: &Ctx) -> Result<()> {
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    let dlio = Path::new(&home).join(DLIO_VENV).join("bin/dlio_benchmark");
    if !dlio.exists() {
        bail!("DLIO 2.0.0 is not installed (cargo xtask setup installs it)");
    }
    for job in JOBS {
        roundtrip(ctx, &dlio, job)?;
    }
    Ok(())
}

/// The job `script`'s command, at [`RANKS`] under its launcher.
fn job_command(ctx: &Ctx, script: &str, data: &Path, ckpt: &Path, report: &Path) -> Vec<String> {
    let path = ctx
        .root
        .join("tests/jobs")
        .join(script)
        .display()
        .to_string();
    let mut argv: Vec<String> = match script {
        "train_ddp.py" => vec![
            "python3".into(),
            "-m".into(),
            "torch.distributed.run".into(),
            "--standalone".into(),
            format!("--nproc_per_node={RANKS}"),
            path,
        ],
        _ => [
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "--bind-to",
            "none",
            "-np",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([RANKS.to_string(), "python3".into(), path])
        .collect(),
    };
    argv.extend([
        "--data".into(),
        data.display().to_string(),
        "--ckpt".into(),
        ckpt.display().to_string(),
        "--epochs".into(),
        EPOCHS.to_string(),
        "--compute-s".into(),
        COMPUTE_S.into(),
        "--report".into(),
        report.display().to_string(),
    ]);
    argv
}

/// One job captured, told as a DLIO workload, run by DLIO, and the two
/// side by side.
fn roundtrip(ctx: &Ctx, dlio: &Path, script: &str) -> Result<()> {
    let root = ctx.dir(&format!(
        "dlio-roundtrip-{}",
        script.trim_end_matches(".py")
    ))?;
    let data = root.join("dataset");
    super::scale_fidelity::make_dataset(&data)?;
    let ckpt = root.join("ckpt");
    std::fs::create_dir_all(&ckpt)?;

    // The job, captured.
    let (trace, report) = (root.join("job-trace"), root.join("job-report.json"));
    let mut job = Command::new(ctx.bin("iorepro-collect"));
    job.arg("--out").arg(&trace);
    for p in [&data, &ckpt] {
        job.arg("--path-prefix").arg(p);
    }
    job.arg("--")
        .args(job_command(ctx, script, &data, &ckpt, &report));
    succeed(&mut job, &format!("{script} under the collector"))?;

    // What the trace tells, run by DLIO in its own folder.
    let run_dir = root.join("dlio");
    let conf = run_dir.join("conf");
    let told = output_json(
        Command::new(ctx.bin("iorepro-trace"))
            .args(["export", "--dlio"])
            .arg(&conf)
            .args(["--name", "ddp", "--json"])
            .arg(&trace),
        "iorepro-trace export --dlio",
    )?;
    let setting = |key: &str| -> Value {
        told["fields"]
            .as_array()
            .and_then(|f| f.iter().find(|x| x["key"] == key))
            .map(|x| x["value"].clone())
            .unwrap_or(Value::Null)
    };
    let dlio_cmd = |more: &[&str]| {
        let mut c = Command::new("mpirun");
        c.current_dir(&run_dir)
            .args([
                "--allow-run-as-root",
                "--oversubscribe",
                "--bind-to",
                "none",
                "-np",
            ])
            .arg(RANKS.to_string())
            .arg(dlio)
            .arg("--config-dir")
            .arg(&conf)
            .arg("workload=ddp")
            .args(more);
        c
    };
    succeed(
        &mut dlio_cmd(&[
            "++workload.workflow.generate_data=True",
            "++workload.workflow.train=False",
            "++workload.workflow.checkpoint=False",
            "++workload.output.folder=gen",
        ]),
        "DLIO's generation",
    )?;
    let folder = |key: &str| run_dir.join(setting(key).as_str().unwrap_or_default());
    let (dlio_data, dlio_ckpt) = (
        folder("dataset.data_folder"),
        folder("checkpoint.checkpoint_folder"),
    );
    let dlio_trace = root.join("dlio-trace");
    let mut captured = Command::new(ctx.bin("iorepro-collect"));
    captured.current_dir(&run_dir).arg("--out").arg(&dlio_trace);
    for p in [&dlio_data, &dlio_ckpt] {
        captured.arg("--path-prefix").arg(p);
    }
    let inner = dlio_cmd(&["++workload.output.folder=out"]);
    captured
        .arg("--")
        .arg(inner.get_program())
        .args(inner.get_args());
    succeed(&mut captured, "DLIO under the collector")?;

    // Side by side.
    let summary = |t: &Path| {
        output_json(
            Command::new(ctx.bin("iorepro-trace"))
                .args(["summary", "--json"])
                .arg(t),
            "iorepro-trace summary",
        )
    };
    let (js, ds) = (summary(&trace)?, summary(&dlio_trace)?);
    let saves = |s: &Value| {
        s["phases"].as_array().map_or(0, |p| {
            p.iter().filter(|x| x["kind"] == "checkpoint").count()
        })
    };
    let role = |s: &Value, r: &str, k: &str| s["roles"][r][k].as_f64().unwrap_or(0.0);
    let job_report: Value = serde_json::from_slice(&std::fs::read(&report)?)?;
    let job_epochs: Vec<f64> = job_report["epoch_times_ns"]
        .as_array()
        .map(|a| a.iter().map(span_s).collect())
        .unwrap_or_default();
    let job_compute: f64 = job_report["epoch_compute_ns"].as_array().map_or(0.0, |a| {
        a.iter().filter_map(Value::as_f64).sum::<f64>() / 1e9
    });
    let dlio_epochs = dlio_epoch_durations(&run_dir.join("out"))?;
    let dlio_au: Value = serde_json::from_slice(&std::fs::read(run_dir.join("out/summary.json"))?)?;
    let dlio_au = dlio_au["metric"]["train_au_mean_percentage"]
        .as_f64()
        .unwrap_or(f64::NAN);
    let job_au = 100.0 * job_compute / job_epochs.iter().sum::<f64>().max(1e-9);
    let (jsaves, dsaves) = (saves(&js), saves(&ds));
    let fields = [
        field(
            "dataset bytes per epoch",
            role(&js, "dataset", "read_bytes") / EPOCHS as f64,
            role(&ds, "dataset", "read_bytes") / EPOCHS as f64,
        ),
        field(
            "dataset files",
            role(&js, "dataset", "files"),
            role(&ds, "dataset", "files"),
        ),
        field(
            "checkpoint bytes per save",
            role(&js, "checkpoint", "write_bytes") / jsaves.max(1) as f64,
            role(&ds, "checkpoint", "write_bytes") / dsaves.max(1) as f64,
        ),
        field("saves", jsaves as f64, dsaves as f64),
        field(
            "checkpoint files",
            role(&js, "checkpoint", "files"),
            role(&ds, "checkpoint", "files"),
        ),
        field("epoch time s (mean)", mean(&job_epochs), mean(&dlio_epochs)),
        field("AU % (job: whole epoch; DLIO: its rule)", job_au, dlio_au),
    ];
    ctx.line(
        "dlio-roundtrip",
        format!(
            "{script} at {RANKS} ranks told as DLIO workload (batch {}, {} workers, \
             computation_time {} s, {} epochs, model_size {} B): job -> DLIO: {}",
            setting("reader.batch_size"),
            setting("reader.read_threads"),
            setting("train.computation_time"),
            setting("train.epochs"),
            setting("checkpoint.model_size"),
            fields.join("; ")
        ),
    );
    Ok(())
}

/// One field side by side: `job -> dlio (error)`.
fn field(name: &str, job: f64, dlio: f64) -> String {
    let err = if job != 0.0 {
        format!("{:+.1} %", 100.0 * (dlio - job) / job)
    } else {
        "n/a".to_string()
    };
    format!("{name} {} -> {} ({err})", short(job), short(dlio))
}

fn short(x: f64) -> String {
    if x.abs() >= 1e4 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// An epoch's `[start_ns, end_ns]` (the job's record) in seconds.
fn span_s(x: &Value) -> f64 {
    let a = x.as_array();
    let at = |i: usize| {
        a.and_then(|a| a.get(i))
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
    };
    (at(1) - at(0)) / 1e9
}

/// Each epoch's duration, from DLIO's own `per_epoch_stats.json` in `out`.
fn dlio_epoch_durations(out: &Path) -> Result<Vec<f64>> {
    let v: Value = serde_json::from_slice(&std::fs::read(out.join("per_epoch_stats.json"))?)?;
    let mut epochs: Vec<(u64, f64)> = v
        .as_object()
        .context("per_epoch_stats.json is no object")?
        .iter()
        .filter_map(|(k, e)| {
            let d = &e["duration"];
            Some((
                k.parse().ok()?,
                d.as_f64().or_else(|| d.as_str()?.parse().ok())?,
            ))
        })
        .collect();
    epochs.sort_by_key(|e| e.0);
    Ok(epochs.into_iter().map(|e| e.1).collect())
}

fn succeed(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
