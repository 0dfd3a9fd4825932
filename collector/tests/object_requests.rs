//! A job's own object-storage requests, captured with nothing injected into
//! it, against a real S3 store that says what it served: Ceph's RADOS
//! Gateway (`iorepro_tests::rgw`), over plain HTTP and over TLS (where the
//! uprobes on OpenSSL see the requests), through boto3 and through s3fs
//! (aiobotocore on aiohttp's asyncio sockets). The job
//! (`tests/jobs/s3_loader.py`) is a PyTorch DataLoader with worker
//! processes reading samples (whole and in ranged halves), after a listing
//! and a HEAD, then a checkpoint uploaded in parts (`upload_file`,
//! `put_file`), a record put and an old one deleted. The gateway's log of
//! operations is the ground truth: every request it served, by method and
//! operation, with its status and body bytes each way, must be a request
//! row of the trace, no more and no fewer, and each row must carry the
//! job's rank and the process that made it.
//!
//! Then the trace is replayed into another bucket of the gateway, at the
//! job's one rank and at two, and into a directory: the gateway's log of
//! the replay holds the job's requests again, kind for kind and byte for
//! byte, and at two ranks the dataset's GETs and the checkpoint's parts
//! are the job's, dealt between the ranks, while what each rank does on
//! its own (the listing, the record, the delete) is made by both.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::*;
use iorepro_analysis::requests_by_object::RequestTotals;
use iorepro_analysis::roles::Role;
use iorepro_analysis::summary::Summary;
use iorepro_format::{Events, Op, TraceReader};
use iorepro_tests::bins::{bin, run_ok, workspace_root};
use iorepro_tests::rgw::{RgwStore, Served, Tally};
use iorepro_tests::skip::cannot_run;

const BUCKET: &str = "loader";
/// The bucket the job's trace is replayed into.
const REPLAYED: &str = "replayed";

/// One request row, as the test needs it.
#[derive(Debug)]
struct Request {
    pid: i32,
    rank: Option<i32>,
    method: String,
    url: String,
    offset: Option<i64>,
    size: Option<i64>,
    status: Option<i32>,
    first_byte_ns: Option<i64>,
    dur_ns: i64,
    sent: i64,
    received: i64,
}

fn requests(trace: &Path) -> Vec<Request> {
    let reader = TraceReader::open(trace).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    for batch in reader.events().unwrap() {
        let ev = batch.unwrap();
        for (i, op) in ev.ops().into_iter().enumerate() {
            if op != Op::Request {
                continue;
            }
            let x = ev.exchange_at(i).expect("a request row has its exchange");
            out.push(Request {
                pid: ev.pid().value(i),
                rank: Events::opt_i32(ev.rank(), i),
                method: x.method.to_string(),
                url: ev.path_at(i).unwrap_or_default().to_string(),
                offset: Events::opt_i64(ev.offset(), i),
                size: Events::opt_i64(ev.size(), i),
                status: x.status,
                first_byte_ns: x.first_byte_ns,
                dur_ns: ev.dur_ns().value(i),
                sent: x.sent,
                received: x.received,
            });
        }
    }
    out
}

/// The gateway's name for what a request row did (`GET get_obj`, ...).
fn operation(r: &Request) -> String {
    let rest = r.url.splitn(4, '/').nth(3).unwrap_or_default();
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let has_key = path.split_once('/').is_some_and(|(_, k)| !k.is_empty());
    let op = match (r.method.as_str(), has_key) {
        ("GET", true) => "get_obj",
        ("GET", false) => "list_bucket",
        ("HEAD", true) => "get_obj",
        ("HEAD", false) => "stat_bucket",
        ("PUT", true) => "put_obj",
        ("POST", _) if query.contains("uploadId") => "complete_multipart",
        ("POST", _) if query.contains("uploads") => "init_multipart",
        ("DELETE", true) => "delete_obj",
        _ => "other",
    };
    format!("{} {op}", r.method)
}

/// The rows tallied as the gateway tallies what it served.
fn tally(rows: &[Request]) -> Served {
    let mut by: BTreeMap<String, Tally> = BTreeMap::new();
    for r in rows {
        let t = by.entry(operation(r)).or_default();
        t.count += 1;
        t.failed += u64::from(r.status.is_some_and(|s| s >= 400));
        t.sent += r.received as u64;
        t.received += r.sent as u64;
    }
    Served(by)
}

/// The gateway with the job's bucket and the one replays go to; `None`
/// (said why) where this machine cannot start one.
fn store(name: &str) -> Option<RgwStore> {
    match RgwStore::start(name) {
        Ok(store) => {
            store.create_bucket(BUCKET);
            store.create_bucket(REPLAYED);
            Some(store)
        }
        Err(e) => {
            cannot_run(e);
            None
        }
    }
}

/// Whether Python can import `module`.
fn importable(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .status()
        .is_ok_and(|s| s.success())
}

fn job(store: &RgwStore, tls: bool, args: &[&str]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg(workspace_root().join("tests/jobs/s3_loader.py"))
        .args(["--bucket", BUCKET, "--prefix", "run1"])
        .args(args);
    if tls {
        store.env_tls(&mut cmd);
    } else {
        store.env(&mut cmd);
    }
    cmd
}

#[test]
fn a_loader_s_requests_are_the_ones_the_gateway_served_by_boto3_and_s3fs_plain_and_over_tls() {
    if !can_trace() {
        return;
    }
    let Some(store) = store("collector-requests") else {
        return;
    };
    if !importable("s3fs") {
        return cannot_run("s3fs is not installed (cargo xtask setup installs it)");
    }
    for client in ["boto3", "s3fs"] {
        for tls in [false, true] {
            eprintln!("{client}, over TLS: {tls}");
            capture_and_compare(&store, client, tls);
        }
    }
}

/// Captures the job (over TLS or not) and holds its trace against what
/// the gateway served meanwhile.
fn capture_and_compare(store: &RgwStore, client: &str, tls: bool) {
    let staged = job(store, tls, &["--stage"])
        .output()
        .expect("python3 runs");
    assert!(
        staged.status.success(),
        "staging: {}",
        String::from_utf8_lossy(&staged.stderr)
    );
    let dir = scratch();
    let trace = dir.path().join("trace");
    let inner = job(
        store,
        tls,
        &["--epochs", "2", "--workers", "2", "--client", client],
    );
    let (asked, served) = capture(store, &trace, &inner, Some("1"));
    let (manifest, _) = read_rows(&trace);
    assert_eq!(
        missing_capability(&manifest, "tls_requests"),
        None,
        "boto3's TLS is OpenSSL's: nothing unseen"
    );
    let rows = requests(&trace);
    let scheme = if tls { "https://" } else { "http://" };
    assert!(rows.iter().all(|r| r.url.starts_with(scheme)), "{rows:#?}");
    assert_traced_as_served(&rows, &served);
    let completes: Vec<&Request> = rows
        .iter()
        .filter(|r| operation(r) == "POST complete_multipart")
        .collect();

    // What the job says it asked, the same way round.
    let u = |k: &str| asked[k].as_u64().unwrap();
    let gets = served.of("GET get_obj");
    assert_eq!((gets.count, gets.sent), (u("get"), u("get_bytes")));
    assert_eq!(served.of("PUT put_obj").count, u("parts") + u("put"));
    assert_eq!(served.of("POST init_multipart").count, 1);
    assert_eq!(served.of("POST complete_multipart").count, 1);

    // Each row: the job's rank; the samples read by the loader's workers;
    // a range where one was asked; the first byte before the last.
    let job_pid = rows
        .iter()
        .find(|r| r.method == "HEAD")
        .expect("the HEAD")
        .pid;
    assert!(rows.iter().all(|r| r.rank == Some(1)), "{rows:#?}");
    let readers: std::collections::BTreeSet<i32> = rows
        .iter()
        .filter(|r| operation(r) == "GET get_obj")
        .map(|r| r.pid)
        .collect();
    // Two workers an epoch (not persistent), two epochs.
    assert_eq!(
        readers.len(),
        4,
        "the loader's workers read the samples: {readers:?}"
    );
    assert!(!readers.contains(&job_pid));
    let ranged: Vec<&Request> = rows.iter().filter(|r| r.offset.is_some()).collect();
    assert_eq!(
        ranged.len() as u64,
        2 * 2 * 8,
        "two halves of 8 samples, twice"
    );
    for r in &ranged {
        assert_eq!(r.status, Some(206));
        assert!(matches!(r.offset, Some(0) | Some(131072)), "{r:?}");
        assert_eq!((r.size, r.received), (Some(131072), 131072));
    }
    for r in &rows {
        let first = r.first_byte_ns.expect("every request was answered");
        assert!(first > 0 && first <= r.dur_ns, "{r:?}");
    }

    // The analysis: the requests by method, the objects by role, and the
    // URLs no files of the file tables.
    let reader = TraceReader::open(&trace).unwrap();
    let totals = RequestTotals::compute(&reader).unwrap().expect("requests");
    assert_eq!(totals.requests, rows.len() as u64);
    let get = &totals.methods["GET"];
    assert_eq!(get.count, gets.count + served.of("GET list_bucket").count);
    assert_eq!(
        get.received_bytes,
        gets.sent + served.of("GET list_bucket").sent
    );
    let role = |r: Role| totals.roles.get(&r).copied().unwrap_or_default();
    assert_eq!(role(Role::Dataset), (16, u("get_bytes"), 0));
    assert_eq!(role(Role::Checkpoint).0, 1);
    // Its parts, and the list of them that completed the upload.
    let listed_parts: u64 = completes.iter().map(|r| r.sent as u64).sum();
    assert_eq!(role(Role::Checkpoint).2, u("part_bytes") + listed_parts);
    assert_eq!(role(Role::Output), (1, 0, u("put_bytes")));
    let summary = Summary::compute(&reader).unwrap();
    assert!(summary
        .top_files
        .iter()
        .all(|f| !f.path.starts_with("http")));
    assert!(summary.render().contains("object requests"));
    // `files` lists every object beside the files, each with its role.
    let files = Command::new(bin("iorepro-trace"))
        .arg("files")
        .arg(&trace)
        .arg("--json")
        .output()
        .expect("iorepro-trace runs");
    let files: serde_json::Value = serde_json::from_slice(&files.stdout).expect("--json");
    let objects = files["objects"].as_array().expect("objects listed");
    assert_eq!(objects.len() as u64, totals.objects);
    let datasets = objects.iter().filter(|o| o["role"] == "dataset").count();
    assert_eq!(datasets, 16, "{objects:#?}");
    // The phases hold the requests' bytes beside the files': a bucket's
    // reads and uploads are load, reading and checkpoints as files' are.
    let phases = &summary.overview.phases;
    let op_bytes = |op: &str| summary.ops.get(op).map_or(0, |s| s.bytes);
    let phase_read: u64 = phases.iter().map(|p| p.read_bytes).sum();
    let phase_written: u64 = phases.iter().map(|p| p.write_bytes).sum();
    assert_eq!(phase_read, op_bytes("read") + totals.read_bytes);
    assert_eq!(phase_written, op_bytes("write") + totals.written_bytes);

    if !tls {
        replay_and_compare(store, &trace, &served, &asked, client);
    }
}

/// Runs `job` under the collector (as `rank`, where given) into `trace`:
/// what the job says it asked (its last JSON line), and what the gateway
/// served meanwhile.
fn capture(
    store: &RgwStore,
    trace: &Path,
    job: &Command,
    rank: Option<&str>,
) -> (serde_json::Value, Served) {
    let before = store.served();
    let mut cmd = collector();
    cmd.arg("--out").arg(trace).arg("--");
    cmd.arg(job.get_program()).args(job.get_args());
    for (k, v) in job.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    if let Some(rank) = rank {
        cmd.env("RANK", rank);
    }
    let out = cmd.output().expect("iorepro-collect runs");
    assert!(
        out.status.success(),
        "collector: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The whole output as one document (a replay's report), or else its
    // last JSON line (a job's summary after its other output).
    let asked: serde_json::Value = serde_json::from_slice(&out.stdout)
        .or_else(|_| {
            serde_json::from_slice(
                out.stdout
                    .split(|&b| b == b'\n')
                    .rfind(|l| l.starts_with(b"{"))
                    .expect("the job's summary line"),
            )
        })
        .unwrap();
    (asked, store.served().since(&before))
}

/// The trace's request rows, tallied as the gateway tallies, are what it
/// served.
fn assert_traced_as_served(rows: &[Request], served: &Served) {
    let mut traced = tally(rows);
    // The gateway logs no bytes received for a multipart upload's
    // completion, whose body (the list of parts) it reads all the same:
    // the row's bytes sent are its Content-Length, and the comparison
    // leaves them out.
    let completes: Vec<&Request> = rows
        .iter()
        .filter(|r| operation(r) == "POST complete_multipart")
        .collect();
    for r in &completes {
        assert!(r.sent > 0 && Some(r.sent) == r.size, "{r:?}");
    }
    if let Some(t) = traced.0.get_mut("POST complete_multipart") {
        t.received = 0;
    }
    eprintln!("served: {served:#?}\ntraced: {traced:#?}");
    assert_eq!(
        &traced, served,
        "the trace's requests against the gateway's log"
    );
}

/// `iorepro-replay TRACE --target TARGET --json ARGS` against the store:
/// its standard output. The job's local copy of its checkpoint (the file
/// `upload_file` reads) is no request: left out, so that the gateway sees
/// the requests alone.
fn replay_into(store: &RgwStore, trace: &Path, target: &str, args: &[&str]) -> Vec<u8> {
    let mut cmd = Command::new(bin("iorepro-replay"));
    cmd.arg(trace)
        .args(["--target", target, "--exclude", "/tmp", "--json"])
        .args(args);
    run_ok(store.env(&mut cmd)).stdout
}

/// Replays `trace` into the gateway at one rank and at two, and into a
/// directory, and holds what the gateway served each replay against what
/// it `served` the job (`asked`: the job's own count).
fn replay_and_compare(
    store: &RgwStore,
    trace: &Path,
    served: &Served,
    asked: &serde_json::Value,
    client: &str,
) {
    let u = |k: &str| asked[k].as_u64().unwrap();
    let replay = |target: &str, args: &[&str]| replay_into(store, trace, target, args);
    let report =
        |stdout: Vec<u8>| -> serde_json::Value { serde_json::from_slice(&stdout).expect("--json") };
    for ranks in ["1", "2"] {
        let target = format!("s3://{REPLAYED}/{client}-{ranks}");
        // The dataset staged first, so that the log holds the replay alone.
        replay(&target, &["--ranks", ranks, "--prepare", "only"]);
        let before = store.served();
        let report = report(replay(&target, &["--ranks", ranks, "--prepare", "skip"]));
        let replayed = store.served().since(&before);
        eprintln!("{client} at {ranks} rank(s): {replayed:#?}");
        let both = ranks == "2";
        // Made by every rank at two: what each does on its own.
        let each = |n: u64| if both { 2 * n } else { n };
        let job = |request: &str| served.of(request).count;
        for (request, want) in [
            // The dataset's reads, dealt between the ranks, once each.
            ("GET get_obj", job("GET get_obj")),
            ("HEAD get_obj", job("HEAD get_obj")),
            // The checkpoint, by rank 0 alone, in the job's parts.
            ("POST init_multipart", 1),
            ("POST complete_multipart", 1),
            ("PUT put_obj", u("parts") + each(u("put"))),
            ("DELETE delete_obj", each(job("DELETE delete_obj"))),
            // The replay's own look at the target, then the job's listing.
            ("GET list_bucket", 1 + each(job("GET list_bucket"))),
        ] {
            assert_eq!(replayed.of(request).count, want, "{request}");
        }
        assert_eq!(replayed.of("GET get_obj").sent, u("get_bytes"));
        assert_eq!(
            replayed.of("PUT put_obj").received,
            u("part_bytes") + each(u("put_bytes"))
        );
        assert_eq!(replayed.total().failed, 0, "{replayed:#?}");
        let kinds = &report["requests"]["kinds"];
        assert_eq!(kinds["GET"]["count"], u("get"), "{kinds:#}");
        assert_eq!(kinds["MPU-part"]["count"], u("parts"), "{kinds:#}");
    }
    // Into a directory: an object is a file beneath it, read and written.
    let dir = scratch();
    let report = report(replay(dir.path().to_str().unwrap(), &[]));
    let ops = &report["ops"];
    assert_eq!(ops["read"]["bytes"], u("get_bytes"), "{ops:#}");
    // The opens, stats and listings the requests stand for are no load on
    // a file system's name space: the job made none of its own here.
    assert!(ops["open"]["count"].as_u64() >= Some(u("get")), "{ops:#}");
    assert_eq!(report["metadata_ops"], 0, "{ops:#}");
    assert_eq!(
        ops["write"]["bytes"],
        u("part_bytes") + u("put_bytes"),
        "{ops:#}"
    );
    let checkpoint = dir
        .path()
        .join(format!("ranks/rank-00000/{BUCKET}/run1/ckpt/model.bin"));
    let size = std::fs::metadata(&checkpoint).map(|m| m.len());
    assert_eq!(size.ok(), Some(u("part_bytes")), "{}", checkpoint.display());
}

/// The S3 connector for PyTorch (the AWS Common Runtime's HTTP client, in
/// the DataLoader's worker processes) over plain HTTP: its listing, its
/// GETs (each asking for a part-sized range, answered with the sample) and
/// its checkpoint's upload are the trace's rows, request for request, and
/// replayed they ask the gateway for the same again. (Over https its TLS
/// is its own, not OpenSSL's: such a client is named in the manifest, as
/// the next test shows.)
#[test]
fn the_s3_connector_for_pytorch_s_requests_are_the_ones_the_gateway_served() {
    if !can_trace() {
        return;
    }
    if !importable("s3torchconnector") {
        return cannot_run("s3torchconnector is not installed (cargo xtask setup installs it)");
    }
    let Some(store) = store("collector-connector") else {
        return;
    };
    let staged = job(&store, false, &["--stage"])
        .output()
        .expect("python3 runs");
    assert!(staged.status.success());
    let mut connector = Command::new("python3");
    connector
        .arg(workspace_root().join("tests/jobs/s3_connector.py"))
        .args(["--bucket", BUCKET, "--prefix", "run1"]);
    store.env(&mut connector);
    let dir = scratch();
    let trace = dir.path().join("trace");
    let (asked, served) = capture(&store, &trace, &connector, Some("1"));
    eprintln!("the job: {asked}");
    assert_eq!(asked["samples"], 16);
    let rows = requests(&trace);
    assert_traced_as_served(&rows, &served);
    let gets: Vec<&Request> = rows
        .iter()
        .filter(|r| operation(r) == "GET get_obj")
        .collect();
    assert_eq!(gets.len(), 16);
    assert_eq!(
        gets.iter().map(|r| r.received as u64).sum::<u64>(),
        asked["bytes"].as_u64().unwrap()
    );
    // Its workers read, in processes of their own.
    let readers: std::collections::BTreeSet<i32> = gets.iter().map(|r| r.pid).collect();
    assert_eq!(readers.len(), 2, "{readers:?}");
    assert_eq!(served.of("POST init_multipart").count, 1);

    let target = format!("s3://{REPLAYED}/connector");
    replay_into(&store, &trace, &target, &["--prepare", "only"]);
    let before = store.served();
    replay_into(&store, &trace, &target, &["--prepare", "skip"]);
    let replayed = store.served().since(&before);
    eprintln!("replayed: {replayed:#?}");
    for (request, want) in [
        ("GET get_obj", 16),
        ("PUT put_obj", served.of("PUT put_obj").count),
        ("POST init_multipart", 1),
        ("POST complete_multipart", 1),
        // The replay's own look at the target, then the job's listing.
        ("GET list_bucket", 1 + served.of("GET list_bucket").count),
    ] {
        assert_eq!(replayed.of(request).count, want, "{request}");
    }
    assert_eq!(
        replayed.of("GET get_obj").sent,
        served.of("GET get_obj").sent
    );
    assert_eq!(
        replayed.of("PUT put_obj").received,
        served.of("PUT put_obj").received
    );
}

/// A client in Rust (the replay's own, `iorepro-objects`), which sends a
/// small request's head and body in one write and a part's 5 MiB body in a
/// write after its head: its requests, made by a replay of a bundled
/// capture into the gateway, are the trace's rows, request for request,
/// parts and all.
#[test]
fn a_replay_s_own_requests_are_the_ones_the_gateway_served() {
    if !can_trace() {
        return;
    }
    let Some(store) = store("collector-self") else {
        return;
    };
    let sample = iorepro_tests::samples::sample(iorepro_tests::samples::TORCH_DDP);
    // Parts of 5 MiB: the sample's 5 MB shards go up in two parts each.
    let parts = ["--s3-multipart-threshold", "5MiB", "--s3-part-size", "5MiB"];
    let target = format!("s3://{REPLAYED}/self");
    let mut prepare = Command::new(bin("iorepro-replay"));
    prepare
        .arg(&sample)
        .args(["--target", &target, "--prepare", "only"])
        .args(parts);
    run_ok(store.env(&mut prepare));
    let mut replay = Command::new(bin("iorepro-replay"));
    replay
        .arg(&sample)
        .args(["--target", &target, "--prepare", "skip", "--json"])
        .args(parts);
    store.env(&mut replay);
    let dir = scratch();
    let trace = dir.path().join("trace");
    let (report, served) = capture(&store, &trace, &replay, None);
    let rows = requests(&trace);
    assert_traced_as_served(&rows, &served);
    let kinds = &report["requests"]["kinds"];
    let parts = kinds["MPU-part"]["count"].as_u64().unwrap_or(0);
    assert!(parts > 0, "the replay uploaded in parts: {kinds:#}");
    let traced_parts = rows
        .iter()
        .filter(|r| r.method == "PUT" && r.url.contains("partNumber="))
        .count() as u64;
    assert_eq!(traced_parts, parts);
    assert_eq!(
        served.of("POST init_multipart").count,
        kinds["MPU-create"]["count"]
    );
}

/// A process that speaks TLS through no OpenSSL (here, a handshake record
/// written on a plain socket, as a client with TLS linked in writes one)
/// is named in the manifest's `capabilities.missing`, with its TLS
/// connections: its requests cannot be in the trace.
#[test]
fn a_process_whose_tls_is_not_openssl_s_is_named_in_the_manifest() {
    if !can_trace() {
        return;
    }
    const JOB: &str = r#"
import socket
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(4)
for _ in range(2):
    c = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    # A ClientHello's record header, then a little of its body.
    c.sendall(bytes([0x16, 0x03, 0x01, 0x00, 0x2e, 0x01, 0x00, 0x00, 0x2a, 0x03, 0x03]))
    peer.recv(64)
    c.close()
    peer.close()
"#;
    let dir = scratch();
    let trace = dir.path().join("trace");
    let out = collect(&trace, &[], &["python3", "-c", JOB]);
    assert!(out.status.success());
    let (manifest, _) = read_rows(&trace);
    let why = missing_capability(&manifest, "tls_requests")
        .expect("the process with unseen TLS is named");
    assert!(
        why.contains("python3") && why.contains("2 TLS connection"),
        "{why}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("requests over TLS not captured"),
        "{stderr}"
    );
}
