//! Repair of a damaged trace: [`repair`] rebuilds `manifest.json` from the
//! segments that are complete and readable. A segment that cannot be read
//! (no footer, corrupt pages, a missing column) and an unfinished `.partial`
//! one are set aside under a `.corrupt` name, never deleted; a `.partial`
//! whose footer did get written is adopted. What the old manifest knew and
//! the segments cannot tell (source, command, dropped events, extra keys) is
//! kept when it can still be parsed. Nothing is changed until every file has
//! been checked, and the new manifest is written atomically.

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::columns::Events;
use crate::error::{TraceError, TraceResult};
use crate::manifest::{Manifest, Source, MANIFEST_FILE};
use crate::partitions::partitions;
use crate::reader::{ReadShape, SegmentBatches, TraceReader};
use crate::schema::SCHEMA_VERSION;

/// A segment's file name ends so; while its writer has it open, so.
pub(crate) const SEGMENT_SUFFIX: &str = ".parquet";
pub(crate) const PARTIAL_SUFFIX: &str = ".parquet.partial";
/// What a repair adds to the name of a file it sets aside.
pub(crate) const SET_ASIDE_SUFFIX: &str = ".corrupt";

/// Repairs a trace directory, or each partition of a partitioned one.
pub fn repair_all(dir: &Path) -> TraceResult<Vec<Repair>> {
    match partitions(dir)? {
        Some(parts) => parts.iter().map(|p| repair(p)).collect(),
        None => Ok(vec![repair(dir)?]),
    }
}

/// What `validate --repair` did to a trace directory.
#[derive(Debug, Serialize)]
pub struct Repair {
    pub dir: PathBuf,
    /// False when the trace was already consistent: nothing was written.
    pub changed: bool,
    /// Segments the new manifest lists.
    pub segments: Vec<String>,
    pub events: u64,
    pub start_unix_ns: i64,
    pub end_unix_ns: i64,
    pub complete: bool,
    /// Readable segments the old manifest did not list (or `.partial` ones
    /// whose footer was written), now part of the trace.
    pub adopted: Vec<String>,
    pub set_aside: Vec<SetAside>,
    /// Segments the old manifest listed that are not on disk.
    pub missing: Vec<String>,
    /// What became of the old manifest: `kept`, `missing`, `salvaged` (parsed
    /// leniently, its known keys kept) or `unreadable` (set aside).
    pub old_manifest: String,
}

/// A file moved out of the trace, with why.
#[derive(Debug, Serialize)]
pub struct SetAside {
    pub file: String,
    pub renamed_to: String,
    pub reason: String,
}

/// What the old manifest still tells.
enum OldManifest {
    Valid(Manifest),
    /// Parsed as JSON but not as a valid manifest: the keys that parse are kept.
    Salvaged(Manifest, String),
    Unreadable(String),
    Missing,
}

/// What one segment file holds, read end to end.
struct SegmentCheck {
    rows: u64,
    calls: u64,
    first_ts: i64,
    last_ts: i64,
    hosts: Vec<String>,
}

/// Where a repair keeps the manifest it rewrites.
pub const MANIFEST_BACKUP: &str = "manifest.json.bak";

/// Rebuilds the manifest of trace directory `dir` from its readable segments;
/// see the module documentation for the rules.
pub fn repair(dir: &Path) -> TraceResult<Repair> {
    let meta = std::fs::metadata(dir).map_err(|e| TraceError::io(dir, e))?;
    if !meta.is_dir() {
        return Err(TraceError::invalid(
            dir,
            "--repair works on a trace directory (manifest.json + segments)",
        ));
    }
    let old = load_old_manifest(dir)?;
    let names = file_names(dir)?;
    // Check every candidate before touching anything.
    let found = check_segments(dir, &names)?;
    let kept_names: Vec<String> = found.keep.iter().map(|(n, _)| n.clone()).collect();
    let old_listed = old.segments();
    let missing: Vec<String> = old_listed
        .iter()
        .filter(|s| !names.contains(s) && !kept_names.contains(s))
        .cloned()
        .collect();
    let adopted: Vec<String> = kept_names
        .iter()
        .filter(|n| !old_listed.contains(n))
        .cloned()
        .collect();
    let totals = Totals::of(&found.keep);
    let (m, old_state, old_complete) = old.starting_point();
    let consistent = matches!(old, OldManifest::Valid(_))
        && found.set_aside.is_empty()
        && adopted.is_empty()
        && missing.is_empty()
        && totals.agree_with(&m);
    let complete = old_complete && found.set_aside.is_empty() && missing.is_empty();
    let mut report = Repair {
        dir: dir.to_path_buf(),
        changed: !consistent,
        segments: kept_names.clone(),
        events: totals.events,
        start_unix_ns: totals.start,
        end_unix_ns: totals.end,
        complete: if consistent { m.complete } else { complete },
        adopted,
        set_aside: Vec::new(),
        missing,
        old_manifest: old_state,
    };
    if consistent {
        return Ok(report);
    }
    move_files(dir, found, &old, &mut report)?;
    rewrite_manifest(dir, m, kept_names, totals, complete, &report)?;
    Ok(report)
}

/// What the segment files of a trace directory turned out to be.
#[derive(Default)]
struct Found {
    /// Readable segments, by the name they will have, sorted.
    keep: Vec<(String, SegmentCheck)>,
    /// `.partial` segments whose footer was written: (name, finished name).
    adopt_partial: Vec<(String, String)>,
    /// Files to move out of the trace, with why.
    set_aside: Vec<(String, String)>,
}

/// Reads every segment file (finished or `.partial`) among `names`.
fn check_segments(dir: &Path, names: &[String]) -> TraceResult<Found> {
    let mut found = Found::default();
    for name in names {
        let is_partial = name.ends_with(PARTIAL_SUFFIX);
        if !is_partial && !name.ends_with(SEGMENT_SUFFIX) {
            continue;
        }
        match check_segment(&dir.join(name))? {
            Ok(check) if is_partial => {
                let finished = name.trim_end_matches(".partial").to_string();
                if names.contains(&finished) {
                    found.set_aside.push((
                        name.clone(),
                        format!("unfinished copy of {finished}, which exists"),
                    ));
                } else {
                    found.adopt_partial.push((name.clone(), finished.clone()));
                    found.keep.push((finished, check));
                }
            }
            Ok(check) => found.keep.push((name.clone(), check)),
            Err(reason) if is_partial => found.set_aside.push((
                name.clone(),
                format!("unfinished segment (its writer was stopped before the footer): {reason}"),
            )),
            Err(reason) => found.set_aside.push((name.clone(), reason)),
        }
    }
    found.keep.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// What the kept segments hold together: the manifest's figures.
struct Totals {
    events: u64,
    calls: u64,
    /// First and last `ts` (0 and 0 without rows).
    start: i64,
    end: i64,
    /// In the order the segments first name them.
    hosts: Vec<String>,
}

impl Totals {
    fn of(keep: &[(String, SegmentCheck)]) -> Totals {
        let with_rows = || keep.iter().map(|(_, c)| c).filter(|c| c.rows > 0);
        let mut hosts: Vec<String> = Vec::new();
        for h in keep.iter().flat_map(|(_, c)| c.hosts.iter()) {
            if !hosts.contains(h) {
                hosts.push(h.clone());
            }
        }
        Totals {
            events: keep.iter().map(|(_, c)| c.rows).sum(),
            calls: keep.iter().map(|(_, c)| c.calls).sum(),
            start: with_rows().map(|c| c.first_ts).min().unwrap_or(0),
            end: with_rows().map(|c| c.last_ts).max().unwrap_or(0),
            hosts,
        }
    }

    /// Whether manifest `m` already says what the segments hold.
    fn agree_with(&self, m: &Manifest) -> bool {
        m.events == self.events
            && m.calls.is_none_or(|c| c == self.calls)
            && (self.events == 0 || (m.start_unix_ns == self.start && m.end_unix_ns == self.end))
            && self.hosts.iter().all(|h| m.hosts.contains(h))
    }
}

impl OldManifest {
    /// The segments it lists (none when it cannot be read).
    fn segments(&self) -> Vec<String> {
        match self {
            OldManifest::Valid(m) | OldManifest::Salvaged(m, _) => m.segments.clone(),
            _ => Vec::new(),
        }
    }

    /// The manifest a rewrite starts from, what became of this one (for the
    /// report), and whether it said the trace was complete.
    fn starting_point(&self) -> (Manifest, String, bool) {
        match self {
            OldManifest::Valid(m) => (m.clone(), "kept".to_string(), m.complete),
            OldManifest::Salvaged(m, why) => (m.clone(), format!("salvaged ({why})"), m.complete),
            OldManifest::Unreadable(why) => (
                Manifest::new(Source::Unknown),
                format!("unreadable ({why}); set aside"),
                false,
            ),
            OldManifest::Missing => (Manifest::new(Source::Unknown), "missing".into(), false),
        }
    }
}

/// Sets aside the unusable files (an unreadable manifest too), gives
/// adopted `.partial` segments their finished names, and keeps a copy of a
/// manifest about to be rewritten.
fn move_files(dir: &Path, found: Found, old: &OldManifest, report: &mut Repair) -> TraceResult<()> {
    for (name, reason) in found.set_aside {
        let to = set_aside_file(dir, &name)?;
        report.set_aside.push(SetAside {
            file: name,
            renamed_to: to,
            reason,
        });
    }
    for (partial, finished) in found.adopt_partial {
        let to = dir.join(&finished);
        std::fs::rename(dir.join(&partial), &to).map_err(|e| TraceError::io(&to, e))?;
    }
    if let OldManifest::Unreadable(why) = old {
        let to = set_aside_file(dir, MANIFEST_FILE)?;
        report.set_aside.push(SetAside {
            file: MANIFEST_FILE.into(),
            renamed_to: to,
            reason: why.clone(),
        });
    }
    if matches!(old, OldManifest::Valid(_) | OldManifest::Salvaged(..)) {
        // The manifest about to be rewritten stays beside the trace.
        let bak = dir.join(MANIFEST_BACKUP);
        std::fs::copy(dir.join(MANIFEST_FILE), &bak).map_err(|e| TraceError::io(&bak, e))?;
        report.old_manifest = format!("{} as {MANIFEST_BACKUP}", report.old_manifest);
    }
    Ok(())
}

/// Writes manifest `m` anew with what the kept segments hold, and a note of
/// the repair.
fn rewrite_manifest(
    dir: &Path,
    mut m: Manifest,
    segments: Vec<String>,
    totals: Totals,
    complete: bool,
    report: &Repair,
) -> TraceResult<()> {
    m.format = crate::schema::FORMAT_NAME.to_string();
    m.schema_version = SCHEMA_VERSION as u64;
    m.segments = segments;
    m.events = totals.events;
    m.calls = Some(totals.calls);
    m.start_unix_ns = totals.start;
    m.end_unix_ns = totals.end;
    m.hosts.retain(|h| totals.hosts.contains(h));
    for h in totals.hosts {
        if !m.hosts.contains(&h) {
            m.hosts.push(h);
        }
    }
    m.complete = complete;
    m.extra.insert(
        "repaired".into(),
        serde_json::json!({
            "tool_version": env!("CARGO_PKG_VERSION"),
            "set_aside": report.set_aside.iter().map(|s| &s.renamed_to).collect::<Vec<_>>(),
            "missing": &report.missing,
        }),
    );
    m.store(dir)
}

/// Renames `dir/name` to the first free `name.corrupt[.N]`; returns the new name.
fn set_aside_file(dir: &Path, name: &str) -> TraceResult<String> {
    let from = dir.join(name);
    for n in 0..1000 {
        let to_name = if n == 0 {
            format!("{name}{SET_ASIDE_SUFFIX}")
        } else {
            format!("{name}{SET_ASIDE_SUFFIX}.{n}")
        };
        let to = dir.join(&to_name);
        if std::fs::symlink_metadata(&to).is_err() {
            std::fs::rename(&from, &to).map_err(|e| TraceError::io(&from, e))?;
            return Ok(to_name);
        }
    }
    Err(TraceError::invalid(
        &from,
        "cannot set it aside: too many .corrupt copies exist",
    ))
}

/// The old manifest as far as it can be read. A newer schema version stops
/// the repair (this iorepro must not rewrite a format it does not know).
fn load_old_manifest(dir: &Path) -> TraceResult<OldManifest> {
    match Manifest::load(dir) {
        Ok(m) => return Ok(OldManifest::Valid(m)),
        Err(TraceError::MissingManifest { .. }) => return Ok(OldManifest::Missing),
        Err(e @ TraceError::NewerSchema { .. }) => return Err(e),
        Err(TraceError::BadManifest { .. }) => {}
        Err(e) => return Err(e),
    }
    let path = dir.join(MANIFEST_FILE);
    let text = std::fs::read(&path).map_err(|e| TraceError::io(&path, e))?;
    let value: serde_json::Value = match serde_json::from_slice(&text) {
        Ok(serde_json::Value::Object(v)) => serde_json::Value::Object(v),
        Ok(_) => return Ok(OldManifest::Unreadable("not a JSON object".into())),
        Err(e) => {
            return Ok(OldManifest::Unreadable(crate::error::one_line(
                &e.to_string(),
            )))
        }
    };
    let format = value.get("format").and_then(|f| f.as_str());
    if format.is_some_and(|f| f != crate::schema::FORMAT_NAME) {
        return Ok(OldManifest::Unreadable(format!(
            "`format` is {:?}, not an iorepro trace",
            format.unwrap_or_default()
        )));
    }
    Ok(OldManifest::Salvaged(
        salvage(&value),
        "some keys were missing or mistyped".into(),
    ))
}

/// The keys of a damaged manifest that still have the right type; everything
/// unknown is kept as an extra key, as a normal rewrite would.
fn salvage(value: &serde_json::Value) -> Manifest {
    const KNOWN: &[&str] = &[
        "format",
        "schema_version",
        "tool_version",
        "source",
        "hosts",
        "start_unix_ns",
        "end_unix_ns",
        "events",
        "dropped_events",
        "segments",
        "command",
        "mounts",
        "complete",
        "anonymized",
    ];
    let get = |k: &str| value.get(k).cloned();
    let source = get("source")
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or(Source::Unknown);
    let mut m = Manifest::new(source);
    if let Some(v) = get("tool_version").and_then(|v| v.as_str().map(str::to_string)) {
        m.tool_version = v;
    }
    m.hosts = get("hosts")
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    m.dropped_events = get("dropped_events").and_then(|v| v.as_u64()).unwrap_or(0);
    m.command = get("command").and_then(|v| serde_json::from_value(v).ok());
    m.mounts = get("mounts").and_then(|v| serde_json::from_value(v).ok());
    m.anonymized = get("anonymized").and_then(|v| serde_json::from_value(v).ok());
    m.process_starts = get("process_starts")
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    // Only plain names count: a hostile list cannot make the repair look outside.
    m.segments = get("segments")
        .and_then(|v| serde_json::from_value::<Vec<String>>(v).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|s| !s.contains('/') && s.ends_with(SEGMENT_SUFFIX))
        .collect();
    m.complete = get("complete").and_then(|v| v.as_bool()).unwrap_or(false);
    if let Some(obj) = value.as_object() {
        for (k, v) in obj {
            if !KNOWN.contains(&k.as_str()) {
                m.extra.insert(k.clone(), v.clone());
            }
        }
    }
    m
}

/// Reads a segment end to end. `Ok(Err(reason))` means the file is not usable
/// (it gets set aside); a segment of a newer schema is an error for the whole
/// repair. A panic inside the Parquet decoder on a hostile file counts as
/// unusable, not as a crash of the repair.
fn check_segment(path: &Path) -> TraceResult<Result<SegmentCheck, String>> {
    let outcome = catch_unwind(AssertUnwindSafe(|| read_segment(path)));
    match outcome {
        Ok(Ok(check)) => Ok(Ok(check)),
        Ok(Err(e @ TraceError::NewerSchema { .. })) => Err(e),
        Ok(Err(e)) => Ok(Err(strip_path(&e.to_string(), path))),
        Err(_) => Ok(Err("the Parquet decoder failed on it".into())),
    }
}

fn read_segment(path: &Path) -> TraceResult<SegmentCheck> {
    // Opening checks the footer, the schema version and the columns.
    let reader = TraceReader::open(path)?;
    let footer_rows = reader.rows();
    let mut check = SegmentCheck {
        rows: 0,
        calls: 0,
        first_ts: i64::MAX,
        last_ts: i64::MIN,
        hosts: Vec::new(),
    };
    let mut hosts = BTreeSet::new();
    for b in SegmentBatches::open(path, ReadShape::default())? {
        let ev = Events::new(b?);
        for &t in ev.ts().values().iter() {
            check.first_ts = check.first_ts.min(t);
            check.last_ts = check.last_ts.max(t);
        }
        for i in 0..ev.len() {
            if !hosts.contains(ev.host_at(i)) {
                hosts.insert(ev.host_at(i).to_string());
                check.hosts.push(ev.host_at(i).to_string());
            }
        }
        check.rows += ev.len() as u64;
        check.calls += (0..ev.len()).map(|i| ev.calls_at(i) as u64).sum::<u64>();
    }
    if check.rows != footer_rows {
        return Err(TraceError::invalid(
            path,
            format!(
                "footer says {footer_rows} rows, {} could be decoded",
                check.rows
            ),
        ));
    }
    Ok(check)
}

/// Error messages start with the file's path; the repair report names the file itself.
fn strip_path(message: &str, path: &Path) -> String {
    let prefix = format!("{}: ", path.display());
    message.strip_prefix(&prefix).unwrap_or(message).to_string()
}

impl Repair {
    /// The lines `validate --repair` prints.
    pub fn render(&self) -> String {
        let dir = self.dir.display();
        let mut out = String::new();
        if !self.changed {
            out.push_str(&format!(
                "{dir}: nothing to repair: {} events in {} segments agree with the manifest\n",
                self.events,
                self.segments.len()
            ));
            return out;
        }
        out.push_str(&format!(
            "{dir}: manifest rebuilt: {} events in {} segments; old manifest {}\n",
            self.events,
            self.segments.len(),
            self.old_manifest
        ));
        for s in &self.set_aside {
            out.push_str(&format!(
                "set aside: {} -> {} ({})\n",
                s.file, s.renamed_to, s.reason
            ));
        }
        for a in &self.adopted {
            out.push_str(&format!(
                "adopted: {a} (readable, not listed in the old manifest)\n"
            ));
        }
        for m in &self.missing {
            out.push_str(&format!(
                "missing: {m} (listed in the old manifest, not on disk)\n"
            ));
        }
        if !self.complete {
            out.push_str("the trace is marked incomplete (complete: false): rows may be missing\n");
        }
        out
    }
}

/// Names of the regular files (not symlinks) directly in `dir`, sorted.
pub(crate) fn file_names(dir: &Path) -> TraceResult<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| TraceError::io(dir, e))? {
        let entry = entry.map_err(|e| TraceError::io(dir, e))?;
        let regular = entry.file_type().is_ok_and(|t| t.is_file());
        if let (true, Ok(name)) = (regular, entry.file_name().into_string()) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}
