//! An anonymized trace is as good a trace as its original, names aside, and
//! holds none of its names: on the bundled samples, on a whole capture of
//! a real job (the DLIO-like benchmark under `mpirun`, with a Hydra-style
//! run directory and a log), and on a capture made with
//! `--anonymize-key-file`.
//!
//! "As good" is checked on what the tools say: `summary`, `files` (roles),
//! `phases`, `compare` and `plot` give the original's figures with its
//! names hashed; the replay's plan at twice the ranks is the same; and the
//! replay itself reads and writes the same bytes, in as many files of the
//! same sizes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use iorepro_tests::anon::{anonymize, assert_no_words, renamed, unordered, words, KeyFile, Names};
use iorepro_tests::bins::{bin, run_json, run_ok, scratch, workspace_root};
use iorepro_tests::capture::can_capture;
use iorepro_tests::samples::{sample, TORCH_DDP, TORCH_DDP_RESUME, TORCH_DDP_SHARDS};

fn trace_json(args: &[&str], trace: &Path) -> Value {
    run_json(
        Command::new(bin("iorepro-trace"))
            .arg(args[0])
            .arg(trace)
            .args(&args[1..])
            .arg("--json"),
    )
}

/// `anonymize` that must succeed.
fn anonymized(trace: &Path, out: &Path, key: &KeyFile) {
    let o = anonymize(trace, out, &key.path, &[]);
    assert!(
        o.status.success(),
        "anonymize {}: {}",
        trace.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `summary`, `files`, `phases` of the anonymized trace are the original's.
fn same_figures(orig: &Path, anon: &Path, key: &KeyFile) {
    let names = Names::of(orig);
    let a = &key.anonymizer;
    let lists = ["hosts", "top_files", "mounts", "files"];
    for cmd in ["summary", "files", "phases"] {
        let want = unordered(
            &renamed(&trace_json(&[cmd], orig), a, &names),
            &lists,
            &["path"],
        );
        let got = unordered(&trace_json(&[cmd], anon), &lists, &["path"]);
        assert_eq!(got, want, "{cmd} of {}", orig.display());
    }
    // Every file's role, calls, bytes and mount, by its hashed name.
    let by_path = |v: Value| -> BTreeMap<String, Value> {
        v["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["path"].as_str().unwrap().to_string(), f.clone()))
            .collect()
    };
    let want = by_path(renamed(&trace_json(&["files"], orig), a, &names));
    let got = by_path(trace_json(&["files"], anon));
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want, "files of {}", orig.display());
}

/// The plan at `ranks` and the replay itself: the same model, bytes,
/// calls and files.
fn same_replay(orig: &Path, anon: &Path, key: &KeyFile, ranks: u32, root: &Path) {
    let names = Names::of(orig);
    let plan = |t: &Path| {
        run_json(Command::new(bin("iorepro-replay")).arg(t).args([
            "--ranks",
            &ranks.to_string(),
            "--plan-only",
            "--json",
        ]))
    };
    let want = renamed(&plan(orig), &key.anonymizer, &names);
    assert_eq!(plan(anon), want, "the plan of {}", orig.display());
    let replay = |t: &Path, target: &Path| {
        let r = run_json(Command::new(bin("iorepro-replay")).arg(t).args([
            "--target",
            target.to_str().unwrap(),
            "--ranks",
            &ranks.to_string(),
            "--timing",
            "afap",
            "--json",
        ]));
        assert!(r["errors"].as_array().unwrap().is_empty(), "{r:#}");
        r
    };
    let (t1, t2) = (root.join("target-orig"), root.join("target-anon"));
    let (r1, r2) = (replay(orig, &t1), replay(anon, &t2));
    for k in ["ranks", "read_bytes", "write_bytes", "left_out"] {
        assert_eq!(r1[k], r2[k], "{k}");
    }
    let calls = |r: &Value| -> BTreeMap<String, (Value, Value)> {
        r["ops"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(op, s)| (op.clone(), (s["count"].clone(), s["bytes"].clone())))
            .collect()
    };
    assert_eq!(calls(&r1), calls(&r2));
    assert!(r1["read_bytes"].as_u64().unwrap() > 0);
    assert_eq!(files(&t1), files(&t2), "the files the replays left");
}

/// The files under `dir`: (depth, bytes) of each, sorted.
fn files(dir: &Path) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else {
                out.push((p.components().count(), m.len()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn anonymized_samples_give_the_originals_figures_and_replay() {
    let root = scratch("anon-samples");
    let key = KeyFile::new(&root.join("key"), "the owner's secret");
    for (name, ranks) in [(TORCH_DDP, 4), (TORCH_DDP_SHARDS, 4)] {
        let orig = sample(name);
        let anon = root.join(name);
        anonymized(&orig, &anon, &key);
        same_figures(&orig, &anon, &key);
        same_replay(
            &orig,
            &anon,
            &key,
            ranks,
            &root.join(format!("{name}-replay")),
        );
        assert_no_words(&anon, &words(&orig, 4));
        let m = iorepro_tests::rows::load_with_manifest(&anon).0;
        let a = m.anonymized.expect("the manifest says it is anonymized");
        assert_eq!(a.scheme, "hmac-sha256-components-v1");
        assert!(m.command.is_none());
    }
    // Two traces of one job compare as their originals do.
    let resume = root.join("resume");
    anonymized(&sample(TORCH_DDP_RESUME), &resume, &key);
    let compare = |a: &Path, b: &Path| {
        let mut v = run_json(
            Command::new(bin("iorepro-trace"))
                .arg("compare")
                .arg(a)
                .arg(b)
                .arg("--json"),
        );
        let o = v.as_object_mut().unwrap();
        o.remove("a");
        o.remove("b");
        v
    };
    assert_eq!(
        compare(&root.join(TORCH_DDP), &resume),
        compare(&sample(TORCH_DDP), &sample(TORCH_DDP_RESUME))
    );
    // The timeline is the same picture.
    let plot = |t: &Path, out: &Path| {
        run_ok(
            Command::new(bin("iorepro-trace"))
                .arg("plot")
                .arg(t)
                .arg("-o")
                .arg(out),
        );
        std::fs::read(out).unwrap()
    };
    let a = plot(&sample(TORCH_DDP), &root.join("orig.png"));
    let b = plot(&root.join(TORCH_DDP), &root.join("anon.png"));
    assert!(a == b, "the timelines differ");
}

#[test]
fn one_key_gives_one_set_of_names_and_another_key_another() {
    let root = scratch("anon-keys");
    let k1 = KeyFile::new(&root.join("k1"), "the owner's secret");
    let k2 = KeyFile::new(&root.join("k2"), "somebody else's key");
    let orig = sample(TORCH_DDP);
    for (out, k) in [("a", &k1), ("b", &k1), ("c", &k2)] {
        anonymized(&orig, &root.join(out), k);
    }
    let paths = |d: &str| -> Vec<Option<String>> {
        iorepro_tests::rows::load(&root.join(d))
            .into_iter()
            .map(|r| r.path)
            .collect()
    };
    let (a, b, c) = (paths("a"), paths("b"), paths("c"));
    assert_eq!(a, b);
    let hashed = |v: &[Option<String>]| -> std::collections::BTreeSet<String> {
        v.iter()
            .flatten()
            .filter(|p| p.starts_with("/root") || p.len() > 20)
            .cloned()
            .collect()
    };
    let (ha, hc) = (hashed(&a), hashed(&c));
    assert!(!ha.is_empty());
    assert!(
        ha.is_disjoint(&hc),
        "another key gave some of the same names"
    );
    // The same segment bytes, row for row.
    let seg = |d: &str| std::fs::read(root.join(d).join("seg-000000.parquet")).unwrap();
    assert_eq!(seg("a"), seg("b"));
}

#[test]
fn bad_input_is_refused_with_one_line_and_nothing_written() {
    let root = scratch("anon-bad");
    let orig = sample(TORCH_DDP);
    let key = KeyFile::new(&root.join("key"), "the owner's secret");
    std::fs::write(root.join("empty"), "").unwrap();
    std::fs::create_dir(root.join("exists")).unwrap();
    anonymized(&orig, &root.join("done"), &key);
    let cases: [(&Path, PathBuf, &Path, &str); 4] = [
        (&orig, root.join("o1"), &root.join("missing"), "missing"),
        (&orig, root.join("o2"), &root.join("empty"), "empty"),
        (
            &root.join("done"),
            root.join("o3"),
            &key.path,
            "anonymized already",
        ),
        (&orig, root.join("exists"), &key.path, "exists"),
    ];
    for (trace, out, key_file, says) in cases {
        let o = anonymize(trace, &out, key_file, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(says), "{err}");
        let named = [trace, out.as_path(), key_file]
            .iter()
            .any(|p| err.contains(&p.display().to_string()));
        assert!(named, "the error names no file: {err}");
    }
    let left: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for stray in ["o1", "o2", "o3"] {
        assert!(!left.contains(&stray.to_string()), "{left:?}");
    }
    assert!(!left.iter().any(|n| n.contains("anonymizing")), "{left:?}");
    assert_eq!(std::fs::read_dir(root.join("exists")).unwrap().count(), 0);
}

/// The DLIO-like benchmark at 2 ranks under `mpirun`, captured whole (with
/// `--anonymize-key-file` when a key is given), in a directory whose name
/// must not leak; its run directory (Hydra-style records, a log) and
/// stdout log beside its checkpoints.
fn capture_bench(root: &Path, trace: &Path, key: Option<&KeyFile>) {
    let run = root.join("projectalpha-secretmodel");
    let data = root.join("imagenette-private");
    if !data.is_dir() {
        iorepro_tests::job::make_dataset(&data, 16, 256 << 10);
    }
    let _ = std::fs::remove_dir_all(&run);
    std::fs::create_dir_all(run.join("ckpt")).unwrap();
    let mut cmd = Command::new(bin("iorepro-collect"));
    cmd.arg("--out").arg(trace);
    if let Some(k) = key {
        cmd.arg("--anonymize-key-file").arg(&k.path);
    }
    let script = workspace_root().join("tests/jobs/bench_like.py");
    cmd.args(["--", "mpirun", "--allow-run-as-root", "--oversubscribe"])
        .args(["--bind-to", "none", "-np", "2", "python3"])
        .arg(script)
        .arg("--data")
        .arg(&data)
        .arg("--ckpt")
        .arg(run.join("ckpt"))
        .arg("--out")
        .arg(run.join("out"))
        .args(["--epochs", "2", "--ckpt-mib", "4", "--compute-s", "0.002"])
        .current_dir(&run)
        .stdout(std::fs::File::create(run.join("stdout.log")).unwrap())
        .stderr(Stdio::piped());
    let out = cmd.output().expect("iorepro-collect runs");
    assert!(
        out.status.success(),
        "the job under the collector: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether mpirun is here; says why not when it is not.
fn have_mpirun() -> bool {
    let ok = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        iorepro_tests::skip::cannot_run("mpirun is not installed (apt install openmpi-bin)");
    }
    ok
}

#[test]
fn a_whole_capture_anonymized_gives_the_originals_figures_and_replay() {
    let root = scratch("anon-whole");
    if !can_capture(&root) || !have_mpirun() {
        return;
    }
    let key = KeyFile::new(&root.join("key"), "the owner's secret");
    let orig = root.join("trace");
    capture_bench(&root, &orig, None);
    let anon = root.join("shareable");
    anonymized(&orig, &anon, &key);
    same_figures(&orig, &anon, &key);
    same_replay(&orig, &anon, &key, 4, &root.join("replays"));
    let w = words(&orig, 4);
    for secret in ["projectalpha-secretmodel", "imagenette-private"] {
        assert!(w.contains(secret), "{secret} is not in the trace");
    }
    assert_no_words(&anon, &w);
    // The roles the run directory's names gave are there without them.
    let roles = trace_json(&["files"], &anon)["roles"].clone();
    for role in ["dataset", "checkpoint", "log", "output", "code", "launcher"] {
        let n = roles[role]["files"].as_u64().unwrap();
        assert!(n > 0, "no {role} file: {roles:#}");
    }
}

#[test]
fn a_capture_with_a_key_writes_no_real_name() {
    let root = scratch("anon-capture");
    if !can_capture(&root) || !have_mpirun() {
        return;
    }
    let key = KeyFile::new(&root.join("key"), "the owner's secret");
    let plain = root.join("plain");
    capture_bench(&root, &plain, None);
    let masked = root.join("masked");
    capture_bench(&root, &masked, Some(&key));
    assert_no_words(&masked, &words(&plain, 4));
    let m = iorepro_tests::rows::load_with_manifest(&masked).0;
    assert_eq!(
        m.anonymized.as_ref().map(|a| a.at.as_str()),
        Some("capture")
    );
    assert!(m.command.is_none());
    // The key gives the names `anonymize` gives the plain capture, and the
    // roles are judged alike: the job's own files, file by file.
    let anon = root.join("anonymized");
    anonymized(&plain, &anon, &key);
    let job_files = |t: &Path| -> BTreeMap<String, Value> {
        let data = key.anonymizer.path(&root.display().to_string());
        trace_json(&["files"], t)["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["path"].as_str().unwrap().starts_with(&data))
            .filter(|f| f["read_bytes"].as_u64().unwrap() + f["write_bytes"].as_u64().unwrap() > 0)
            .map(|f| (f["path"].as_str().unwrap().to_string(), f["role"].clone()))
            .collect()
    };
    let (a, b) = (job_files(&masked), job_files(&anon));
    assert!(a.len() >= 16, "{a:#?}");
    assert_eq!(a, b);
}

#[test]
fn a_capture_with_a_key_killed_midway_leaves_no_real_name() {
    let root = scratch("anon-killed");
    if !can_capture(&root) {
        return;
    }
    let key = KeyFile::new(&root.join("key"), "the owner's secret");
    let data = root.join("imagenette-private");
    iorepro_tests::job::make_dataset(&data, 8, 64 << 10);
    let trace = root.join("trace");
    let job = format!(
        "import os, time\nend = time.time() + 8\nwhile time.time() < end:\n    for f in sorted(os.listdir('{d}')):\n        open(os.path.join('{d}', f), 'rb').read()\n    time.sleep(0.01)\n",
        d = data.display()
    );
    let mut collector = Command::new(bin("iorepro-collect"))
        .arg("--out")
        .arg(&trace)
        .arg("--anonymize-key-file")
        .arg(&key.path)
        .args(["--segment-events", "200", "--", "python3", "-c", &job])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iorepro-collect runs");
    // Killed once segments are finished and another is being written.
    let seg = trace.join("seg-000001.parquet");
    assert!(iorepro_tests::bins::wait_for(
        std::time::Duration::from_secs(30),
        || seg.is_file()
    ));
    collector.kill().unwrap();
    collector.wait().unwrap();
    let mut w: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for c in data.components() {
        let c = c.as_os_str().to_string_lossy();
        if c.len() >= 4 && c != "tmp" {
            w.insert(c.into_owned());
        }
    }
    for (f, _) in iorepro_tests::job::files_under(&data) {
        w.insert(f.file_name().unwrap().to_string_lossy().into_owned());
    }
    let host = run_ok(&mut Command::new("hostname")).stdout;
    let host = String::from_utf8_lossy(&host).trim().to_string();
    if host.len() >= 4 {
        w.insert(host);
    }
    assert!(w.contains("imagenette-private"), "{w:?}");
    assert_no_words(&trace, &w);
    let rows = iorepro_tests::rows::load(&trace);
    assert!(rows.len() >= 200, "the finished segments read back");
}
