//! The rules of [`super`] applied: the spellings a builder saw made paths
//! (each canonicalised once), every path judged by what was done with it,
//! then the names only looked up judged by their neighbours.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use super::forms::{form_of, Form};
use super::names::{family_of, under};
use super::observe::{RolesBuilder, Stats};
use super::traits::Evidence;
use super::{FileRole, FileRoles, Named, Role, RoleTotals};
use crate::intern::Interner;
use iorepro_format::mounts::{MountTable, UNKNOWN_MOUNT};
use iorepro_format::paths::{canonical, spelling};

/// A log's writes are small: at most this on average.
const LOG_WRITE_MAX: u64 = 64 << 10;
/// A file written this many times or more, in small appends spread over a
/// quarter of the run or more, is a log whatever its name.
const LOG_MIN_WRITES: u64 = 8;
/// A log's appends come apart, at this interval or more on average: a
/// file written in a burst of small writes (`dd bs=4k`) is data, whatever
/// share of a short run the burst lasts.
const LOG_MIN_INTERVAL_NS: i64 = 1_000_000;
/// A run record is under this ...
const RECORD_MAX: u64 = 1 << 20;
/// ... and under the largest file the job wrote divided by this ...
const RECORD_SHARE: u64 = 16;
/// ... though never held below this (a run that writes nothing but records).
const RECORD_FLOOR: u64 = 64 << 10;

/// What the whole run wrote, which the rules for written files judge against.
#[derive(Debug, Clone, Default)]
pub(super) struct Run {
    duration_ns: i64,
    /// The largest file the job wrote (bytes).
    largest_written: u64,
    /// Bytes written per family of names (see [`family_of`]).
    families: FxHashMap<String, u64>,
}

impl Run {
    /// The most a run record may hold (see the module's rules).
    fn record_max(&self) -> u64 {
        (self.largest_written / RECORD_SHARE).clamp(RECORD_FLOOR, RECORD_MAX)
    }
}

pub(super) fn parent_of(p: &str) -> Option<&str> {
    if p == "/" || !p.starts_with('/') {
        return None;
    }
    match p.rfind('/') {
        Some(0) => Some("/"),
        Some(i) => Some(&p[..i]),
        None => None,
    }
}

/// Roles a name has whatever the job did with it: not a file, the
/// kernel's, a launcher's, or memory in /dev/shm.
/// The evidence of path `p`'s name: the bits recorded in an anonymized
/// trace, else its words.
fn evidence<'a>(p: &'a str, s: &Stats) -> Evidence<'a> {
    s.traits.map_or(Evidence::Name(p), Evidence::Bits)
}

fn by_kind(p: &str, e: Evidence) -> Option<Role> {
    match form_of(p) {
        Form::Pseudo | Form::Url => Some(Role::Other),
        Form::Kernel | Form::Device | Form::Special => Some(Role::System),
        _ if e.etc() => Some(Role::System),
        _ if e.launcher() => Some(Role::Launcher),
        _ if under(p, "/dev/shm") => Some(Role::Scratch),
        _ => None,
    }
}

/// Whether a path's role comes from what it is, never from the files it
/// holds or lies beside: such paths do not vote.
fn votes(p: &str, e: Evidence) -> bool {
    !matches!(form_of(p), Form::Pseudo | Form::Url) && !e.launcher()
}

/// Small appends, never begun anew more than once.
fn appended(s: &Stats) -> bool {
    s.write_calls >= 2 && s.write_bytes / s.write_calls <= LOG_WRITE_MAX && s.rewrites <= 1
}

/// A log by what the job did: many small appends spread over the run, and
/// apart from each other.
fn written_as_log(s: &Stats, run: &Run) -> bool {
    // (No writes at all leave the bounds at their sentinels.)
    let span = s.last_write_ns.saturating_sub(s.first_write_ns);
    appended(s)
        && s.write_calls >= LOG_MIN_WRITES
        && run.duration_ns > 0
        && span.saturating_mul(4) >= run.duration_ns
        && span >= (s.write_calls as i64 - 1).saturating_mul(LOG_MIN_INTERVAL_NS)
}

/// A small record of the run: by its name or place, small itself; by its
/// format alone, small with the files of its family.
fn written_as_record(p: &str, e: Evidence, s: &Stats, run: &Run) -> bool {
    let max = run.record_max();
    if e.record_name() {
        return s.write_bytes <= max;
    }
    e.record_format() && run.families.get(&family_of(p)).copied().unwrap_or(0) <= max
}

/// Rules 1 to 4 of the module's list; `None` for a name only looked up.
pub(super) fn by_name(p: &str, e: Evidence, s: &Stats, run: &Run) -> Option<Role> {
    if let Some(r) = by_kind(p, e) {
        return Some(r);
    }
    if s.made {
        return Some(if e.code() {
            Role::Code
        } else if s.removed {
            Role::Scratch
        } else if e.log() || e.text() && appended(s) {
            Role::Log
        } else if e.written_checkpoint() {
            Role::Checkpoint
        } else if written_as_log(s, run) {
            Role::Log
        } else if written_as_record(p, e, s, run) {
            Role::Output
        } else {
            Role::Checkpoint
        });
    }
    if e.code() {
        return Some(Role::Code);
    }
    if s.read_bytes > 0 {
        return Some(if e.checkpoint() {
            Role::Checkpoint
        } else {
            Role::Dataset
        });
    }
    None
}

/// The role of a path the trace does not hold, by its name alone.
pub(super) fn by_name_alone(p: &str) -> Role {
    by_name(p, Evidence::Name(p), &Stats::default(), &Run::default()).unwrap_or(Role::Other)
}

/// The spellings of one path merged, each spelling canonicalised once.
fn paths(names: &Interner, stats: Vec<Stats>) -> BTreeMap<String, Stats> {
    let mut out: BTreeMap<String, Stats> = BTreeMap::new();
    for (raw, mut s) in names.iter().zip(stats) {
        let (key, names_dir) = match canonical(raw) {
            Some(c) => (c.path, c.names_dir),
            None => (raw.to_string(), false),
        };
        s.directory |= names_dir && s.found;
        if let Some((ts, to)) = s.renamed_to.take() {
            s.renamed_to = Some((ts, spelling(&to).into()));
        }
        match out.get_mut(&key) {
            Some(known) => known.merge(&s),
            None => {
                out.insert(key, s);
            }
        }
    }
    out
}

fn run_of(stats: &BTreeMap<String, Stats>, duration_ns: i64) -> Run {
    let mut run = Run {
        duration_ns,
        ..Run::default()
    };
    for (p, s) in stats {
        if s.write_bytes == 0 || by_kind(p, evidence(p, s)).is_some() {
            continue;
        }
        run.largest_written = run.largest_written.max(s.write_bytes);
        *run.families.entry(family_of(p)).or_default() += s.write_bytes;
    }
    run
}

pub(super) fn finish(b: RolesBuilder) -> FileRoles {
    let (names, stats, start_ns, end_ns) = b.into_parts();
    let stats = paths(&names, stats);
    let run = run_of(&stats, (end_ns - start_ns).max(0));
    // Paths that hold another path are directories.
    let mut parents: FxHashMap<&str, ()> = FxHashMap::default();
    for p in stats.keys() {
        if let Some(parent) = parent_of(p) {
            parents.insert(parent, ());
        }
    }
    let is_dir = |p: &str, s: &Stats| s.directory || parents.contains_key(p);
    let mut roles: FxHashMap<&str, Option<Role>> = FxHashMap::default();
    for (p, s) in &stats {
        let e = evidence(p, s);
        let role = if is_dir(p, s) && s.read_bytes == 0 && s.write_bytes == 0 {
            by_kind(p, e)
        } else {
            by_name(p, e, s, &run)
        };
        roles.insert(p, role);
    }
    follow_renames(&stats, &mut roles);
    let ballots = Ballots::count(&roles, &stats);
    let mut files = BTreeMap::new();
    let mut totals: BTreeMap<Role, RoleTotals> = Role::ALL
        .iter()
        .map(|r| (*r, RoleTotals::default()))
        .collect();
    for (p, s) in &stats {
        let dir = is_dir(p, s);
        let role = roles[p.as_str()].unwrap_or_else(|| ballots.role_of(p, dir));
        let t = totals.entry(role).or_default();
        if dir {
            t.directories += 1;
        } else {
            t.files += 1;
        }
        t.calls += s.calls;
        t.read_bytes += s.read_bytes;
        t.write_bytes += s.write_bytes;
        files.insert(p.clone(), file_role(p, s, role, dir));
    }
    FileRoles {
        files,
        totals,
        mounts: MountTable::default(),
    }
}

/// A file renamed into place is what its final name is (unless it is a
/// file of the system, a launcher, or no file at all).
fn follow_renames(stats: &BTreeMap<String, Stats>, roles: &mut FxHashMap<&str, Option<Role>>) {
    for (p, s) in stats {
        if let Some((_, to)) = &s.renamed_to {
            if let Some(Some(r)) = roles.get(&**to).copied() {
                let own = roles.get(p.as_str()).copied().flatten();
                if s.made && !matches!(own, Some(Role::System | Role::Launcher | Role::Other)) {
                    if let Some(slot) = roles.get_mut(p.as_str()) {
                        *slot = Some(r);
                    }
                }
            }
        }
    }
}

/// The votes of the files judged, counted for every directory above them:
/// a path no rule judged takes the role most of its neighbours have.
struct Ballots<'p>(FxHashMap<&'p str, [u64; Role::ALL.len()]>);

impl<'p> Ballots<'p> {
    fn count(
        roles: &FxHashMap<&'p str, Option<Role>>,
        stats: &BTreeMap<String, Stats>,
    ) -> Ballots<'p> {
        let mut ballots: FxHashMap<&str, [u64; Role::ALL.len()]> = FxHashMap::default();
        for (p, r) in roles {
            let Some(r) = r else { continue };
            if !votes(p, evidence(p, &stats[*p])) {
                continue;
            }
            let mut at = parent_of(p);
            while let Some(d) = at {
                ballots.entry(d).or_default()[*r as usize] += 1;
                at = parent_of(d);
            }
        }
        Ballots(ballots)
    }

    /// The role most votes beneath directory `d` are for (ties go to the
    /// role listed first).
    fn winner(&self, d: &str) -> Option<Role> {
        self.0.get(d).and_then(|v| {
            let (i, n) = v
                .iter()
                .enumerate()
                .max_by_key(|(i, n)| (**n, Role::ALL.len() - *i))?;
            (*n > 0).then_some(Role::ALL[i])
        })
    }

    /// The role of a path no rule judged: a directory's own vote, else the
    /// nearest directory above it (not the root) that has one; else other
    /// (the root itself: system).
    fn role_of(&self, p: &str, dir: bool) -> Role {
        let own = if dir && p != "/" {
            self.winner(p)
        } else {
            None
        };
        own.or_else(|| {
            let mut at = parent_of(p);
            while let Some(d) = at.filter(|d| *d != "/") {
                if let Some(r) = self.winner(d) {
                    return Some(r);
                }
                at = parent_of(d);
            }
            None
        })
        .unwrap_or(if p == "/" { Role::System } else { Role::Other })
    }
}

fn file_role(p: &str, s: &Stats, role: Role, directory: bool) -> FileRole {
    FileRole {
        path: p.to_string(),
        role,
        calls: s.calls,
        read_bytes: s.read_bytes,
        write_bytes: s.write_bytes,
        directory,
        mount: UNKNOWN_MOUNT.to_string(),
        fs_type: UNKNOWN_MOUNT.to_string(),
        first_data_ns: s.first_data_ns,
        made_named: ((s.changed() || s.made_again) && s.first_named_ns != i64::MAX).then_some(
            Named {
                ns: s.first_named_ns,
                pid: s.first_named_pid,
            },
        ),
    }
}
