//! What the tests of anonymized traces need: a key file, the original's
//! figures spelled with the anonymized trace's names, and the words of a
//! trace that must not be found in its anonymized copy.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::bins::bin;
use iorepro_format::keyed_names::{Anonymizer, Key};

/// A key in a file, and the hashing it makes.
pub struct KeyFile {
    pub path: PathBuf,
    pub anonymizer: Anonymizer,
}

impl KeyFile {
    /// A key of `seed` repeated to 32 bytes, written to `path`.
    pub fn new(path: &Path, seed: &str) -> KeyFile {
        let bytes: Vec<u8> = seed.bytes().cycle().take(32).collect();
        std::fs::write(path, &bytes).unwrap();
        KeyFile {
            path: path.to_path_buf(),
            anonymizer: Anonymizer::new(&Key::from_bytes(&bytes)),
        }
    }
}

/// Runs `iorepro-trace anonymize TRACE --out OUT --key-file F` (with `extra`).
pub fn anonymize(trace: &Path, out: &Path, key: &Path, extra: &[&str]) -> Output {
    Command::new(bin("iorepro-trace"))
        .arg("anonymize")
        .arg(trace)
        .arg("--out")
        .arg(out)
        .arg("--key-file")
        .arg(key)
        .args(extra)
        .output()
        .expect("iorepro-trace runs")
}

/// The names of a trace: hosts and thread names, which the figures may
/// show beside paths.
#[derive(Debug, Default)]
pub struct Names {
    pub hosts: BTreeSet<String>,
    pub threads: BTreeSet<String>,
}

impl Names {
    pub fn of(trace: &Path) -> Names {
        let (m, rows) = crate::rows::load_with_manifest(trace);
        Names {
            hosts: m.hosts.into_iter().collect(),
            threads: rows.into_iter().map(|r| r.comm).collect(),
        }
    }
}

/// The original's JSON as the anonymized trace spells it: paths, hosts,
/// thread names, mounts and checkpoint families' rank-free names hashed
/// with `a` (object keys too).
pub fn renamed(v: &Value, a: &Anonymizer, names: &Names) -> Value {
    match v {
        Value::String(s) => Value::String(rename(s, a, names)),
        Value::Array(items) => Value::Array(items.iter().map(|x| renamed(x, a, names)).collect()),
        Value::Object(o) if o.contains_key("mount_point") && o.contains_key("source") => {
            let m = iorepro_format::mounts::Mount {
                mount_point: o["mount_point"].as_str().unwrap_or("").into(),
                fs_type: o["fs_type"].as_str().unwrap_or("").into(),
                source: o["source"].as_str().unwrap_or("").into(),
            };
            let h = a.mount(&m);
            let mut out = serde_json::Map::new();
            for (k, x) in o {
                let x = match k.as_str() {
                    // (`unknown`: no mount table, nothing to hash.)
                    "mount_point" if m.mount_point != "unknown" => {
                        Value::String(h.mount_point.clone())
                    }
                    "source" if m.source != "unknown" => Value::String(h.source.clone()),
                    _ => renamed(x, a, names),
                };
                out.insert(k.clone(), x);
            }
            Value::Object(out)
        }
        // A checkpoint family: its `name` is a file name in `dir`.
        Value::Object(o) if o.contains_key("dir") && o.contains_key("layout") => Value::Object(
            o.iter()
                .map(|(k, x)| match (k.as_str(), x) {
                    ("name", Value::String(n)) if !n.contains("{rank}") => {
                        (k.clone(), Value::String(a.component(n)))
                    }
                    _ => (k.clone(), renamed(x, a, names)),
                })
                .collect(),
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (rename(k, a, names), renamed(x, a, names)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn rename(s: &str, a: &Anonymizer, names: &Names) -> String {
    if names.hosts.contains(s) {
        a.host(s)
    } else if names.threads.contains(s) {
        a.thread(s)
    } else if s.contains("{rank}") {
        // A family's name with its rank taken out: hashed with a rank in
        // place, which the hash keeps, then taken out again.
        let h = a.component(&s.replace("{rank}", "7"));
        match h.find("7") {
            Some(at) => format!("{}{{rank}}{}", &h[..at], &h[at + 1..]),
            None => h,
        }
    } else if s.starts_with('/') || s.contains(":[") {
        a.path(s)
    } else {
        s.to_string()
    }
}

/// `v` with the arrays under `keys` sorted and, in their objects, the
/// fields `drop` left out: lists whose order (or whose members, at a cut
/// among equals) follows names.
pub fn unordered(v: &Value, keys: &[&str], drop: &[&str]) -> Value {
    match v {
        Value::Array(items) => {
            Value::Array(items.iter().map(|x| unordered(x, keys, drop)).collect())
        }
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| {
                    let x = unordered(x, keys, drop);
                    let x = match (keys.contains(&k.as_str()), x) {
                        (true, Value::Array(mut items)) => {
                            for i in items.iter_mut() {
                                if let Value::Object(f) = i {
                                    f.retain(|k, _| !drop.contains(&k.as_str()));
                                }
                            }
                            items.sort_by_key(|i| i.to_string());
                            Value::Array(items)
                        }
                        (_, x) => x,
                    };
                    (k.clone(), x)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What must not be found in an anonymized copy of `trace`: every
/// component of its paths, its host names, thread names, mount points and
/// sources, and the words of its command line, of `min` characters or
/// more. Left out: the components the anonymized trace keeps by design
/// (`proc`, `sys`, `dev`, `shm`, the kernel's `pipe:[N]` names) and
/// numbers, which are kept inside names.
pub fn words(trace: &Path, min: usize) -> BTreeSet<String> {
    let (m, rows) = crate::rows::load_with_manifest(trace);
    let mut out = BTreeSet::new();
    let mut add = |w: &str| {
        let w = w.trim_start_matches('-');
        let kept = matches!(w, "proc" | "sys" | "dev" | "shm")
            || w.contains(":[")
            || w.bytes().all(|b| b.is_ascii_digit());
        if w.len() >= min && !kept {
            out.insert(w.to_string());
        }
    };
    for r in &rows {
        for p in [&r.path, &r.path2].into_iter().flatten() {
            p.split('/').for_each(&mut add);
        }
        add(&r.comm);
    }
    m.hosts.iter().for_each(|h| add(h));
    for mount in m.mounts.iter().flatten() {
        mount.mount_point.split('/').for_each(&mut add);
        mount.source.split(['/', ':']).for_each(&mut add);
    }
    for arg in m.command.iter().flatten() {
        arg.split(['/', '=', ' ', ',', ':']).for_each(&mut add);
    }
    out
}

/// The words an anonymized trace holds whatever its names: its own
/// vocabulary (column, op, manifest key and hook names, the scheme, the
/// Parquet writer's), the extensions and file system types it keeps by
/// design, and its file names. An original name that is one of these
/// words cannot be told from them, and is not looked for.
pub fn vocabulary(dir: &Path) -> BTreeSet<String> {
    use iorepro_format::keyed_names::EXTENSIONS;
    use iorepro_format::schema::COLUMNS;
    let mut text: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    text.extend(
        iorepro_format::Op::ALL
            .iter()
            .map(|o| o.as_str().to_string()),
    );
    text.extend(EXTENSIONS.iter().map(|e| e.to_string()));
    text.push("parquet-rs version ARROW:schema iorepro.schema_version".into());
    for trace in trace_dirs(dir) {
        let m: Value =
            serde_json::from_slice(&std::fs::read(trace.join("manifest.json")).unwrap()).unwrap();
        // The keys and fixed values, without what came from names.
        let mut own = m.clone();
        own["hosts"] = Value::Null;
        own["command"] = Value::Null;
        for mount in own["mounts"].as_array_mut().into_iter().flatten() {
            mount["mount_point"] = Value::Null;
            mount["source"] = Value::Null;
        }
        text.push(own.to_string());
    }
    for f in walk(dir) {
        text.push(f.file_name().unwrap().to_string_lossy().into_owned());
    }
    text.iter()
        .flat_map(|t| t.split(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// The shortest word looked for in a segment's raw bytes: one chance match
/// of a 4-letter word in a 173 KiB segment failed a run (`"data"`, amid
/// zstd's output); at 7 letters a chance match is about 2^24 times rarer.
const RAW_SEGMENT_MIN: usize = 7;

/// Every file under `dir` (its name and its raw bytes), and, read back
/// through the trace reader (Parquet's pages decompressed), every string
/// value of the trace: none may hold a word of `words` (but for the
/// trace's own [`vocabulary`]).
///
/// A segment's raw bytes are mostly compressed pages, in which any four
/// given letters turn up by chance about once in 4 GiB: a word shorter
/// than [`RAW_SEGMENT_MIN`] is looked for there only through the decoded
/// values (where its names are), not in the compressed bytes.
pub fn assert_no_words(dir: &Path, words: &BTreeSet<String>) {
    let own = vocabulary(dir);
    let words: BTreeSet<&String> = words.iter().filter(|w| !own.contains(*w)).collect();
    assert!(!words.is_empty());
    let mut found = Vec::new();
    let mut check = |what: &str, bytes: &[u8], min: usize| {
        for w in words.iter().filter(|w| w.len() >= min) {
            if bytes.windows(w.len()).any(|x| x == w.as_bytes()) {
                found.push(format!("{w:?} in {what}"));
            }
        }
    };
    for f in walk(dir) {
        let rel = f.strip_prefix(dir).unwrap().display().to_string();
        check(&format!("the name {rel}"), rel.as_bytes(), 0);
        let segment = f.extension().is_some_and(|e| e == "parquet");
        let min = if segment { RAW_SEGMENT_MIN } else { 0 };
        check(&rel, &std::fs::read(&f).unwrap(), min);
    }
    for trace in trace_dirs(dir) {
        let (_, rows) = crate::rows::load_with_manifest(&trace);
        let mut values: BTreeSet<&str> = BTreeSet::new();
        for r in &rows {
            values.extend([r.comm.as_str(), r.op.as_str()]);
            values.extend(r.path.as_deref());
            values.extend(r.path2.as_deref());
        }
        let reader = iorepro_format::TraceReader::open(&trace).unwrap();
        let hosts = reader.manifest().hosts.join("\n");
        let text = values.into_iter().collect::<Vec<_>>().join("\n") + &hosts;
        check(
            &format!("the rows of {}", trace.display()),
            text.as_bytes(),
            0,
        );
    }
    assert!(found.is_empty(), "original names found: {found:#?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// `dir` as a trace, or its `host=NAME/` partitions.
fn trace_dirs(dir: &Path) -> Vec<PathBuf> {
    if dir.join("manifest.json").is_file() {
        return vec![dir.to_path_buf()];
    }
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("manifest.json").is_file())
        .collect()
}
