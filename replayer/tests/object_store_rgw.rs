//! Replays against a real S3 store: Ceph's RADOS Gateway, on a one-node
//! cluster the test starts itself (`iorepro_tests::rgw`), which checks every
//! request's SigV4 signature and time as a production store does, and
//! says what it served in its own log of operations. The bundled captures
//! at 4 ranks land in a bucket as in a directory, beside an object that is
//! not theirs, replay again over what the first replay left, and record
//! what they did as a trace of the capture's bytes; the gateway served
//! the GETs' bytes the report counts and took the bytes it wrote. The read
//! modes fetch as a loader would, request for request as the gateway
//! counts them; checkpoints go up in multipart uploads, a part at a time
//! and three at a time, as datasets come down in parallel ranged GETs;
//! four launched processes write what four ranks as threads write; odd
//! names are signed as the gateway checks them; the metrics endpoint
//! counts the requests. (What such a store refuses is in
//! `object_store_refusals.rs`; what a real store will not do on demand,
//! throttling and a server that stops answering, is in
//! `object_storage.rs`, against moto.)

mod common;

use std::process::{Command, Output};
use std::time::Duration;

use common::rgw::{replay, store, BUCKET};
use common::{
    assert_records_the_same_bytes, checkpoint_rows, json, json_ok, one_write, replay_bin,
    replay_ok, u, write_rows, write_rows_renaming,
};
use iorepro_tests::bins::scratch;
use iorepro_tests::rgw::{RgwStore, Served};
use iorepro_tests::s3::files_as_keys;
use iorepro_tests::samples::{sample, ALL, TORCH_DDP, TORCH_DDP_SHARDS};

/// The count and bytes of one kind of request in a report.
fn kind(r: &serde_json::Value, kind: &str) -> (u64, u64) {
    let k = &r["requests"]["kinds"][kind];
    (u(&k["count"]), u(&k["bytes"]))
}

/// The bytes a replay sent the store: the prepared data, then its own
/// uploads, whole or in parts.
fn uploaded(r: &serde_json::Value) -> u64 {
    u(&r["prepare"]["bytes_written"]) + kind(r, "PUT").1 + kind(r, "MPU-part").1
}

/// A replay's multipart uploads as the gateway took them (`what` names the
/// replay): no error, at least one upload, each begun and completed once,
/// and every byte the replay sent received. Their count.
fn uploads_as_served(what: &str, r: &serde_json::Value, served: &Served) -> u64 {
    assert_eq!(r["errors"], serde_json::json!([]), "{what}: {r}");
    let uploads = kind(r, "MPU-create").0;
    assert!(uploads > 0, "{what}: {r}");
    assert_eq!(
        served.of("POST init_multipart").count,
        uploads,
        "{what}: {served:?}"
    );
    assert_eq!(
        served.of("POST complete_multipart").count,
        uploads,
        "{what}: {served:?}"
    );
    assert_eq!(
        served.of("PUT put_obj").received,
        uploaded(r),
        "{what}: {served:?}"
    );
    uploads
}

/// The objects beneath `prefix/`, less the foreign one.
fn replayed(store: &RgwStore, prefix: &str, foreign: &str) -> Vec<(String, u64)> {
    let mut all = store.objects(BUCKET, &format!("{prefix}/"));
    all.retain(|(k, _)| k != foreign);
    all
}

#[test]
fn the_bundled_captures_replay_into_the_gateway_as_into_a_directory() {
    let Some(store) = store("rgw-sample") else {
        return;
    };
    eprintln!(
        "the gateway answered {:.1} s after its start",
        store.started_s
    );
    // An object that is not the replay's, beneath the prefix one uses.
    let foreign = format!("run/{}/foreign.bin", ALL[0]);
    store.put(BUCKET, &foreign, 1000);
    for name in ALL.into_iter().chain([TORCH_DDP_SHARDS]) {
        let root = scratch(&format!("rgw-sample-{name}"));
        let trace = sample(name);
        let args = ["--ranks", "4", "--json"];
        let dir = replay_ok(&trace, &root.join("dir"), &args);
        let prefix = format!("run/{name}");
        let target = format!("s3://{BUCKET}/{prefix}");
        let lines = root.join("status.jsonl");
        let status = [
            "--status-interval",
            "100ms",
            "--status-file",
            lines.to_str().unwrap(),
        ];
        let before = store.served();
        let first = json_ok(&replay(
            &store,
            &store.user,
            &trace,
            &target,
            &[&args[..], &status].concat(),
        ));
        let served = store.served().since(&before);
        // The last status line's requests are the report's.
        let text = std::fs::read_to_string(&lines).unwrap();
        let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["done"], true);
        for kind in ["GET", "HEAD", "PUT"] {
            assert_eq!(
                last["requests"]["kinds"][kind]["count"], first["requests"]["kinds"][kind]["count"],
                "{name}: {kind} in {last}"
            );
        }
        assert_eq!(first["errors"], serde_json::json!([]), "{name}: {first}");
        assert_eq!(first["ranks"], 4);
        // The client's CPU a request: some, and no more than the 4 ranks'
        // time over the replay allows.
        let requests = &first["requests"];
        let made: u64 = (requests["kinds"].as_object().unwrap().values())
            .map(|k| u(&k["count"]))
            .sum();
        let cpu_us = requests["client_cpu_us_per_request"]
            .as_f64()
            .unwrap_or(0.0);
        let most_us = 4.0 * first["duration_s"].as_f64().unwrap() * 1e6 / made as f64;
        assert!(
            cpu_us > 0.0 && cpu_us <= most_us,
            "{name}: {cpu_us} us a request, at most {most_us}"
        );
        for k in ["read_bytes", "write_bytes"] {
            assert_eq!(first[k], dir[k], "{name}: {k}");
        }
        // The objects are the directory replay's files, at their sizes: the
        // prepared dataset and every rank's checkpoint files.
        let objects = replayed(&store, &prefix, &foreign);
        assert_eq!(
            objects,
            files_as_keys(&root.join("dir"), &prefix),
            "{name}: objects against the directory replay's files"
        );
        assert!(!objects.is_empty());
        // Read as traced, the GETs brought what the calls read, and the
        // gateway served exactly that, in as many GETs, none refused.
        let (gets, got) = kind(&first, "GET");
        assert_eq!(got, u(&first["read_bytes"]), "{name}");
        let served_gets = served.of("GET get_obj");
        assert_eq!(served_gets.count, gets, "{name}: GETs served: {served:?}");
        assert_eq!(served_gets.sent, got, "{name}: bytes served: {served:?}");
        assert_eq!(served_gets.failed, 0, "{name}: {served:?}");
        // Every HEAD it answered is the replay's or the preparation's (one
        // per prepared object), as the report says.
        assert_eq!(
            served.of("HEAD get_obj").count,
            kind(&first, "HEAD").0 + u(&first["prepare"]["requests"]["HEAD"]),
            "{name}: HEADs served: {served:?}, prepare {}",
            first["prepare"]
        );
        assert!(u(&first["prepare"]["requests"]["HEAD"]) > 0, "{name}");
        // What the gateway took: the prepared data, then the replay's uploads.
        assert_eq!(
            served.of("PUT put_obj").received,
            uploaded(&first),
            "{name}: bytes taken: {served:?}"
        );
        // Again on the same bucket: nothing differs, nothing is uploaded twice.
        let second = json_ok(&replay(&store, &store.user, &trace, &target, &args));
        assert_eq!(second["errors"], serde_json::json!([]), "{name}: {second}");
        assert_eq!(replayed(&store, &prefix, &foreign), objects, "{name}");
        for k in ["read_bytes", "write_bytes"] {
            assert_eq!(second[k], first[k], "{name}: {k}");
        }
        assert_eq!(kind(&second, "GET").1, got, "{name}");
        assert_eq!(
            u(&second["prepare"]["files_created"]),
            0,
            "{name}: {second}"
        );
        eprintln!(
            "{name}: {} objects; GET {gets} ({got} B), HEAD {}, PUT {}, first byte p50 {} us; \
             the gateway served {served:?}",
            objects.len(),
            kind(&first, "HEAD").0,
            kind(&first, "PUT").0,
            first["requests"]["first_byte_us"]["p50"]
        );
    }
    assert!(
        store
            .objects(BUCKET, "run/")
            .contains(&(foreign.clone(), 1000)),
        "the foreign object was touched"
    );
    assert_eq!(store.open_uploads(BUCKET), 0);
    // What the replay did against the gateway, recorded, is a trace of the
    // same bytes as the capture's.
    let root = scratch("rgw-sample-record");
    let trace = sample(TORCH_DDP);
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

#[test]
fn read_modes_fetch_as_a_loader_would() {
    let Some(store) = store("rgw-read-modes") else {
        return;
    };
    // Shards read in 1 MiB calls: where the modes differ.
    let trace = sample(TORCH_DDP_SHARDS);
    let mut seen = Vec::new();
    for mode in ["as-traced", "coalesce", "whole", "parallel"] {
        let before = store.served();
        let r = json_ok(&replay(
            &store,
            &store.user,
            &trace,
            &format!("s3://{BUCKET}/modes/{mode}"),
            &[
                "--ranks",
                "4",
                "--json",
                "--s3-read",
                mode,
                "--s3-part-size",
                "5MiB",
                "--s3-concurrency",
                "3",
            ],
        ));
        let served = store.served().since(&before);
        let (count, bytes) = kind(&r, "GET");
        // Whatever the mode, the report's GETs are the gateway's, to the byte.
        let served_gets = served.of("GET get_obj");
        assert_eq!(served_gets.sent, bytes, "{mode}: {served:?}");
        assert_eq!(served_gets.count, count, "{mode}: {served:?}");
        assert_eq!(served_gets.failed, 0, "{mode}: {served:?}");
        assert!(bytes >= u(&r["read_bytes"]), "{mode}: {r}");
        assert_eq!(r["requests"]["read"], mode);
        let in_flight = u(&r["requests"]["max_in_flight"]);
        if mode == "parallel" {
            // 24 MiB shards in 5 MiB parts: the first alone, then the
            // other four, three at a time.
            assert_eq!(in_flight, 3, "{mode}: {}", r["requests"]);
        } else {
            assert_eq!(in_flight, 1, "{mode}: one request at a time");
        }
        seen.push((count, bytes, u(&r["requests"]["without_request"]["read"])));
    }
    let (traced, coalesced, whole, parted) = (seen[0], seen[1], seen[2], seen[3]);
    assert_eq!(traced.2, 0, "as traced, every read is a GET");
    assert!(coalesced.0 < traced.0 && coalesced.2 > 0, "{seen:?}");
    assert!(whole.0 <= coalesced.0, "{seen:?}");
    // The same bytes as whole objects, each in as many 5 MiB parts as it
    // needs.
    assert_eq!(parted.1, whole.1, "{seen:?}");
    let object = whole.1 / whole.0;
    assert_eq!(parted.0, whole.0 * object.div_ceil(5 << 20), "{seen:?}");
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
        let before = store.served();
        let r = json_ok(&replay(
            &store,
            &store.user,
            &trace,
            &target,
            &[&args[..], &parts, &mode].concat(),
        ));
        let served = store.served().since(&before);
        // Each upload, part and whole object as the gateway took it.
        let uploads = uploads_as_served(prefix, &r, &served);
        assert_eq!(kind(&r, "MPU-complete").0, uploads, "{prefix}: {r}");
        assert!(kind(&r, "MPU-part").0 >= 2 * uploads, "{prefix}: {r}");
        // The prepared files go up one PUT each, outside the report's kinds.
        let put = served.of("PUT put_obj");
        assert_eq!(
            put.count,
            u(&r["prepare"]["files_created"]) + kind(&r, "PUT").0 + kind(&r, "MPU-part").0,
            "{prefix}: {served:?}"
        );
        assert_eq!(put.failed, 0, "{prefix}: {served:?}");
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

/// With `--s3-read parallel` a checkpoint goes up as a CRT client sends it:
/// its parts `--s3-concurrency` at a time, each a request the gateway
/// takes, and the object whole at the end.
#[test]
fn parallel_mode_uploads_parts_together() {
    let Some(store) = store("rgw-parallel-upload") else {
        return;
    };
    let root = scratch("rgw-parallel-upload-trace");
    let trace = write_rows(&root, &checkpoint_rows(23));
    let before = store.served();
    let r = json_ok(&replay(
        &store,
        &store.user,
        &trace,
        &format!("s3://{BUCKET}/together"),
        &[
            "--json",
            "--s3-read",
            "parallel",
            "--s3-part-size",
            "5MiB",
            "--s3-multipart-threshold",
            "5MiB",
            "--s3-concurrency",
            "3",
        ],
    ));
    let served = store.served().since(&before);
    // 23 MiB: three 5 MiB parts together once 15 MiB are written, then the
    // last 8 MiB as two parts together at the close.
    assert_eq!(kind(&r, "MPU-part").0, 5, "{r}");
    assert_eq!(kind(&r, "MPU-complete").0, 1, "{r}");
    assert_eq!(u(&r["requests"]["max_in_flight"]), 3, "{}", r["requests"]);
    let parts = served.of("PUT put_obj");
    assert_eq!((parts.count, parts.received), (5, 23 << 20), "{served:?}");
    assert_eq!(
        store.objects(BUCKET, "together/"),
        vec![(
            "together/ranks/rank-00000/ckpt/model.pt".to_string(),
            23 << 20
        )]
    );
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
    // `#`, `~` and the letter's UTF-8 bytes are percent-encoded, as
    // object_store writes them; the space stays.
    assert!(
        objects[0].0.ends_with("ckpt/step %231 %7Efinal %C3%A9.pt"),
        "{objects:?}"
    );
    let second = json_ok(&replay(&store, &store.user, &trace, &target, &["--json"]));
    assert_eq!(second["prepare"]["paths_cleared"], 1, "{second}");
    assert_eq!(store.objects(BUCKET, "odd/"), objects);
    assert_eq!(second["write_bytes"], first["write_bytes"]);
}

/// A save written under a temporary name and renamed, as `torch.save`
/// through a temporary file does: the rename is a COPY and a DELETE, the
/// copy's source named as the gateway checks it (odd letters in both names).
#[test]
fn a_rename_is_a_copy_and_a_delete_on_the_gateway() {
    let Some(store) = store("rgw-rename") else {
        return;
    };
    let tmp = scratch("rgw-rename-trace");
    let (from, to) = ("/ckpt/step #2 ~tmp é.pt", "/ckpt/step #2 ~final é.pt");
    let mut rows = one_write(from, 5, 8192);
    rows.push((0, iorepro_format::Op::Rename, from, -1, None, 0, None));
    let trace = write_rows_renaming(&tmp, &rows, to);
    let target = format!("s3://{BUCKET}/renamed");
    let r = json_ok(&replay(&store, &store.user, &trace, &target, &["--json"]));
    assert_eq!(kind(&r, "COPY").0, 1, "{}", r["requests"]);
    assert_eq!(r["results_differed"], 0, "{r}");
    let objects = store.objects(BUCKET, "renamed/");
    assert_eq!(objects.len(), 1, "{objects:?}");
    assert!(
        objects[0].0.ends_with("ckpt/step %232 %7Efinal %C3%A9.pt"),
        "{objects:?}"
    );
    assert_eq!(objects[0].1, 8192, "{objects:?}");
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
    // Without a place to meet, processes are told so before any work.
    let mut cmd = Command::new(replay_bin());
    cmd.arg(&trace)
        .args(["--target", &format!("s3://{BUCKET}/x")])
        .env("RANK", "0")
        .env("WORLD_SIZE", "2");
    let out = store.env(&mut cmd).output().expect("iorepro-replay runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rendezvous-dir"));
    assert!(store.objects(BUCKET, "x/").is_empty());
}

/// The metrics endpoint's final figures, served while it lingers, count
/// the requests of each kind the report counts and the gateway served.
#[test]
fn the_metrics_endpoint_counts_requests_by_kind() {
    let Some(store) = store("rgw-metrics") else {
        return;
    };
    let trace = sample(TORCH_DDP);
    let addr = format!("127.0.0.1:{}", iorepro_tests::http::free_port());
    let mut cmd = Command::new(replay_bin());
    cmd.arg(&trace)
        .args(["--target", &format!("s3://{BUCKET}/metrics"), "--json"])
        .args([
            "--ranks",
            "2",
            "--metrics-addr",
            &addr,
            "--metrics-linger",
            "5s",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let before = store.served();
    let mut child = store.env(&mut cmd).spawn().expect("iorepro-replay starts");
    let mut last = String::new();
    let done = iorepro_tests::bins::wait_for(Duration::from_secs(120), || {
        last = iorepro_tests::http::get(&addr, "/metrics").unwrap_or_default();
        last.lines().any(|l| l == "iorepro_replay_finished 1.0")
    });
    if !done {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("iorepro-replay ends");
    assert!(done, "no final scrape: {last}");
    let served = store.served().since(&before);
    let r = json(&out);
    let scraped = |kind: &str| -> u64 {
        let line = format!("iorepro_replay_requests_total{{kind=\"{kind}\"}} ");
        last.lines()
            .find_map(|l| l.strip_prefix(&line))
            .unwrap_or_else(|| panic!("{line} missing:\n{last}"))
            .trim()
            .parse()
            .unwrap()
    };
    for k in ["GET", "HEAD", "PUT"] {
        assert_eq!(scraped(k), kind(&r, k).0, "{k}");
    }
    assert_eq!(scraped("GET"), served.of("GET get_obj").count, "{served:?}");
    let gets = format!(
        "iorepro_replay_request_latency_seconds_count{{kind=\"GET\"}} {}",
        scraped("GET")
    );
    assert!(last.lines().any(|l| l == gets), "{gets}:\n{last}");
    assert!(last.contains("iorepro_replay_request_retries_total 0"));
}

/// Over TLS (`https://`, the gateway's own certificate named by
/// `AWS_CA_BUNDLE`), the same request path: the checkpoint's multipart
/// uploads, parallel ranged GETs and listings land as over plain HTTP, and
/// a certificate the client cannot verify is refused before any request.
#[test]
fn the_same_requests_go_over_tls() {
    let Some(store) = store("rgw-tls") else {
        return;
    };
    let trace = sample(TORCH_DDP);
    let root = scratch("rgw-tls-replays");
    let args = ["--ranks", "4", "--json", "--checkpoint", "rank0"];
    let dir = replay_ok(&trace, &root.join("dir"), &args);
    let more = [
        "--s3-multipart-threshold",
        "5MiB",
        "--s3-part-size",
        "5MiB",
        "--s3-read",
        "parallel",
        "--s3-concurrency",
        "3",
    ];
    let tls = |cmd: &mut Command| {
        store.env_tls(cmd);
    };
    let mut cmd = Command::new(replay_bin());
    cmd.arg(&trace)
        .args(["--target", &format!("s3://{BUCKET}/tls")])
        .args(args)
        .args(more);
    tls(&mut cmd);
    let before = store.served();
    let r = json_ok(&cmd.output().expect("iorepro-replay runs"));
    let served = store.served().since(&before);
    uploads_as_served("tls", &r, &served);
    assert_eq!(
        served.of("GET get_obj").sent,
        kind(&r, "GET").1,
        "{served:?}"
    );
    assert_eq!(r["write_bytes"], dir["write_bytes"]);
    assert_eq!(
        store.objects(BUCKET, "tls/"),
        files_as_keys(&root.join("dir"), "tls"),
        "the objects are the directory replay's files"
    );
    // Without the gateway's certificate, the system's roots do not trust
    // it: refused at the first request, saying why.
    let mut cmd = Command::new(replay_bin());
    cmd.arg(&trace)
        .args(["--target", &format!("s3://{BUCKET}/untrusted")])
        .args(args);
    tls(&mut cmd);
    cmd.env_remove("AWS_CA_BUNDLE");
    let out = cmd.output().expect("iorepro-replay runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("AWS_CA_BUNDLE"), "{err}");
}
