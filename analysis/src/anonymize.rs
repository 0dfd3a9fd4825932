//! `iorepro-trace anonymize`: a trace rewritten so that it can be handed to
//! another team. Every path, host name and thread name becomes a keyed hash
//! ([`iorepro_format::keyed_names`]); what each name said about its file is
//! recorded beside it first ([`crate::roles::traits`]), so the roles, the
//! checkpoint families, the phases and the replay's plan are those of the
//! original. The manifest keeps the figures and drops the command line
//! (see [`iorepro_format::keyed_names::manifest`]).
//!
//! Nothing is half written: the trace is made in a hidden sibling of the
//! output directory and renamed into place when whole; on any error the
//! sibling is removed. A trace already anonymized is refused (its names
//! would be hashed twice and their traits judged on hashes).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Array, ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray};
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::roles::traits;
use iorepro_format::error::{TraceError, TraceResult};
use iorepro_format::keyed_names::manifest::carried;
use iorepro_format::keyed_names::{Anonymizer, Key};
use iorepro_format::partitions::{partition_name, partitions, PARTITION_PREFIX};
use iorepro_format::reader::TraceReader;
use iorepro_format::schema::{idx, trace_schema};
use iorepro_format::writer::{TraceWriter, WriterOptions};
use iorepro_format::Manifest;

/// What [`anonymize`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Anonymized {
    pub out: PathBuf,
    pub events: u64,
    /// Distinct names (paths and second paths) hashed.
    pub names: usize,
    pub hosts: usize,
    pub manifest: Manifest,
}

/// Writes `input` anonymized with `key` to `out`, which must not exist;
/// `keep_program` keeps the file name of the command's program.
pub fn anonymize(
    input: &Path,
    out: &Path,
    key: &Key,
    keep_program: bool,
) -> TraceResult<Anonymized> {
    if out.exists() {
        return Err(TraceError::invalid(
            out,
            "the output directory exists; choose a new one (nothing was written)",
        ));
    }
    let reader = TraceReader::open(input)?;
    if let Some(a) = &reader.manifest().anonymized {
        return Err(TraceError::invalid(
            input,
            format!("the trace is anonymized already (scheme {})", a.scheme),
        ));
    }
    let a = Anonymizer::new(key);
    let tmp = sibling(out)?;
    let made = write_all(input, &tmp, &a, keep_program);
    let (names, hosts) = match made {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
    };
    std::fs::rename(&tmp, out).map_err(|e| {
        let _ = std::fs::remove_dir_all(&tmp);
        TraceError::io(out, e)
    })?;
    let done = TraceReader::open(out)?;
    Ok(Anonymized {
        out: out.to_path_buf(),
        events: done.manifest().events,
        names,
        hosts,
        manifest: done.manifest().clone(),
    })
}

/// A hidden directory beside `out`, on its file system, for the rename.
fn sibling(out: &Path) -> TraceResult<PathBuf> {
    let name = out
        .file_name()
        .ok_or_else(|| TraceError::invalid(out, "not a directory name"))?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.is_dir() {
        return Err(TraceError::invalid(&parent, "no such directory"));
    }
    let tmp = parent.join(format!(
        ".{}.anonymizing-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::create_dir(&tmp).map_err(|e| TraceError::io(&tmp, e))?;
    Ok(tmp)
}

/// Every node's partition, or the trace as one; returns the distinct names
/// and hosts hashed.
fn write_all(input: &Path, tmp: &Path, a: &Anonymizer, keep: bool) -> TraceResult<(usize, usize)> {
    let mut names = Names::new(a);
    let Some(parts) = partitions(input)? else {
        write_one(input, tmp, &mut names, keep)?;
        return Ok((names.paths.len(), names.hosts.len()));
    };
    for part in parts {
        let name = partition_name(&part);
        let host = name.strip_prefix(PARTITION_PREFIX).unwrap_or(&name);
        let dir = tmp.join(format!("{PARTITION_PREFIX}{}", a.host(host)));
        write_one(&part, &dir, &mut names, keep)?;
    }
    Ok((names.paths.len(), names.hosts.len()))
}

fn write_one(input: &Path, out: &Path, names: &mut Names, keep: bool) -> TraceResult<()> {
    let reader = TraceReader::open(input)?;
    let src = reader.manifest().clone();
    let c = carried(names.a, &src, keep);
    let mut opts = WriterOptions::new(src.source);
    // About as many segments as the original.
    opts.segment_rows = reader
        .segments()
        .iter()
        .map(|s| s.rows as usize)
        .max()
        .unwrap_or(1)
        .max(1);
    opts.command = c.command;
    let mut w = TraceWriter::create(out, opts)?;
    for batch in reader.batches()? {
        let batch = batch?;
        let traits = batch.column(idx::PATH_TRAITS);
        if traits.null_count() < traits.len() {
            return Err(TraceError::invalid(
                input,
                "the trace's names were anonymized already (its rows carry path_traits)",
            ));
        }
        w.write_batch(&names.batch(&batch))?;
    }
    for (k, v) in c.extra {
        w.set_extra(&k, v);
    }
    if let Some(m) = c.mounts {
        w.set_mounts(m);
    }
    w.set_process_starts(c.process_starts);
    w.set_dropped_events(src.dropped_events);
    w.set_anonymized(c.anonymized);
    w.finish()?;
    Ok(())
}

/// Each distinct name hashed once, with what it said.
struct Names<'a> {
    a: &'a Anonymizer,
    paths: FxHashMap<String, (Arc<str>, i32)>,
    hosts: FxHashMap<String, String>,
    threads: FxHashMap<String, String>,
}

impl<'a> Names<'a> {
    fn new(a: &'a Anonymizer) -> Self {
        Names {
            a,
            paths: FxHashMap::default(),
            hosts: FxHashMap::default(),
            threads: FxHashMap::default(),
        }
    }

    /// A column of paths hashed, and the traits of each.
    fn paths(&mut self, col: &StringArray) -> (StringArray, Int32Array) {
        let mut hashed = Vec::with_capacity(col.len());
        let mut bits = Vec::with_capacity(col.len());
        for p in col.iter() {
            let Some(p) = p else {
                hashed.push(None);
                bits.push(None);
                continue;
            };
            let (h, t) = match self.paths.get(p) {
                Some(known) => known.clone(),
                None => {
                    let made = (Arc::from(self.a.path(p)), traits::of(p));
                    self.paths.insert(p.to_string(), made.clone());
                    made
                }
            };
            hashed.push(Some(h));
            bits.push(Some(t));
        }
        let strings: StringArray = hashed.iter().map(|h| h.as_deref()).collect();
        (strings, Int32Array::from(bits))
    }

    fn hosts(&mut self, col: &DictionaryArray<Int32Type>) -> DictionaryArray<Int32Type> {
        let values: &StringArray = col.values().as_string();
        let hashed: StringArray = values
            .iter()
            .map(|h| {
                h.map(|h| {
                    self.hosts
                        .entry(h.to_string())
                        .or_insert_with(|| self.a.host(h))
                        .clone()
                })
            })
            .collect();
        DictionaryArray::new(col.keys().clone(), Arc::new(hashed))
    }

    fn threads(&mut self, col: &StringArray) -> StringArray {
        col.iter()
            .map(|c| {
                c.map(|c| {
                    self.threads
                        .entry(c.to_string())
                        .or_insert_with(|| self.a.thread(c))
                        .clone()
                })
            })
            .collect()
    }

    /// A canonical batch with its names hashed and their traits beside them.
    fn batch(&mut self, b: &RecordBatch) -> RecordBatch {
        let mut cols: Vec<ArrayRef> = b.columns().to_vec();
        let (path, path_traits) = self.paths(b.column(idx::PATH).as_string());
        let (path2, path2_traits) = self.paths(b.column(idx::PATH2).as_string());
        cols[idx::HOST] = Arc::new(self.hosts(b.column(idx::HOST).as_dictionary()));
        cols[idx::COMM] = Arc::new(self.threads(b.column(idx::COMM).as_string()));
        cols[idx::PATH] = Arc::new(path);
        cols[idx::PATH2] = Arc::new(path2);
        cols[idx::PATH_TRAITS] = Arc::new(path_traits);
        cols[idx::PATH2_TRAITS] = Arc::new(path2_traits);
        RecordBatch::try_new(trace_schema(), cols).expect("the canonical schema, column for column")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::FileRoles;
    use iorepro_format::event::EventRow;
    use iorepro_format::schema::Op;
    use iorepro_format::Source;

    /// A job whose files get their roles from their names: code, a
    /// launcher's session files, a Hydra record, a log, /etc, a checkpoint
    /// written under a temporary name and renamed into place, a
    /// checkpoint read back by its name alone.
    fn job(dir: &Path) {
        let wc = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
        let rows: [(Op, &str, i64, i32, Option<&str>); 12] = [
            (
                Op::Open,
                "/home/alice/venv/lib/python3.11/site-packages/torch/__init__.py",
                3,
                0,
                None,
            ),
            (
                Op::Read,
                "/home/alice/venv/lib/python3.11/site-packages/torch/__init__.py",
                4096,
                0,
                None,
            ),
            (
                Op::Open,
                "/tmp/ompi.node7.0/pid.42/contact.txt",
                3,
                wc,
                None,
            ),
            (
                Op::Write,
                "/tmp/ompi.node7.0/pid.42/contact.txt",
                64,
                0,
                None,
            ),
            (
                Op::Write,
                "/home/alice/run/.hydra/config.yaml",
                900,
                wc,
                None,
            ),
            (Op::Write, "/home/alice/run/train.log", 80, 0, None),
            (Op::Read, "/etc/passwd", 1000, 0, None),
            (
                Op::Read,
                "/data/alice/imagenette/train/n0144/img_0001.JPEG",
                1 << 20,
                0,
                None,
            ),
            (Op::Write, "/home/alice/ckpt/latest.tmp", 8 << 20, 0, None),
            (
                Op::Rename,
                "/home/alice/ckpt/latest.tmp",
                0,
                0,
                Some("/home/alice/ckpt/best_checkpoint"),
            ),
            (
                Op::Read,
                "/home/alice/pretrained/ckpt-epoch3",
                4 << 20,
                0,
                None,
            ),
            (
                Op::Stat,
                "/home/alice/run/./outputs/../train.log",
                0,
                0,
                None,
            ),
        ];
        let mut w = TraceWriter::create(dir, WriterOptions::new(Source::Synth)).unwrap();
        for (i, (op, path, ret, flags, path2)) in rows.into_iter().enumerate() {
            w.push(&EventRow {
                path: Some(path),
                fd: Some(3),
                ret,
                flags: Some(flags),
                path2,
                pid: 7,
                tid: 7,
                rank: Some(0),
                ..EventRow::single(
                    1_000_000_000 + i as i64 * 1_000_000,
                    "node7",
                    "alice-train",
                    op,
                )
            })
            .unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn roles_of_an_anonymized_trace_are_the_originals() {
        let tmp = tempfile::tempdir().unwrap();
        let (orig, anon) = (tmp.path().join("orig"), tmp.path().join("anon"));
        job(&orig);
        let key = Key::from_bytes(b"a key of sixteen bytes or more");
        let r = anonymize(&orig, &anon, &key, false).unwrap();
        assert_eq!(r.hosts, 1);
        let a = Anonymizer::new(&key);
        let was = FileRoles::compute(&TraceReader::open(&orig).unwrap()).unwrap();
        let now = FileRoles::compute(&TraceReader::open(&anon).unwrap()).unwrap();
        assert_eq!(was.len(), now.len());
        for f in was.files() {
            let g = now
                .get(&a.path(&f.path))
                .unwrap_or_else(|| panic!("{}", f.path));
            assert_eq!(
                (g.role, g.calls, g.directory),
                (f.role, f.calls, f.directory),
                "{}",
                f.path
            );
        }
        assert_eq!(was.totals(), now.totals());
        // The names alone would not have said it.
        let hashed = a.path("/home/alice/run/.hydra/config.yaml");
        assert!(!hashed.contains("hydra"));
        let m = r.manifest.anonymized.unwrap();
        assert_eq!(m.at, "trace");
        assert!(r.manifest.hosts.iter().all(|h| h != "node7"));
        // Once is enough.
        let again = anonymize(&anon, &tmp.path().join("twice"), &key, false).unwrap_err();
        assert!(again.to_string().contains("anonymized already"), "{again}");
        assert!(!tmp.path().join("twice").exists());
    }
}
