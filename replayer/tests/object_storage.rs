//! Replays against object storage: a real S3 API server (moto's, in its own
//! process, counting what it serves) and the bundled captures of a real
//! training job replayed at 4 ranks. What lands in the bucket is checked
//! against the same replay into a directory (the objects and their sizes
//! are its files), what the server served against the report's reads, and
//! a second replay against the first; then the read modes, multipart
//! uploads, throttling, a server that stops answering, a missing bucket, and
//! a key longer than S3 takes.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{
    assert_records_the_same_bytes, json, json_ok, one_write, replay_bin, replay_ok, write_rows,
    Row, O_WRITE_CREATE,
};
use iorepro_format::Op;
use iorepro_tests::bins::scratch;
use iorepro_tests::s3::{files_as_keys, S3Server};
use iorepro_tests::samples::{sample, ALL, TORCH_DDP, TORCH_DDP_SHARDS};
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

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// `after - before` of one of the server's figures.
fn grew(before: &serde_json::Value, after: &serde_json::Value, table: &str, method: &str) -> u64 {
    u(&after[table][method]) - u(&before[table][method])
}

/// The objects beneath `prefix/`, less the foreign one.
fn replayed(server: &S3Server, prefix: &str, foreign: &str) -> Vec<(String, u64)> {
    let mut all = server.objects(BUCKET, &format!("{prefix}/"));
    all.retain(|(k, _)| k != foreign);
    all
}

#[test]
fn samples_replay_into_a_bucket_as_into_a_directory() {
    let Some(server) = server(&[]) else { return };
    // An object that is not the replay's, beneath the prefix one uses.
    let foreign = format!("run/{}/foreign.bin", ALL[0]);
    server.put(BUCKET, &foreign, 1000);
    for name in ALL.into_iter().chain([TORCH_DDP_SHARDS]) {
        let root = scratch(&format!("s3-sample-{name}"));
        let trace = sample(name);
        let args = ["--ranks", "4", "--json"];
        let dir = replay_ok(&trace, &root.join("dir"), &args);
        let prefix = format!("run/{name}");
        let before = server.served();
        let lines = root.join("status.jsonl");
        let status = [
            "--status-interval",
            "100ms",
            "--status-file",
            lines.to_str().unwrap(),
        ];
        let first = json_ok(&replay_s3(
            &server,
            &trace,
            &prefix,
            &[&args[..], &status].concat(),
        ));
        let after = server.served();
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
        for k in ["read_bytes", "write_bytes"] {
            assert_eq!(first[k], dir[k], "{name}: {k}");
        }
        // The objects are the directory replay's files, at their sizes: the
        // prepared dataset and every rank's checkpoint files.
        let objects = replayed(&server, &prefix, &foreign);
        assert_eq!(
            objects,
            files_as_keys(&root.join("dir"), &prefix),
            "{name}: objects against the directory replay's files"
        );
        assert!(!objects.is_empty());
        // Read as traced, the GETs brought what the calls read, and the
        // server served exactly that.
        let req = &first["requests"]["kinds"];
        let got = u(&req["GET"]["bytes"]);
        assert_eq!(got, u(&first["read_bytes"]), "{name}");
        assert_eq!(
            grew(&before, &after, "body_bytes", "GET"),
            got,
            "{name}: served"
        );
        assert_eq!(
            grew(&before, &after, "requests", "GET"),
            u(&req["GET"]["count"]),
            "{name}: GET requests the server saw"
        );
        // What the server took: the prepared data, then the replay's uploads.
        let uploaded = u(&first["prepare"]["bytes_written"])
            + u(&req["PUT"]["bytes"])
            + u(&req["MPU-part"]["bytes"]);
        assert_eq!(
            grew(&before, &after, "received_bytes", "PUT"),
            uploaded,
            "{name}"
        );
        // Again on the same bucket: nothing differs, nothing is uploaded twice.
        let second = json_ok(&replay_s3(&server, &trace, &prefix, &args));
        assert_eq!(replayed(&server, &prefix, &foreign), objects, "{name}");
        for k in ["read_bytes", "write_bytes"] {
            assert_eq!(second[k], first[k], "{name}: {k}");
        }
        assert_eq!(
            second["requests"]["kinds"]["GET"]["bytes"], req["GET"]["bytes"],
            "{name}"
        );
        assert_eq!(
            u(&second["prepare"]["files_created"]),
            0,
            "{name}: {second}"
        );
        eprintln!(
            "{name}: {} objects; GET {} ({} B), HEAD {}, PUT {}, first byte p50 {} us",
            objects.len(),
            u(&req["GET"]["count"]),
            got,
            u(&req["HEAD"]["count"]),
            u(&req["PUT"]["count"]),
            first["requests"]["first_byte_us"]["p50"]
        );
    }
    let all = server.objects(BUCKET, "run/");
    assert!(
        all.contains(&(foreign.clone(), 1000)),
        "the foreign object was touched"
    );
}

#[test]
fn read_modes_fetch_as_a_loader_would() {
    let Some(server) = server(&[]) else { return };
    // Shards read in 1 MiB calls: where the modes differ.
    let trace = sample(TORCH_DDP_SHARDS);
    let mut seen = Vec::new();
    for mode in ["as-traced", "coalesce", "whole", "parallel"] {
        let prefix = format!("modes/{mode}");
        let before = server.served();
        let r = json_ok(&replay_s3(
            &server,
            &trace,
            &prefix,
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
        let after = server.served();
        let get = &r["requests"]["kinds"]["GET"];
        let (count, bytes) = (u(&get["count"]), u(&get["bytes"]));
        // Whatever the mode, the report's GET bytes are what the server served.
        assert_eq!(grew(&before, &after, "body_bytes", "GET"), bytes, "{mode}");
        assert_eq!(grew(&before, &after, "requests", "GET"), count, "{mode}");
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

#[test]
fn large_checkpoints_go_up_as_multipart_uploads() {
    let Some(server) = server(&[]) else { return };
    let trace = sample(TORCH_DDP);
    let root = scratch("s3-multipart");
    // One writer for the whole checkpoint, in 5 MiB parts from 5 MiB on.
    let args = ["--ranks", "4", "--json", "--checkpoint", "rank0"];
    let dir = replay_ok(&trace, &root.join("dir"), &args);
    let r = json_ok(&replay_s3(
        &server,
        &trace,
        "mpu",
        &[
            &args[..],
            &["--s3-multipart-threshold", "5MiB", "--s3-part-size", "5MiB"],
        ]
        .concat(),
    ));
    let kinds = &r["requests"]["kinds"];
    let uploads = u(&kinds["MPU-create"]["count"]);
    assert!(uploads > 0, "{r}");
    assert_eq!(u(&kinds["MPU-complete"]["count"]), uploads, "{r}");
    assert!(u(&kinds["MPU-part"]["count"]) >= 2 * uploads, "{r}");
    assert_eq!(
        server.objects(BUCKET, "mpu/"),
        files_as_keys(&root.join("dir"), "mpu")
    );
    assert_eq!(r["write_bytes"], dir["write_bytes"]);
}

/// With `--s3-read parallel` a checkpoint goes up as a CRT client sends it:
/// its parts `--s3-concurrency` at a time, each a request the server
/// counts, and the object whole at the end.
#[test]
fn parallel_mode_uploads_parts_together() {
    let Some(server) = server(&[]) else { return };
    let root = scratch("s3-parallel-upload");
    let trace = write_rows(&root, &checkpoint_rows(23));
    let before = server.served();
    let r = json_ok(&replay_s3(
        &server,
        &trace,
        "together",
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
    let after = server.served();
    let kinds = &r["requests"]["kinds"];
    // 23 MiB: three 5 MiB parts together once 15 MiB are written, then the
    // last 8 MiB as two parts together at the close.
    assert_eq!(u(&kinds["MPU-part"]["count"]), 5, "{r}");
    assert_eq!(u(&kinds["MPU-complete"]["count"]), 1, "{r}");
    assert_eq!(u(&r["requests"]["max_in_flight"]), 3, "{}", r["requests"]);
    assert_eq!(grew(&before, &after, "requests", "PUT"), 5);
    assert_eq!(grew(&before, &after, "received_bytes", "PUT"), 23 << 20);
    assert_eq!(
        server.objects(BUCKET, "together/"),
        vec![(
            "together/ranks/rank-00000/ckpt/model.pt".to_string(),
            23 << 20
        )]
    );
}

/// A checkpoint of `mib` MiB written by one rank, in 1 MiB calls.
fn checkpoint_rows(mib: i64) -> Vec<Row<'static>> {
    let path = "/ckpt/model.pt";
    let mut rows = vec![(0, Op::Open, path, 5, None, 0, Some(O_WRITE_CREATE))];
    for i in 0..mib {
        rows.push((0, Op::Write, path, 5, Some(i << 20), 1 << 20, None));
    }
    rows.push((0, Op::Close, path, 5, None, 0, None));
    rows
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

#[test]
fn a_missing_bucket_is_said_before_any_work() {
    let Some(server) = server(&[]) else { return };
    let trace = sample(TORCH_DDP);
    let start = Instant::now();
    let mut cmd = Command::new(replay_bin());
    cmd.arg(&trace)
        .args(["--target", "s3://no-such-bucket/run", "--ranks", "4"]);
    let out = server.env(&mut cmd).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bucket `no-such-bucket` does not exist"),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(30));
    let served = server.served();
    assert_eq!(
        u(&served["received_bytes"]["PUT"]),
        0,
        "nothing prepared: {served}"
    );
    // An endpoint that is not there: the same, naming it.
    let mut cmd = Command::new(replay_bin());
    cmd.arg(&trace)
        .args(["--target", "s3://bench/run", "--s3-retries", "0"]);
    let out = server
        .env(&mut cmd)
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("http://127.0.0.1:1"), "{err}");
    // No credentials anywhere (the metadata service pointed at nothing).
    let home = scratch("s3-no-credentials");
    let mut cmd = Command::new(replay_bin());
    cmd.arg(&trace).args(["--target", "s3://bench/run"]);
    let out = server
        .env(&mut cmd)
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env("HOME", &home)
        .env("AWS_METADATA_ENDPOINT", "http://127.0.0.1:1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no credentials"), "{err}");
    // The same keys from a profile file work.
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(
        home.join(".aws/credentials"),
        "[bench]\naws_access_key_id = k\naws_secret_access_key = s\n",
    )
    .unwrap();
    let mut cmd = Command::new(replay_bin());
    cmd.arg(&trace)
        .args(["--target", "s3://bench/profile", "--prepare", "only"]);
    let out = server
        .env(&mut cmd)
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env("HOME", &home)
        .env("AWS_PROFILE", "bench")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A trace path whose key would pass S3's 1,024 bytes (Linux takes paths
/// of up to 4,096) is refused with the key and the endpoint named, exit 2,
/// before any request: no object of the run is written.
#[test]
fn a_key_longer_than_s3_takes_is_refused_before_any_request() {
    let Some(server) = server(&[]) else { return };
    let tmp = scratch("s3-long-key");
    let deep: String = (0..9)
        .map(|i| format!("/{}", "d".repeat(120) + &i.to_string()))
        .collect();
    let long = format!("/ckpt{deep}/model.pt");
    let mut rows: Vec<Row<'_>> = checkpoint_rows(1);
    rows.extend(one_write("/ckpt/short.pt", 6, 4096));
    rows.extend(one_write(&long, 7, 4096));
    let trace = write_rows(&tmp, &rows);
    let before = server.served();
    let out = replay_s3(&server, &trace, "long", &["--ranks", "2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("S3 takes keys of at most 1024 bytes"), "{err}");
    assert!(
        err.contains(&format!("`long/ranks/rank-00000/ckpt{deep}/model.pt`")),
        "{err}"
    );
    assert!(
        err.contains(&server.endpoint()),
        "the endpoint is named: {err}"
    );
    let after = server.served();
    for method in ["PUT", "POST", "GET", "LIST", "HEAD"] {
        assert_eq!(
            grew(&before, &after, "requests", method),
            0,
            "no {method}: {after}"
        );
    }
    assert!(server.objects(BUCKET, "long/").is_empty());
    // The same trace with the path left out replays.
    let out = replay_s3(
        &server,
        &trace,
        "long",
        &[
            "--ranks",
            "2",
            "--exclude",
            &format!("/ckpt/{}0", "d".repeat(120)),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let keys: Vec<String> = server
        .objects(BUCKET, "long/")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert!(
        keys.contains(&"long/ranks/rank-00000/ckpt/short.pt".to_string()),
        "{keys:?}"
    );
}

#[test]
fn ranks_under_a_launcher_write_what_ranks_as_threads_write() {
    let Some(server) = server(&[]) else { return };
    let trace = sample(TORCH_DDP);
    let root = scratch("s3-launched");
    let threads = json_ok(&replay_s3(
        &server,
        &trace,
        "threads",
        &["--ranks", "4", "--json"],
    ));
    // Four processes, as torchrun starts them, meeting through files.
    let meet = root.join("meet");
    let children: Vec<_> = (0..4)
        .map(|rank| {
            let mut cmd = Command::new(replay_bin());
            cmd.arg(&trace)
                .args(["--target", &format!("s3://{BUCKET}/launched"), "--json"])
                .arg("--rendezvous-dir")
                .arg(&meet)
                .env("RANK", rank.to_string())
                .env("WORLD_SIZE", "4")
                .env("LOCAL_RANK", rank.to_string())
                .env("TORCHELASTIC_RUN_ID", "s3-test")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            server.env(&mut cmd).spawn().unwrap()
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let launched = json_ok(&outs[0]);
    assert_eq!(launched["rendezvous"]["mechanism"], "files");
    for k in ["read_bytes", "write_bytes"] {
        assert_eq!(launched[k], threads[k], "{k}");
    }
    let kinds = |r: &serde_json::Value, k: &str| u(&r["requests"]["kinds"][k]["count"]);
    for k in ["GET", "PUT", "HEAD"] {
        assert_eq!(kinds(&launched, k), kinds(&threads, k), "{k}");
    }
    let strip = |objects: Vec<(String, u64)>, prefix: &str| -> Vec<(String, u64)> {
        objects
            .into_iter()
            .map(|(k, n)| (k.trim_start_matches(prefix).to_string(), n))
            .collect()
    };
    assert_eq!(
        strip(server.objects(BUCKET, "launched/"), "launched/"),
        strip(server.objects(BUCKET, "threads/"), "threads/")
    );
    // Without a place to meet, processes are told so before any work.
    let mut cmd = Command::new(replay_bin());
    cmd.arg(&trace)
        .args(["--target", &format!("s3://{BUCKET}/x")])
        .env("RANK", "0")
        .env("WORLD_SIZE", "2");
    let out = server.env(&mut cmd).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rendezvous-dir"));
}

#[test]
fn odd_names_become_keys_a_second_replay_finds_again() {
    let Some(server) = server(&[]) else { return };
    let tmp = scratch("s3-odd-names");
    let path = "/ckpt/step #1 ~final.pt";
    let trace = write_rows(&tmp, &one_write(path, 5, 4096));
    let first = json_ok(&replay_s3(&server, &trace, "odd", &["--json"]));
    let objects = server.objects(BUCKET, "odd/");
    assert_eq!(objects.len(), 1, "{objects:?}");
    // `#` and `~` are percent-encoded, as object_store writes them; the
    // space stays.
    assert!(
        objects[0].0.ends_with("ckpt/step %231 %7Efinal.pt"),
        "{objects:?}"
    );
    assert_eq!(objects[0].1, 4096);
    // The second replay finds the first one's object where the trace
    // creates its file anew, and clears it first.
    let second = json_ok(&replay_s3(&server, &trace, "odd", &["--json"]));
    assert_eq!(u(&second["prepare"]["paths_cleared"]), 1, "{second}");
    assert_eq!(server.objects(BUCKET, "odd/"), objects);
    assert_eq!(second["write_bytes"], first["write_bytes"]);
}

#[test]
fn what_an_object_replay_did_records_as_a_trace_of_the_same_bytes() {
    let Some(server) = server(&[]) else { return };
    let root = scratch("s3-record");
    let trace = sample(TORCH_DDP);
    let ops = root.join("ops");
    let r = json_ok(&replay_s3(
        &server,
        &trace,
        "record",
        &["--json", "--record-ops", ops.to_str().unwrap()],
    ));
    assert_eq!(r["errors"], serde_json::json!([]));
    assert_records_the_same_bytes(&trace, &ops);
}

#[test]
fn the_metrics_endpoint_counts_requests_by_kind() {
    let Some(server) = server(&[]) else { return };
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
    let mut child = server.env(&mut cmd).spawn().unwrap();
    // The final figures, served while the endpoint lingers.
    let mut last = String::new();
    let done = iorepro_tests::bins::wait_for(Duration::from_secs(120), || {
        last = iorepro_tests::http::get(&addr, "/metrics").unwrap_or_default();
        last.lines().any(|l| l == "iorepro_replay_finished 1.0")
    });
    if !done {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    assert!(done, "no final scrape: {last}");
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
    for kind in ["GET", "HEAD", "PUT"] {
        assert_eq!(
            scraped(kind),
            u(&r["requests"]["kinds"][kind]["count"]),
            "{kind}"
        );
    }
    let gets = format!(
        "iorepro_replay_request_latency_seconds_count{{kind=\"GET\"}} {}",
        scraped("GET")
    );
    assert!(last.lines().any(|l| l == gets), "{gets}:\n{last}");
    assert!(last.contains("iorepro_replay_request_retries_total 0"));
}
