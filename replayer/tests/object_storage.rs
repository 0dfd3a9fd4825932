//! Replays against what a real object store will not do on demand: moto's
//! S3 server (in its own process, `iorepro_tests::s3`) answering every Nth
//! request with 503 SlowDown, which the replay retries and counts, and
//! stopping answering mid-upload, which fails the run with the partial
//! report and leaves no object. Everything else against object storage is
//! tested against a real store, Ceph's RADOS Gateway, in
//! `object_store_rgw.rs`.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{checkpoint_rows, json, json_ok, replay_bin, u, write_rows};
use iorepro_tests::bins::scratch;
use iorepro_tests::s3::S3Server;
use iorepro_tests::samples::{sample, TORCH_DDP};
use iorepro_tests::skip::cannot_run;

const BUCKET: &str = "bench";

/// The server with the test bucket, or `None` (said why) where it cannot start.
fn server(args: &[&str]) -> Option<S3Server> {
    match S3Server::start(args) {
        Ok(s) => {
            s.create_bucket(BUCKET);
            Some(s)
        }
        Err(e) => {
            cannot_run(e);
            None
        }
    }
}

fn replay_s3(server: &S3Server, trace: &Path, prefix: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(replay_bin());
    cmd.arg(trace)
        .arg("--target")
        .arg(format!("s3://{BUCKET}/{prefix}"))
        .args(args);
    server.env(&mut cmd).output().expect("iorepro-replay runs")
}

#[test]
fn throttling_is_retried_and_counted() {
    // Every 7th request answered 503 SlowDown. Ranks and preparing threads
    // share the server, so one client can meet several in a row: the bound
    // on retries is set well above what that takes.
    let Some(server) = server(&["--fail-every", "7"]) else {
        return;
    };
    let trace = sample(TORCH_DDP);
    let args = ["--ranks", "4", "--json", "--s3-retries", "10"];
    // The data first, so the replay's own retries can be told apart.
    let prepared = replay_s3(
        &server,
        &trace,
        "slow",
        &[&args[..], &["--prepare", "only"]].concat(),
    );
    assert!(
        prepared.status.success(),
        "{}",
        String::from_utf8_lossy(&prepared.stderr)
    );
    let before = server.served();
    let r = json_ok(&replay_s3(
        &server,
        &trace,
        "slow",
        &[&args[..], &["--prepare", "skip"]].concat(),
    ));
    let slowdowns = u(&server.served()["slowdowns"]) - u(&before["slowdowns"]);
    assert!(slowdowns > 10, "{slowdowns}");
    assert_eq!(u(&r["requests"]["retries"]), slowdowns, "{r}");
    assert_eq!(u(&r["requests"]["throttles"]), slowdowns, "{r}");
    assert_eq!(r["errors"], serde_json::json!([]));
}

#[test]
fn a_server_that_stops_answering_fails_the_run_with_the_partial_report() {
    let Some(server) = server(&[]) else { return };
    let tmp = scratch("s3-stops");
    let trace = write_rows(&tmp, &checkpoint_rows(64));
    let small = ["--s3-multipart-threshold", "5MiB", "--s3-part-size", "5MiB"];
    // The bucket check, the clearing HEAD, the upload's start and its
    // first parts pass; then every PUT meets 503.
    server.fail_after(8, Some("PUT"));
    let out = replay_s3(
        &server,
        &trace,
        "stops",
        &[&small[..], &["--json", "--s3-retries", "2"]].concat(),
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("503") && err.contains("after 2 retries"),
        "{err}"
    );
    let r = json(&out);
    let parts = u(&r["requests"]["kinds"]["MPU-part"]["count"]);
    assert!(parts >= 4, "the parts sent before are in the report: {r}");
    assert_eq!(u(&r["requests"]["retries"]), 2, "{r}");
    let written = u(&r["write_bytes"]);
    assert!(written > 0 && written < 64 << 20, "partial: {written}");
    server.heal();
    assert!(
        server.objects(BUCKET, "stops/").is_empty(),
        "no object completed"
    );
}
