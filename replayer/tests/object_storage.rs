//! Replays against object storage: a real S3 API server (moto's, in its own
//! process, counting what it serves) and the bundled captures of a real
//! training job replayed at 4 ranks. What lands in the bucket is checked
//! against the same replay into a directory (the objects and their sizes
//! are its files), what the server served against the report's reads, and
//! a second replay against the first; then the read modes, multipart
//! uploads, throttling, a server that stops answering, and a missing bucket.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{json, json_ok, replay_bin, replay_ok, write_rows, Row, O_WRITE_CREATE};
use iorepro_tests::bins::scratch;
use iorepro_tests::s3::{files_as_keys, S3Server};
use iorepro_tests::samples::{sample, ALL, TORCH_DDP};
use iorepro_tests::skip::cannot_run;
use iorepro_traces::Op;

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
    for name in ALL {
        let root = scratch(&format!("s3-sample-{name}"));
        let trace = sample(name);
        let args = ["--ranks", "4", "--json"];
        let dir = replay_ok(&trace, &root.join("dir"), &args);
        let prefix = format!("run/{name}");
        let before = server.served();
        let first = json_ok(&replay_s3(&server, &trace, &prefix, &args));
        let after = server.served();
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
        assert_eq!(grew(&before, &after, "body_bytes", "GET"), got, "{name}: served");
        assert_eq!(
            grew(&before, &after, "requests", "GET"),
            u(&req["GET"]["count"]),
            "{name}: GET requests the server saw"
        );
        // What the server took: the prepared data, then the replay's uploads.
        let uploaded = u(&first["prepare"]["bytes_written"])
            + u(&req["PUT"]["bytes"])
            + u(&req["MPU-part"]["bytes"]);
        assert_eq!(grew(&before, &after, "received_bytes", "PUT"), uploaded, "{name}");
        // Again on the same bucket: nothing differs, nothing is uploaded twice.
        let second = json_ok(&replay_s3(&server, &trace, &prefix, &args));
        assert_eq!(replayed(&server, &prefix, &foreign), objects, "{name}");
        for k in ["read_bytes", "write_bytes"] {
            assert_eq!(second[k], first[k], "{name}: {k}");
        }
        assert_eq!(
            second["requests"]["kinds"]["GET"]["bytes"],
            req["GET"]["bytes"],
            "{name}"
        );
        assert_eq!(u(&second["prepare"]["files_created"]), 0, "{name}: {second}");
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
