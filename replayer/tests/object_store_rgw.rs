//! Replays against a real S3 store: Ceph's RADOS Gateway, on a one-node
//! cluster the test starts itself (`iorepro_tests::rgw`), which checks every
//! request's SigV4 signature and time as a production store does. The
//! bundled DDP capture at 4 ranks lands in a bucket as in a directory,
//! replays again over what the first replay left, and records what it did
//! as a trace of the capture's bytes; its checkpoint goes up in
//! multipart uploads, a part at a time and three at a time, as its dataset
//! comes down in parallel ranged GETs; four launched processes write what
//! four ranks as threads write. Every refusal such a
//! store gives (wrong keys, a clock an hour off, another user's bucket, a
//! key over 1,024 bytes) is said before any work, naming the endpoint and
//! what to set right, with exit status 2 and nothing left in the bucket.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{
    assert_records_the_same_bytes, json_ok, one_write, replay_bin, replay_ok, write_rows,
};
use iorepro_tests::bins::scratch;
use iorepro_tests::rgw::{Keys, RgwStore};
use iorepro_tests::s3::files_as_keys;
use iorepro_tests::samples::{sample, TORCH_DDP};
use iorepro_tests::skip::cannot_run;

const BUCKET: &str = "bench";

/// The store with the test bucket, or `None` (said why) where this machine
/// cannot start one.
fn store(name: &str) -> Option<RgwStore> {
    match RgwStore::start(name) {
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

fn replay(store: &RgwStore, keys: &Keys, trace: &Path, target: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(replay_bin());
    cmd.arg(trace).arg("--target").arg(target).args(args);
    store
        .env_as(&mut cmd, keys)
        .output()
        .expect("iorepro-replay runs")
}

#[test]
fn a_bundled_capture_replays_into_the_gateway_as_into_a_directory() {
    let Some(store) = store("rgw-sample") else {
        return;
    };
    eprintln!(
        "the gateway answered {:.1} s after its start",
        store.started_s
    );
    let root = scratch("rgw-sample-replays");
    let trace = sample(TORCH_DDP);
    let args = ["--ranks", "4", "--json"];
    let dir = replay_ok(&trace, &root.join("dir"), &args);
    let target = format!("s3://{BUCKET}/run");
    for pass in ["first", "second"] {
        let r = json_ok(&replay(&store, &store.user, &trace, &target, &args));
        assert_eq!(r["errors"], serde_json::json!([]), "{pass}: {r}");
        for k in ["read_bytes", "write_bytes"] {
            assert_eq!(r[k], dir[k], "{pass}: {k}");
        }
        let gets = &r["requests"]["kinds"]["GET"];
        assert_eq!(gets["bytes"], r["read_bytes"], "{pass}: {r}");
        assert_eq!(
            store.objects(BUCKET, "run/"),
            files_as_keys(&root.join("dir"), "run"),
            "{pass}: the objects are the directory replay's files"
        );
    }
    assert_eq!(store.open_uploads(BUCKET), 0);
    // What the replay did against the gateway, recorded, is a trace of the
    // same bytes as the capture's.
    let ops = root.join("ops");
    let recorded = json_ok(&replay(
        &store,
        &store.user,
        &trace,
        &format!("s3://{BUCKET}/record"),
        &["--json", "--record-ops", ops.to_str().unwrap()],
    ));
    assert_eq!(recorded["errors"], serde_json::json!([]));
    assert_records_the_same_bytes(&trace, &ops);
}

/// A trace of one small save: what a refused replay would have written.
fn small_save(dir: &Path) -> std::path::PathBuf {
    write_rows(dir, &one_write("/ckpt/model.pt", 5, 1 << 20))
}

/// Asserts a refusal before any work: exit 2, the endpoint and `says` on
/// stderr, nothing in the bucket.
fn refused(store: &RgwStore, out: &Output, says: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("refused: {}", err.trim_end());
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&store.endpoint), "the endpoint: {err}");
    for s in says {
        assert!(err.contains(s), "{s:?} in: {err}");
    }
    assert!(store.objects(BUCKET, "").is_empty(), "nothing written");
    assert_eq!(store.open_uploads(BUCKET), 0, "nothing half-uploaded");
}

#[test]
fn each_refusal_of_a_real_store_is_said_before_any_work() {
    let Some(store) = store("rgw-refusals") else {
        return;
    };
    let trace = small_save(&scratch("rgw-refusals-trace"));
    let target = format!("s3://{BUCKET}/run");
    let wrong_secret = Keys {
        secret_key: "not-the-secret".into(),
        ..store.user.clone()
    };
    let out = replay(&store, &wrong_secret, &trace, &target, &[]);
    refused(
        &store,
        &out,
        &["SignatureDoesNotMatch", "AWS_SECRET_ACCESS_KEY"],
    );
    let unknown = Keys {
        access_key: "nobody".into(),
        ..store.user.clone()
    };
    let out = replay(&store, &unknown, &trace, &target, &[]);
    refused(&store, &out, &["InvalidAccessKeyId", "AWS_ACCESS_KEY_ID"]);
    // The other user's own bucket exists, but is not the replay's user's.
    store.create_bucket_as(&store.other, "theirs");
    let out = replay(&store, &store.user, &trace, "s3://theirs/run", &[]);
    refused(&store, &out, &["AccessDenied", "bucket `theirs`"]);
    // A clock an hour behind: the store refuses the signature's time.
    let mut cmd = Command::new("faketime");
    cmd.args(["-f", "-1h"])
        .arg(replay_bin())
        .arg(&trace)
        .args(["--target", &target])
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    match store.env(&mut cmd).output() {
        Ok(out) => refused(&store, &out, &["RequestTimeTooSkewed", "clock"]),
        Err(e) => cannot_run(format!(
            "faketime (`cargo xtask setup` installs it) did not run: {e}"
        )),
    }
    // A path whose key would pass 1,024 bytes, which the gateway refuses
    // (400 InvalidObjectName): refused before the first request.
    let deep: String = (0..9).map(|i| format!("/{}{i}", "d".repeat(120))).collect();
    let long = format!("/ckpt{deep}/model.pt");
    let long_trace = write_rows(&scratch("rgw-refusals-long"), &one_write(&long, 5, 4096));
    let out = replay(&store, &store.user, &long_trace, &target, &[]);
    refused(&store, &out, &["at most 1024 bytes"]);
    // And the keys that are right replay the same trace.
    let out = replay(&store, &store.user, &trace, &target, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        store.objects(BUCKET, "run/"),
        vec![("run/ranks/rank-00000/ckpt/model.pt".to_string(), 1 << 20)]
    );
}

/// Multipart uploads, sent one part at a time and `--s3-concurrency` at a
/// time, and a dataset read back in parallel ranged GETs: the store holds
/// each object whole at its size, with no upload left open (the gateway
/// answers a completed upload with an empty ETag, which must not fail it).
#[test]
fn multipart_uploads_and_parallel_reads_against_the_gateway() {
    let Some(store) = store("rgw-multipart") else {
        return;
    };
    let trace = sample(TORCH_DDP);
    let root = scratch("rgw-multipart-replays");
    let args = ["--ranks", "4", "--json", "--checkpoint", "rank0"];
    let dir = replay_ok(&trace, &root.join("dir"), &args);
    let parts = ["--s3-multipart-threshold", "5MiB", "--s3-part-size", "5MiB"];
    for (prefix, mode) in [("mpu", "as-traced"), ("parallel", "parallel")] {
        let target = format!("s3://{BUCKET}/{prefix}");
        let mode = ["--s3-read", mode, "--s3-concurrency", "3"];
        let r = json_ok(&replay(
            &store,
            &store.user,
            &trace,
            &target,
            &[&args[..], &parts, &mode].concat(),
        ));
        assert_eq!(r["errors"], serde_json::json!([]), "{prefix}: {r}");
        let kinds = &r["requests"]["kinds"];
        let uploads = kinds["MPU-create"]["count"].as_u64().unwrap_or(0);
        assert!(uploads > 0, "{prefix}: {r}");
        assert_eq!(kinds["MPU-complete"]["count"], uploads, "{prefix}: {r}");
        assert_eq!(r["write_bytes"], dir["write_bytes"], "{prefix}");
        let in_flight = r["requests"]["max_in_flight"].as_u64().unwrap_or(0);
        eprintln!("{prefix}: {uploads} uploads, at most {in_flight} requests in flight");
        if mode[1] == "parallel" {
            assert_eq!(in_flight, 3, "{prefix}: {}", r["requests"]);
        }
        assert_eq!(
            store.objects(BUCKET, &format!("{prefix}/")),
            files_as_keys(&root.join("dir"), prefix),
            "{prefix}: the objects are the directory replay's files"
        );
    }
    assert_eq!(store.open_uploads(BUCKET), 0);
}

/// Names with characters a signature must encode as the store does (a
/// space, `#`, `~`, a non-ASCII letter): the gateway takes each request,
/// and a second replay finds the first one's objects again.
#[test]
fn odd_names_are_signed_as_the_gateway_checks_them() {
    let Some(store) = store("rgw-odd-names") else {
        return;
    };
    let tmp = scratch("rgw-odd-names-trace");
    let path = "/ckpt/step #1 ~final é.pt";
    let trace = write_rows(&tmp, &one_write(path, 5, 4096));
    let target = format!("s3://{BUCKET}/odd");
    let first = json_ok(&replay(&store, &store.user, &trace, &target, &["--json"]));
    let objects = store.objects(BUCKET, "odd/");
    assert_eq!(objects.len(), 1, "{objects:?}");
    assert_eq!(objects[0].1, 4096, "{objects:?}");
    let second = json_ok(&replay(&store, &store.user, &trace, &target, &["--json"]));
    assert_eq!(second["prepare"]["paths_cleared"], 1, "{second}");
    assert_eq!(store.objects(BUCKET, "odd/"), objects);
    assert_eq!(second["write_bytes"], first["write_bytes"]);
}

/// Four processes under a launcher (torchrun's environment, meeting
/// through files) write into the gateway what four ranks as threads of
/// one process write, request for request.
#[test]
fn ranks_under_a_launcher_write_into_the_gateway_what_threads_write() {
    let Some(store) = store("rgw-launched") else {
        return;
    };
    let trace = sample(TORCH_DDP);
    let root = scratch("rgw-launched-meet");
    let threads = json_ok(&replay(
        &store,
        &store.user,
        &trace,
        &format!("s3://{BUCKET}/threads"),
        &["--ranks", "4", "--json"],
    ));
    let children: Vec<_> = (0..4)
        .map(|rank| {
            let mut cmd = Command::new(replay_bin());
            cmd.arg(&trace)
                .args(["--target", &format!("s3://{BUCKET}/launched"), "--json"])
                .arg("--rendezvous-dir")
                .arg(root.join("meet"))
                .env("RANK", rank.to_string())
                .env("WORLD_SIZE", "4")
                .env("LOCAL_RANK", rank.to_string())
                .env("TORCHELASTIC_RUN_ID", "rgw-test")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            store.env(&mut cmd).spawn().expect("iorepro-replay starts")
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("iorepro-replay ends"))
        .collect();
    let launched = json_ok(&outs[0]);
    assert_eq!(launched["rendezvous"]["mechanism"], "files");
    for k in ["read_bytes", "write_bytes"] {
        assert_eq!(launched[k], threads[k], "{k}");
    }
    for k in ["GET", "PUT", "HEAD"] {
        let count = |r: &serde_json::Value| r["requests"]["kinds"][k]["count"].clone();
        assert_eq!(count(&launched), count(&threads), "{k}");
    }
    let beneath = |prefix: &str| -> Vec<(String, u64)> {
        store
            .objects(BUCKET, &format!("{prefix}/"))
            .into_iter()
            .map(|(k, n)| (k[prefix.len()..].to_string(), n))
            .collect()
    };
    assert!(!beneath("threads").is_empty());
    assert_eq!(beneath("launched"), beneath("threads"));
}
