//! What a real S3 store refuses, against Ceph's RADOS Gateway on a
//! one-node cluster the test starts itself (`iorepro_tests::rgw`), which
//! checks every request's SigV4 signature and time as a production store
//! does: wrong keys, a clock an hour off, another user's bucket, a bucket
//! that is not there, an endpoint that is not there, no credentials, and a
//! key over 1,024 bytes. Each is said before any work, naming what to set
//! right, with exit status 2 and nothing left in the bucket; the gateway's
//! own log says what reached it. (What a replay does there is in
//! `object_store_rgw.rs`.)

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::rgw::{replay, store, BUCKET};
use common::{one_write, replay_bin, write_rows};
use iorepro_tests::bins::scratch;
use iorepro_tests::rgw::{Keys, RgwStore, Served};
use iorepro_tests::samples::{sample, TORCH_DDP};
use iorepro_tests::skip::cannot_run;

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
    let mut rows = one_write("/ckpt/short.pt", 6, 4096);
    rows.extend(one_write(&long, 7, 4096));
    let long_trace = write_rows(&scratch("rgw-refusals-long"), &rows);
    let before = store.served();
    let out = replay(&store, &store.user, &long_trace, &target, &[]);
    let served = store.served().since(&before);
    refused(
        &store,
        &out,
        &[
            "S3 takes keys of at most 1024 bytes",
            &format!("`run/ranks/rank-00000/ckpt{deep}/model.pt`"),
        ],
    );
    assert_eq!(served, Served::default(), "not one request");
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
    // The trace with the long path left out replays the rest.
    let exclude = format!("/ckpt/{}0", "d".repeat(120));
    let out = replay(
        &store,
        &store.user,
        &long_trace,
        &format!("s3://{BUCKET}/long"),
        &["--exclude", &exclude],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        store.objects(BUCKET, "long/"),
        vec![("long/ranks/rank-00000/ckpt/short.pt".to_string(), 4096)]
    );
}

/// A bucket that is not there, an endpoint that is not there, and no
/// credentials anywhere are each said before any work, with exit status 2;
/// the same keys from a profile file work.
#[test]
fn a_missing_bucket_is_said_before_any_work() {
    let Some(store) = store("rgw-missing-bucket") else {
        return;
    };
    let trace = sample(TORCH_DDP);
    let start = Instant::now();
    let before = store.served();
    let out = replay(
        &store,
        &store.user,
        &trace,
        "s3://no-such-bucket/run",
        &["--ranks", "4"],
    );
    let served = store.served().since(&before);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bucket `no-such-bucket` does not exist"),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(30));
    assert_eq!(served.total().received, 0, "nothing prepared: {served:?}");
    assert_eq!(served.of("PUT put_obj").count, 0, "{served:?}");
    // An endpoint that is not there: the same, naming it.
    let mut cmd = Command::new(replay_bin());
    cmd.arg(&trace)
        .args(["--target", "s3://bench/run", "--s3-retries", "0"]);
    let out = store
        .env(&mut cmd)
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("http://127.0.0.1:1"), "{err}");
    // No credentials anywhere (the metadata service pointed at nothing).
    let home = scratch("rgw-no-credentials");
    let without_keys = |cmd: &mut Command| {
        store
            .env(cmd)
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env("HOME", &home)
            .env("AWS_METADATA_ENDPOINT", "http://127.0.0.1:1");
    };
    let mut cmd = Command::new(replay_bin());
    cmd.arg(&trace).args(["--target", "s3://bench/run"]);
    without_keys(&mut cmd);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no credentials"), "{err}");
    assert!(store.objects(BUCKET, "").is_empty(), "nothing written");
    // The same keys from a profile file work.
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(
        home.join(".aws/credentials"),
        format!(
            "[bench]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            store.user.access_key, store.user.secret_key
        ),
    )
    .unwrap();
    let mut cmd = Command::new(replay_bin());
    cmd.arg(&trace)
        .args(["--target", "s3://bench/profile", "--prepare", "only"]);
    without_keys(&mut cmd);
    let out = cmd.env("AWS_PROFILE", "bench").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!store.objects(BUCKET, "profile/").is_empty());
}
