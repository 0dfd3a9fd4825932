//! Replay against object storage next to boto3, in one run against the same
//! S3 store: the same requests with the same concurrency and part size.
//! GET throughput (4 streams of 8 MiB ranged GETs), PUT throughput (4
//! multipart uploads in 8 MiB parts, the replay's written in 1 MiB calls),
//! small-request rate (4 streams of 4 KiB ranged GETs), HEAD and LIST
//! storms (4 streams probing one object, or listing one prefix, again and
//! again: a loader that stats its samples or lists its shards), a PUT and
//! DELETE storm (4 streams writing small files, then removing them), and the replay's
//! peak RSS while uploading. Against two stores: Ceph's RADOS Gateway (a
//! real store, which checks every signature; the tests' `rgw.py`), where
//! boto3 with four times the streams also gives the store's ceiling, and
//! moto's server (one Python process, the tests' `s3.py`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::host::{MIB, MIB_BYTES};
use anyhow::{bail, Context, Result};

use super::replayer::{alternate, read_trace};
use super::Ctx;

pub(super) const BUCKET: &str = "bench";
const STREAMS: usize = 4;

pub(super) struct Server {
    /// How the lines name the store.
    pub(super) name: &'static str,
    child: Child,
    endpoint: String,
    access_key: String,
    secret_key: String,
    /// The same store over TLS, where it serves it: its `https://`
    /// endpoint and the certificate that verifies it.
    tls: Option<(String, String)>,
    /// Set while the lines are measured over TLS.
    ca_bundle: Option<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        // The gateway's fixture takes its daemons with it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn start_moto(ctx: &Ctx) -> Result<Server> {
    let port = free_port()?;
    let child = Command::new("python3")
        .arg(ctx.root.join("tests/servers/s3.py"))
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the S3 test server (python3 tests/servers/s3.py)")?;
    let server = Server {
        name: "moto",
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
        access_key: "bench".into(),
        secret_key: "bench-secret".into(),
        tls: None,
        ca_bundle: None,
    };
    for _ in 0..100 {
        if make_bucket(ctx, &server)? {
            return Ok(server);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("the S3 test server did not start (moto, from `cargo xtask setup`)")
}

/// The RADOS Gateway on a one-node cluster of its own, under the bench's
/// scratch directory; its fixture prints the endpoint and keys once it
/// answers.
pub(super) fn start_rgw(ctx: &Ctx) -> Result<Server> {
    let port = free_port()?;
    let mut child = Command::new("python3")
        .arg(ctx.root.join("tests/servers/rgw.py"))
        .arg("--dir")
        .arg(ctx.dir("rgw")?)
        .arg("--port")
        .arg(port.to_string())
        .arg("--no-stdin")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the RADOS Gateway (python3 tests/servers/rgw.py)")?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("the fixture's output")?).read_line(&mut line)?;
    let v: serde_json::Value = match serde_json::from_str(&line) {
        Ok(v) => v,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the RADOS Gateway did not start (radosgw, ceph-mon, ceph-osd: `cargo xtask setup`)")
        }
    };
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    let server = Server {
        name: "RGW",
        child,
        endpoint: s("endpoint"),
        access_key: s("access_key"),
        secret_key: s("secret_key"),
        tls: Some((s("tls_endpoint"), s("ca_bundle"))).filter(|(e, _)| !e.is_empty()),
        ca_bundle: None,
    };
    if !make_bucket(ctx, &server)? {
        bail!("could not make bucket {BUCKET} in the RADOS Gateway");
    }
    Ok(server)
}

/// The bench's bucket, made as the tests make theirs
/// (`tests/servers/s3_admin.py`); false while the store does not answer.
fn make_bucket(ctx: &Ctx, server: &Server) -> Result<bool> {
    Ok(Command::new("python3")
        .arg(ctx.root.join("tests/servers/s3_admin.py"))
        .args([
            &server.endpoint,
            &server.access_key,
            &server.secret_key,
            "create-bucket",
            BUCKET,
        ])
        .output()
        .context("python3 tests/servers/s3_admin.py")?
        .status
        .success())
}

pub(super) fn aws_env<'c>(cmd: &'c mut Command, server: &Server) -> &'c mut Command {
    match &server.ca_bundle {
        Some(ca) => cmd.env("AWS_CA_BUNDLE", ca),
        None => cmd.env_remove("AWS_CA_BUNDLE"),
    };
    cmd.env("AWS_ENDPOINT_URL", &server.endpoint)
        .env("AWS_ACCESS_KEY_ID", &server.access_key)
        .env("AWS_SECRET_ACCESS_KEY", &server.secret_key)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env_remove("AWS_PROFILE")
}

fn replay(ctx: &Ctx, server: &Server, trace: &Path, args: &[&str]) -> Result<serde_json::Value> {
    let mut cmd = Command::new(ctx.bin("iorepro-replay"));
    aws_env(&mut cmd, server)
        .arg(trace)
        .args([
            "--target",
            &format!("s3://{BUCKET}/replay"),
            "--json",
            "--roles",
            "all",
        ])
        .args(args);
    if args.contains(&"only") {
        // `--prepare only` prints a line of what it made, not a report.
        super::time_cmd(&mut cmd)?;
        return Ok(serde_json::Value::Null);
    }
    super::output_json(&mut cmd, &format!("iorepro-replay {args:?}"))
}

/// The replay with `args`, its report, and the CPU time (user and system)
/// its whole process took, start-up and reading the trace included (bash's
/// `times` after it).
fn replay_cpu(
    ctx: &Ctx,
    server: &Server,
    trace: &Path,
    args: &[&str],
) -> Result<(serde_json::Value, f64)> {
    let report = ctx.dir("objects-report")?.join("report.json");
    let mut cmd = Command::new("bash");
    cmd.args(["-c", "\"$@\" > \"$REPORT\" || exit 1; times", "bash"])
        .arg(ctx.bin("iorepro-replay"))
        .arg(trace)
        .args([
            "--target",
            &format!("s3://{BUCKET}/replay"),
            "--json",
            "--roles",
            "all",
        ])
        .args(args)
        .env("REPORT", &report);
    let out = aws_env(&mut cmd, server).output()?;
    if !out.status.success() {
        bail!(
            "iorepro-replay {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    // `times`: the shell's user and system time, then its children's.
    let times = String::from_utf8_lossy(&out.stdout);
    let children = times.lines().nth(1).context("bash's times")?;
    let seconds = |t: &str| -> Option<f64> {
        let (m, s) = t.trim_end_matches('s').split_once('m')?;
        Some(m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
    };
    let cpu: f64 = children
        .split_whitespace()
        .map(|t| seconds(t).context("bash's times"))
        .sum::<Result<f64>>()?;
    Ok((serde_json::from_slice(&std::fs::read(&report)?)?, cpu))
}

/// boto3 making the requests `spec` says; its JSON answer.
fn boto3(ctx: &Ctx, server: &Server, spec: serde_json::Value) -> Result<serde_json::Value> {
    super::output_json(
        aws_env(&mut Command::new("python3"), server)
            .arg(ctx.root.join("xtask/src/bench/s3_client.py"))
            .arg(spec.to_string()),
        "the boto3 client",
    )
}

/// The requests a replay's report counts, of every kind.
fn requests_made(report: &serde_json::Value) -> Result<f64> {
    let kinds = report["requests"]["kinds"]
        .as_object()
        .context("request kinds")?;
    Ok(kinds.values().map(|k| f(&k["count"])).sum())
}

/// Requests one at a time per stream, the replay's against boto3's making
/// the same ones (`spec`): the rate of each, and the client CPU per request
/// (the replay's whole process, start-up and reading the trace included;
/// boto3's requests alone), the medians of `rounds` taken in turns. The
/// replay of `few`, the same trace with two requests a stream, gives the
/// process's start-up, so the CPU each further request costs is said too;
/// and the ranks' own CPU a request (the report's), which leaves out the
/// process's reading and planning of the trace, a cost of each traced call
/// paid before the first request.
#[allow(clippy::too_many_arguments)]
fn request_rate_line(
    ctx: &Ctx,
    server: &Server,
    rounds: usize,
    trace: &Path,
    few: &Path,
    spec: serde_json::Value,
    what: &str,
) -> Result<()> {
    let store = server.name;
    let (mut our_cpu, mut their_cpu, mut slope) = (Vec::new(), Vec::new(), Vec::new());
    let mut client = Vec::new();
    let (ours, theirs) = alternate(
        rounds,
        || {
            let (r, cpu) = replay_cpu(ctx, server, trace, &["--prepare", "skip"])?;
            let n = requests_made(&r)?;
            let (r_few, cpu_few) = replay_cpu(ctx, server, few, &["--prepare", "skip"])?;
            let n_few = requests_made(&r_few)?;
            our_cpu.push(1e6 * cpu / n);
            slope.push(1e6 * (cpu - cpu_few) / (n - n_few));
            client.push(f(&r["requests"]["client_cpu_us_per_request"]));
            Ok(n / f(&r["duration_s"]))
        },
        || {
            let b = boto3(ctx, server, spec.clone())?;
            their_cpu.push(1e6 * f(&b["cpu_seconds"]) / f(&b["requests"]));
            Ok(f(&b["requests"]) / f(&b["seconds"]))
        },
    )?;
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (our_cpu, their_cpu, slope, client) = (
        median(&mut our_cpu),
        median(&mut their_cpu),
        median(&mut slope),
        median(&mut client),
    );
    ctx.line(
        "object-storage",
        format!(
            "{store}: {what} {:.2}x boto3 ({ours:.0} vs {theirs:.0} requests/s; {:.0} us per request \
             per stream); client CPU per request {our_cpu:.0} us against boto3's {their_cpu:.0} us, \
             boto3 {:.2}x as much (the replay's whole process, boto3's requests alone); \
             {slope:.0} us a request beyond the replay's start-up; {client:.0} us a request in the \
             ranks that made them (the client's own: their threads' CPU, the kernel's work on their \
             sockets included, not the reading of the trace)",
            ours / theirs,
            1e6 * STREAMS as f64 / ours,
            their_cpu / our_cpu
        ),
    );
    Ok(())
}

/// boto3 making the requests `spec` says from `processes` processes begun
/// together, its keys dealt out among them: the bytes they moved over the
/// span from the first one's start to the last one's end, per second.
fn boto3_processes(
    ctx: &Ctx,
    server: &Server,
    spec: &serde_json::Value,
    processes: usize,
) -> Result<f64> {
    let keys = spec["keys"].as_array().context("the spec's keys")?;
    // Late enough for every interpreter to have imported boto3.
    let start_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64()
        + 3.0;
    let children: Vec<Child> = (0..processes)
        .map(|p| {
            let mut part = spec.clone();
            part["keys"] = keys.iter().skip(p).step_by(processes).cloned().collect();
            part["start_at"] = serde_json::json!(start_at);
            aws_env(&mut Command::new("python3"), server)
                .arg(ctx.root.join("xtask/src/bench/s3_client.py"))
                .arg(part.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .context("starting the boto3 client")
        })
        .collect::<Result<_>>()?;
    let (mut bytes, mut first, mut last) = (0.0, f64::MAX, f64::MIN);
    for child in children {
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!("the boto3 client failed ({})", out.status);
        }
        let b: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        bytes += f(&b["bytes"]);
        first = first.min(f(&b["started"]));
        last = last.max(f(&b["ended"]));
    }
    Ok(bytes / (last - first))
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// The prepared object of rank `r`'s file.
fn data_key(r: usize) -> String {
    format!("replay/data/rep-0000/bench/r{r}.bin")
}

pub fn run(ctx: &Ctx) -> Result<()> {
    match start_rgw(ctx) {
        Ok(mut server) => {
            against(ctx, &server)?;
            // The same small requests over TLS: one request path for both
            // schemes, so its cost per request is measured on both.
            if let Some((endpoint, ca)) = server.tls.take() {
                server.endpoint = endpoint;
                server.ca_bundle = Some(ca);
                server.name = "RGW over TLS";
                let keys: Vec<String> = (0..STREAMS).map(data_key).collect();
                small_request_lines(ctx, &server, &keys, &STORMS[1..2])?;
            }
        }
        Err(e) => ctx.line("object-storage", format!("RGW: not measured: {e}")),
    }
    against(ctx, &start_moto(ctx)?)
}

fn rounds(ctx: &Ctx) -> usize {
    if ctx.quick {
        1
    } else {
        3
    }
}

/// Every line against one store.
fn against(ctx: &Ctx, server: &Server) -> Result<()> {
    let size = if ctx.quick {
        16 * MIB_BYTES
    } else {
        64 * MIB_BYTES
    };
    let keys = throughput_lines(ctx, server, size)?;
    small_request_lines(ctx, server, &keys, &STORMS)?;
    put_line(ctx, server, size)?;
    let what = match server.name {
        "moto" => "moto's S3 API (one Python process, on this machine)",
        _ => "Ceph's RADOS Gateway 16.2 (one monitor, one OSD holding objects in memory, on this machine)",
    };
    ctx.line(
        "object-storage",
        format!(
            "{}: the store is {what}, shared by both clients; its own cost per request is in \
             both sides' figures",
            server.name
        ),
    );
    Ok(())
}

/// GET throughput against boto3's, and the store's ceiling; the keys the
/// streams read, which the small requests read again.
fn throughput_lines(ctx: &Ctx, server: &Server, size: u64) -> Result<Vec<String>> {
    let store = server.name;
    let endpoint = server.endpoint.clone();
    let rounds = rounds(ctx);

    // GET throughput: each stream reads its object in 8 MiB ranged GETs.
    let bs = 8 * MIB_BYTES;
    let trace = read_trace(
        ctx,
        &ctx.dir("objects-get")?,
        STREAMS as i32,
        size,
        bs,
        size / bs,
        "seq",
    )?;
    replay(ctx, server, &trace, &["--prepare", "only"])?;
    let keys: Vec<String> = (0..STREAMS).map(data_key).collect();
    let get_spec = serde_json::json!({
        "endpoint": endpoint, "bucket": BUCKET, "mode": "get", "keys": keys,
        "size": size, "bs": bs, "ops": size / bs,
    });
    let mut first_byte = 0.0;
    let (ours, theirs) = alternate(
        rounds,
        || {
            let r = replay(ctx, server, &trace, &["--prepare", "skip"])?;
            first_byte = f(&r["requests"]["first_byte_us"]["p50"]);
            Ok(f(&r["read_bytes"]) / f(&r["duration_s"]))
        },
        || {
            let b = boto3(ctx, server, get_spec.clone())?;
            Ok(f(&b["bytes"]) / f(&b["seconds"]))
        },
    )?;
    ctx.line(
        "object-storage",
        format!(
            "{store}: GET throughput {:.2}x boto3 ({:.1} vs {:.1} MiB/s; {STREAMS} streams of {} MiB ranged GETs; \
             {:.0} us per MiB; first byte p50 {first_byte:.0} us)",
            ours / theirs,
            ours / MIB,
            theirs / MIB,
            bs / MIB_BYTES,
            1e6 * MIB / ours
        ),
    );

    // The store's ceiling for these GETs: four times the streams, each
    // object read by four at once, from boto3 in one process (as a user's
    // loader would) and in four processes begun together (past the one
    // interpreter's lock: the most the store gives boto3 here); and the
    // replay at the same concurrency (16 ranks reading the 4 objects).
    let wide_streams = 4 * STREAMS;
    let wide: Vec<String> = (0..wide_streams).map(|i| data_key(i % STREAMS)).collect();
    let mut wide_spec = get_spec.clone();
    wide_spec["keys"] = serde_json::json!(wide);
    let (mut one_process, mut processes, mut ours_wide): (f64, f64, f64) = (0.0, 0.0, 0.0);
    let wide_ranks = wide_streams.to_string();
    for _ in 0..rounds {
        let b = boto3(ctx, server, wide_spec.clone())?;
        one_process = one_process.max(f(&b["bytes"]) / f(&b["seconds"]));
        processes = processes.max(boto3_processes(ctx, server, &wide_spec, STREAMS)?);
        let r = replay(
            ctx,
            server,
            &trace,
            &[
                "--prepare",
                "skip",
                "--ranks",
                &wide_ranks,
                "--data",
                "replicate",
                "--shared-data",
            ],
        )?;
        ours_wide = ours_wide.max(f(&r["read_bytes"]) / f(&r["duration_s"]));
    }
    let ceiling = one_process.max(processes);
    ctx.line(
        "object-storage",
        format!(
            "{store}: GET ceiling {:.1} MiB/s at {wide_streams} streams (the better of boto3 in one \
             process, {:.1} MiB/s, and in {STREAMS} processes of {STREAMS} threads begun together, \
             {:.1} MiB/s; the best of {rounds} each); the replay at {wide_streams} streams reaches \
             {:.0} % of it ({:.1} MiB/s), at {STREAMS} streams {:.0} %; boto3's {STREAMS} streams {:.0} %",
            ceiling / MIB,
            one_process / MIB,
            processes / MIB,
            100.0 * ours_wide / ceiling,
            ours_wide / MIB,
            100.0 * ours / ceiling,
            100.0 * theirs / ceiling
        ),
    );
    Ok(keys)
}

/// Metadata storms: a loader that stats its files, or lists its shards,
/// again and again (each stream reads its object once, then probes); and
/// a job's many small outputs, each a PUT, then removed, each a DELETE.
/// Each: the trace's pattern, boto3's mode, the kinds and what they are.
const STORMS: [(&str, &str, &str, &str); 3] = [
    ("stat", "head", "HEAD", "HEADs of its object"),
    (
        "list",
        "list",
        "LIST",
        "listings of the objects' prefix (4 keys, `/` the delimiter)",
    ),
    (
        "files",
        "files",
        "PUT and DELETE",
        "4 KiB files written, then as many removed",
    ),
];

/// Small requests one at a time per stream, 4 KiB ranged GETs of `keys`
/// and then `storms`, each against boto3's: rates and CPU per request.
fn small_request_lines(
    ctx: &Ctx,
    server: &Server,
    keys: &[String],
    storms: &[(&str, &str, &str, &str)],
) -> Result<()> {
    let endpoint = server.endpoint.clone();
    let rounds = rounds(ctx);
    // Small requests: 4 KiB ranged GETs, one at a time per stream.
    // As many with --quick: a rank's start (its connection, its first
    // request) spread over fewer would be most of each request's CPU.
    let small_ops = 500;
    let small = read_trace(
        ctx,
        &ctx.dir("objects-small")?,
        STREAMS as i32,
        MIB_BYTES,
        4096,
        small_ops,
        "seq",
    )?;
    // The same with two requests a stream: the replay's start-up.
    let few_ops = |pattern: &str| {
        read_trace(
            ctx,
            &ctx.dir(&format!("objects-few-{pattern}"))?,
            STREAMS as i32,
            MIB_BYTES,
            4096,
            2,
            pattern,
        )
    };
    replay(ctx, server, &small, &["--prepare", "only"])?;
    let small_spec = serde_json::json!({
        "endpoint": endpoint, "bucket": BUCKET, "mode": "get", "keys": keys,
        "size": MIB_BYTES, "bs": 4096, "ops": small_ops,
    });
    request_rate_line(
        ctx,
        server,
        rounds,
        &small,
        &few_ops("seq")?,
        small_spec,
        &format!("small requests ({STREAMS} streams of {small_ops} 4 KiB ranged GETs)"),
    )?;

    let file_keys: Vec<String> = (0..STREAMS).map(|r| format!("boto3/files/r{r}")).collect();
    for &(pattern, mode, kinds, what) in storms {
        let trace = read_trace(
            ctx,
            &ctx.dir(&format!("objects-{pattern}"))?,
            STREAMS as i32,
            MIB_BYTES,
            4096,
            small_ops,
            pattern,
        )?;
        replay(ctx, server, &trace, &["--prepare", "only"])?;
        let spec = serde_json::json!({
            "endpoint": endpoint, "bucket": BUCKET, "mode": mode,
            "keys": if mode == "files" { &file_keys[..] } else { keys },
            "ops": small_ops, "bs": 4096, "prefix": "replay/data/rep-0000/bench/",
        });
        request_rate_line(
            ctx,
            server,
            rounds,
            &trace,
            &few_ops(pattern)?,
            spec,
            &format!("{kinds} storm ({STREAMS} streams of {small_ops} {what})"),
        )?;
    }
    Ok(())
}

/// PUT throughput: multipart uploads in 8 MiB parts, the replay's from
/// 1 MiB writes; and the replay's peak memory while uploading.
fn put_line(ctx: &Ctx, server: &Server, size: u64) -> Result<()> {
    let (store, endpoint, rounds) = (server.name, server.endpoint.clone(), rounds(ctx));
    let put = read_trace(
        ctx,
        &ctx.dir("objects-put")?,
        STREAMS as i32,
        size,
        MIB_BYTES,
        size / MIB_BYTES,
        "write",
    )?;
    let put_keys: Vec<String> = (0..STREAMS)
        .map(|r| format!("boto3/put/r{r}.bin"))
        .collect();
    let put_spec = serde_json::json!({
        "endpoint": endpoint, "bucket": BUCKET, "mode": "put", "keys": put_keys,
        "size": size, "part": 8 * MIB_BYTES, "threshold": 8 * MIB_BYTES,
    });
    let mut peak = 0u64;
    let (ours, theirs) = alternate(
        rounds,
        || {
            let mut cmd = Command::new(ctx.bin("iorepro-replay"));
            aws_env(&mut cmd, server).arg(&put).args([
                "--target",
                &format!("s3://{BUCKET}/replay-put"),
                "--json",
                "--roles",
                "all",
            ]);
            let out = ctx.dir("objects-put-report")?.join("report.json");
            let file = std::fs::File::create(&out)?;
            let (_, rss) = super::run_peak_rss(&mut cmd, Stdio::from(file))?;
            peak = peak.max(rss);
            let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out)?)?;
            Ok(f(&r["write_bytes"]) / f(&r["duration_s"]))
        },
        || {
            let b = boto3(ctx, server, put_spec.clone())?;
            Ok(f(&b["bytes"]) / f(&b["seconds"]))
        },
    )?;
    ctx.line(
        "object-storage",
        format!(
            "{store}: PUT throughput {:.2}x boto3 ({:.1} vs {:.1} MiB/s; {STREAMS} multipart uploads of {} MiB \
             in 8 MiB parts; {:.0} us per MiB); replay peak RSS {:.1} MiB for {STREAMS} ranks \
             ({:.1} MiB per rank, the process's whole)",
            ours / theirs,
            ours / MIB,
            theirs / MIB,
            size / MIB_BYTES,
            1e6 * MIB / ours,
            peak as f64 / MIB,
            peak as f64 / MIB / STREAMS as f64
        ),
    );
    Ok(())
}
