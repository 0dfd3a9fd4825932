//! A job whose training loop, checkpoints and logs are a framework's
//! (PyTorch Lightning: `tests/jobs/train_vision.py --arch small`, JPEG
//! folders decoded by 2 DataLoader workers, ModelCheckpoint after each of
//! 3 epochs, a CSV logger), captured whole as a user captures a job and
//! replayed at its own rank with `--timing original`
//! (`tests/jobs/same_scale.py`), against the job's own record of the run
//! that was captured. Each epoch stops short of its loader (800 images, 25
//! batches of 32, 20 steps an epoch), as a step budget does: the workers'
//! prefetched batches are still read well into each save, which `phases`
//! begins where the training loop named its checkpoint all the same
//! (docs/ANALYSIS.md).
//!
//! On a GPU machine the same check (ResNet-50, 8 workers) gave the span
//! within -1.1 % and each epoch within -1.2 %. Here the job keeps
//! one compute thread (`--threads 1`), so its loop and its 2 workers keep 3
//! threads busy on 2 cores, not 4. Even so a cold read that sleeps on the
//! disk may wait for a core before it returns, and the trace records that
//! wait as the read's time; the replay's one thread a rank finds a core
//! free, so the first epoch, the only cold one, comes out short (docs/TIMING.md
//! states the limit). It is judged within 35 %, which a first epoch begun
//! at the wrong call misses (+139 %); the later epochs within 15 %. Nor is
//! the AU judged: the job's loop waits for its workers' decoding, which the
//! replay keeps as compute.

use iorepro_tests::bins::{bin, job_driver, scratch};
use iorepro_tests::python::require_python;
use iorepro_tests::skip::cannot_run;
use iorepro_tests::timing::{judge_twice, Missed};
use serde_json::Value;

fn list(v: &Value) -> Vec<f64> {
    v.as_array().map_or(Vec::new(), |a| {
        a.iter().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect()
    })
}

#[test]
fn a_lightning_job_captured_whole_replays_its_saves_and_epochs() {
    if !iorepro_format::host::is_root() {
        cannot_run("not root: capturing needs root");
        return;
    }
    if require_python("", &["lightning", "PIL", "torch"]).is_none() {
        return;
    }
    // The job's structure holds in every run; its times are judged with
    // one more run where the first misses (`judge_twice`).
    let attempt = || {
        let out = job_driver("same_scale.py")
            .arg("--trace-tool")
            .arg(bin("iorepro-trace"))
            .arg("--scratch")
            .arg(scratch("framework-job"))
            .args([
                "--images",
                "800",
                "--arch",
                "small",
                "--batch",
                "32",
                "--workers",
                "2",
                "--epochs",
                "3",
                "--steps",
                "20",
                "--crop",
                "96",
                "--state-mib",
                "32",
                "--threads",
                "1",
            ])
            .output()
            .expect("python3 runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "same_scale.py failed:\n{stderr}");
        let r: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        // One line: a failure's message stays in view below it.
        eprintln!("{r}");

        // Every one of the job's files has the role it has in the job.
        for kind in ["data", "run/checkpoints", "run/logs"] {
            let k = &r["roles"][kind];
            assert!(
                k["files"].as_u64().unwrap_or(0) > 0,
                "{kind}: none in the trace"
            );
            assert_eq!(k["files"], k["right"], "{kind}: {}", k["wrong"]);
        }
        let replay = &r["replay"];
        assert_eq!(replay["results_differed"], 0, "{replay}");
        assert!(
            replay["errors"].as_array().is_some_and(|a| a.is_empty()),
            "{replay}"
        );
        // The replay makes each of the job's saves and epochs.
        let (job, got) = (&r["traced"], replay);
        assert_eq!(list(&got["checkpoints_s"]).len(), 3, "{got}");
        assert_eq!(
            list(&got["epochs_s"]).len(),
            list(&job["epochs_s"]).len(),
            "{got}"
        );
        Some(r)
    };
    judge_twice(attempt, |r| {
        let mut m = Missed::default();
        let job = &r["traced"];
        // The epochs take the traced run's time: a save begun at its first
        // write would have handed the later ones Lightning's serialisation
        // before it (+6-7 % on the GPU machine, more here), and a first
        // epoch begun at the wrong call missed by +139 % (measured on a 2-core VM; docs/TIMING.md). The
        // first is the cold one, short by the cores' wait its reads hold.
        for (i, e) in list(&r["errors"]["epochs"]).iter().enumerate() {
            let bound = if i == 0 { 0.35 } else { 0.15 };
            m.unless(e.abs() <= bound, || {
                format!("epoch {} off by {:+.1} %", i + 1, e * 100.0)
            });
        }
        // `iorepro-trace phases` finds the job's saves in its trace, each as
        // long as the job's own record says, to within 50 ms (saves of about
        // 0.1 s here; Lightning's serialisation before the write is short on
        // the CPU, 0.33 s on the GPU, measured once).
        let found = list(&r["phases"]["checkpoints_s"]);
        let saves = list(&job["checkpoints_s"]);
        m.unless(found.len() == saves.len(), || {
            format!(
                "phases found {} saves, the job made {}",
                found.len(),
                saves.len()
            )
        });
        for (i, (f, s)) in found.iter().zip(&saves).enumerate() {
            m.unless((f - s).abs() <= 0.05, || {
                format!("save {}: phases {f:.3} s, the job {s:.3} s", i + 1)
            });
        }
        m
    });
}
