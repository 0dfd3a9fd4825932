//! The role of every file a job touched, found from what the job did with
//! it: the data it reads in its read phases (dataset), the state it saves
//! and loads back (checkpoint), what it imports and maps to start
//! (code), what it makes and removes again (scratch), the kernel's own
//! files (system), and the rest (other). A replay uses the roles to choose
//! what it replays; `summary` and `files` show them.
//!
//! The rules, first match wins, on one spelling of each path
//! ([`forms::canonical`]):
//! 1. /proc, /sys, /dev (not /dev/shm), /etc, pipes, sockets, anonymous
//!    inodes and memfds are *system*; /dev/shm is *scratch*.
//! 2. A file the job wrote or created: *code* if it looks like code (a
//!    Python byte-code cache, a compiled kernel); *scratch* if the job
//!    removed it again; else *checkpoint*. A file renamed into place takes
//!    the role of the name it was renamed to.
//! 3. A file that looks like code (Python sources and byte code, shared
//!    libraries, site-packages, the system's library and binary trees,
//!    executables in a `bin` directory) is *code*.
//! 4. A file the job read: *checkpoint* when its name says so (`.pt`,
//!    `.pth`, `.ckpt`, `.safetensors`, `.distcp`, a `checkpoint` or `ckpt` in the
//!    path), else *dataset*.
//! 5. A name the job only looked up (a stat, a probe that failed, a
//!    listing) takes the role most of the files beside it have; a directory
//!    the role most files beneath it have; failing both, *other*.

pub mod forms;

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::{Deserialize, Serialize};

use forms::{canonical, form_of, Form};
use iorepro_format::columns::Events;
use iorepro_format::error::TraceResult;
use iorepro_format::mounts::{MountTable, UNKNOWN_MOUNT};
use iorepro_format::reader::TraceReader;
use iorepro_format::schema::{
    Op, COL_CALLS, COL_FLAGS, COL_OFFSET, COL_OP, COL_PATH, COL_PATH2, COL_RET, COL_TS,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Dataset,
    Checkpoint,
    Code,
    Scratch,
    System,
    Other,
}

impl Role {
    pub const ALL: [Role; 6] = [
        Role::Dataset,
        Role::Checkpoint,
        Role::Code,
        Role::Scratch,
        Role::System,
        Role::Other,
    ];

    /// What a replay replays unless told otherwise.
    pub const REPLAYED_BY_DEFAULT: [Role; 3] = [Role::Dataset, Role::Checkpoint, Role::Scratch];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Dataset => "dataset",
            Role::Checkpoint => "checkpoint",
            Role::Code => "code",
            Role::Scratch => "scratch",
            Role::System => "system",
            Role::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One file (or directory, or special name) and what the job did with it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FileRole {
    pub path: String,
    pub role: Role,
    /// Calls naming it (a run of calls counts each call).
    pub calls: u64,
    /// Bytes read (read and page faults under an mmap) and written.
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Listed, created or removed as a directory, or holding another path.
    pub directory: bool,
    /// The mount point of the file system it was on, and that file
    /// system's type: `unknown` in a trace without a mount table.
    pub mount: String,
    pub fs_type: String,
    /// When the job first read or wrote its data (Unix ns).
    #[serde(skip)]
    pub first_data_ns: Option<i64>,
}

/// Files, calls and bytes on one mount (file system).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct MountTotals {
    pub mount_point: String,
    pub fs_type: String,
    pub source: String,
    pub files: u64,
    pub calls: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct RoleTotals {
    pub files: u64,
    pub calls: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// Every path of a trace with its role, and the totals per role.
#[derive(Debug, Clone, Default)]
pub struct FileRoles {
    files: BTreeMap<String, FileRole>,
    totals: BTreeMap<Role, RoleTotals>,
    mounts: MountTable,
}

/// The columns [`FileRoles::compute`] reads.
pub const ROLE_COLUMNS: [&str; 8] = [
    COL_TS, COL_OP, COL_PATH, COL_PATH2, COL_RET, COL_FLAGS, COL_OFFSET, COL_CALLS,
];

impl FileRoles {
    /// One pass over the trace.
    pub fn compute(reader: &TraceReader) -> TraceResult<FileRoles> {
        let reader = TraceReader::open(reader.root())?.with_columns(&ROLE_COLUMNS);
        let mut b = RolesBuilder::default();
        for ev in reader.events()? {
            let ev = ev?;
            for row in 0..ev.len() {
                b.observe(&ev, row);
            }
        }
        let mut roles = b.finish();
        if let Some(m) = &reader.manifest().mounts {
            roles.assign_mounts(&MountTable::new(m));
        }
        Ok(roles)
    }

    /// Puts every path on its mount (longest mount-point prefix).
    pub fn assign_mounts(&mut self, table: &MountTable) {
        for f in self.files.values_mut() {
            if let Some(m) = table.lookup(&f.path) {
                f.mount.clone_from(&m.mount_point);
                f.fs_type.clone_from(&m.fs_type);
            }
        }
        self.mounts = table.clone();
    }

    /// The mount of `path`, however the trace spells it: `unknown` where
    /// the trace has no mount table or the path is on none of its mounts.
    pub fn mount_of(&self, path: &str) -> &str {
        self.mounts
            .lookup(&key_of(path))
            .map_or(UNKNOWN_MOUNT, |m| m.mount_point.as_str())
    }

    /// Files, calls and bytes per mount, busiest first; paths on no
    /// recorded mount under `unknown`.
    pub fn per_mount(&self) -> Vec<MountTotals> {
        let mut by: BTreeMap<&str, MountTotals> = BTreeMap::new();
        for f in self.files.values() {
            let t = by.entry(f.mount.as_str()).or_insert_with(|| {
                let m = self
                    .mounts
                    .lookup(&f.path)
                    .filter(|m| m.mount_point == f.mount);
                MountTotals {
                    mount_point: f.mount.clone(),
                    fs_type: f.fs_type.clone(),
                    source: m.map_or_else(|| UNKNOWN_MOUNT.to_string(), |m| m.source.clone()),
                    ..MountTotals::default()
                }
            });
            t.files += 1;
            t.calls += f.calls;
            t.read_bytes += f.read_bytes;
            t.write_bytes += f.write_bytes;
        }
        let mut v: Vec<MountTotals> = by.into_values().collect();
        v.sort_by(|a, b| {
            (b.read_bytes + b.write_bytes, b.calls)
                .cmp(&(a.read_bytes + a.write_bytes, a.calls))
                .then(a.mount_point.cmp(&b.mount_point))
        });
        v
    }

    /// The role of `path`, however the trace spells it; a path the trace
    /// does not hold is judged by its name alone.
    pub fn role(&self, path: &str) -> Role {
        let key = key_of(path);
        match self.files.get(&key) {
            Some(f) => f.role,
            None => by_name(&key, &Stats::default()).unwrap_or(Role::Other),
        }
    }

    /// The entry of `path`, however the trace spells it.
    pub fn get(&self, path: &str) -> Option<&FileRole> {
        self.files.get(&key_of(path))
    }

    /// Every path, in path order.
    pub fn files(&self) -> impl Iterator<Item = &FileRole> {
        self.files.values()
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// When the job first read or wrote a dataset or checkpoint file (Unix
    /// ns): where its start-up ends.
    pub fn first_data_ns(&self) -> Option<i64> {
        self.files
            .values()
            .filter(|f| matches!(f.role, Role::Dataset | Role::Checkpoint))
            .filter_map(|f| f.first_data_ns)
            .min()
    }

    /// Files, calls and bytes per role (every role, zero where none).
    pub fn totals(&self) -> &BTreeMap<Role, RoleTotals> {
        &self.totals
    }
}

/// The one spelling a path is kept under; names that are no path as they are.
fn key_of(path: &str) -> String {
    canonical(path).map_or_else(|| path.to_string(), |c| c.path)
}

#[derive(Debug, Clone, Default)]
struct Stats {
    calls: u64,
    read_bytes: u64,
    write_bytes: u64,
    /// Created, truncated or written by the job.
    made: bool,
    /// The job's last call that changed the name removed it (unlink, rmdir).
    removed: bool,
    directory: bool,
    /// Renamed away to this name (the last time).
    renamed_to: Option<String>,
    first_data_ns: Option<i64>,
}

/// Feeds rows one at a time (for a reader that already streams the trace,
/// such as the replayer's survey); [`RolesBuilder::finish`] judges.
#[derive(Debug, Default)]
pub struct RolesBuilder {
    stats: HashMap<String, Stats>,
}

const O_CREAT: i32 = libc::O_CREAT;
const O_TRUNC: i32 = libc::O_TRUNC;

impl RolesBuilder {
    /// What row `row` of `ev` says about its paths. Needs the columns of
    /// [`ROLE_COLUMNS`].
    pub fn observe(&mut self, ev: &Events, row: usize) {
        let op = ev.op(row);
        let ret = ev.ret().value(row);
        let calls = ev.calls_at(row).max(1) as u64;
        let flags = Events::opt_i32(ev.flags(), row).unwrap_or(0);
        let path2 = ev.path2_at(row).map(key_of);
        if let Some(p) = ev.path_at(row) {
            if p.is_empty() {
                return;
            }
            let names_dir = canonical(p).is_some_and(|c| c.names_dir);
            let key = key_of(p);
            let s = self.stats.entry(key).or_default();
            s.calls += calls;
            s.directory |= names_dir && ret >= 0;
            if ret > 0 && matches!(op, Op::Read | Op::Fault | Op::Write) {
                let ts = ev.ts().value(row);
                s.first_data_ns = Some(s.first_data_ns.map_or(ts, |f| f.min(ts)));
            }
            if ret >= 0 {
                match op {
                    Op::Read | Op::Fault => s.read_bytes += ret.max(0) as u64,
                    Op::Write => {
                        s.write_bytes += ret.max(0) as u64;
                        s.made = true;
                    }
                    Op::Truncate => s.made = true,
                    Op::Open => {
                        if flags & (O_CREAT | O_TRUNC) != 0
                            && flags & libc::O_ACCMODE != libc::O_RDONLY
                        {
                            s.made = true;
                            s.removed = false;
                        }
                        s.directory |= flags & libc::O_DIRECTORY != 0;
                    }
                    Op::Mkdir => {
                        s.directory = true;
                        s.removed = false;
                    }
                    Op::Getdents => s.directory = true,
                    Op::Unlink => s.removed = true,
                    Op::Rmdir => {
                        s.directory = true;
                        s.removed = true;
                    }
                    Op::Rename => {
                        s.renamed_to = path2.clone();
                    }
                    _ => {}
                }
            }
        }
        if let Some(p2) = path2 {
            let s = self.stats.entry(p2).or_default();
            s.calls += calls;
            if ret >= 0 && matches!(op, Op::Rename | Op::Link | Op::Symlink) {
                s.made = true;
                s.removed = false;
            }
        }
    }

    pub fn finish(self) -> FileRoles {
        let stats = self.stats;
        // Paths that hold another path are directories.
        let mut parents: HashMap<&str, bool> = HashMap::new();
        for p in stats.keys() {
            if let Some(parent) = parent_of(p) {
                parents.insert(parent, true);
            }
        }
        let mut roles: HashMap<&str, Option<Role>> = HashMap::new();
        for (p, s) in &stats {
            let dir = s.directory || parents.contains_key(p.as_str());
            let role = if dir && s.read_bytes == 0 && s.write_bytes == 0 {
                system_or_scratch(p)
            } else {
                by_name(p, s)
            };
            roles.insert(p, role);
        }
        // A file renamed into place is what its final name is.
        for (p, s) in &stats {
            if let Some(to) = &s.renamed_to {
                if let Some(Some(r)) = roles.get(to.as_str()).copied() {
                    if s.made && roles.get(p.as_str()).copied().flatten() != Some(Role::System) {
                        roles.insert(p, Some(r));
                    }
                }
            }
        }
        // Votes of the files judged, counted for every directory above them.
        let mut votes: HashMap<&str, [u64; 6]> = HashMap::new();
        for (p, r) in &roles {
            let Some(r) = r else { continue };
            let mut at = parent_of(p);
            while let Some(d) = at {
                votes.entry(d).or_default()[*r as usize] += 1;
                at = parent_of(d);
            }
        }
        let winner = |d: &str| {
            votes.get(d).and_then(|v| {
                let (i, n) = v.iter().enumerate().max_by_key(|(i, n)| (**n, 6 - *i))?;
                (*n > 0).then_some(Role::ALL[i])
            })
        };
        let mut files = BTreeMap::new();
        let mut totals: BTreeMap<Role, RoleTotals> = Role::ALL
            .iter()
            .map(|r| (*r, RoleTotals::default()))
            .collect();
        for (p, s) in &stats {
            let dir = s.directory || parents.contains_key(p.as_str());
            let role = roles[p.as_str()]
                .or_else(|| if dir && p != "/" { winner(p) } else { None })
                .or_else(|| {
                    let mut at = parent_of(p);
                    while let Some(d) = at.filter(|d| *d != "/") {
                        if let Some(r) = winner(d) {
                            return Some(r);
                        }
                        at = parent_of(d);
                    }
                    None
                })
                .unwrap_or(if p == "/" { Role::System } else { Role::Other });
            let t = totals.entry(role).or_default();
            t.files += 1;
            t.calls += s.calls;
            t.read_bytes += s.read_bytes;
            t.write_bytes += s.write_bytes;
            files.insert(
                p.clone(),
                FileRole {
                    path: p.clone(),
                    role,
                    calls: s.calls,
                    read_bytes: s.read_bytes,
                    write_bytes: s.write_bytes,
                    directory: dir,
                    mount: UNKNOWN_MOUNT.to_string(),
                    fs_type: UNKNOWN_MOUNT.to_string(),
                    first_data_ns: s.first_data_ns,
                },
            );
        }
        FileRoles {
            files,
            totals,
            mounts: MountTable::default(),
        }
    }
}

/// The `files` listing: one line per path, busiest first within its role.
pub fn render(roles: &FileRoles) -> String {
    use iorepro_format::units::fmt_bytes;
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<11} {:>10} {:>12} {:>12}  {:<16} path",
        "role", "calls", "read", "written", "mount"
    );
    let mut files: Vec<&FileRole> = roles.files().collect();
    files.sort_by(|a, b| {
        (
            a.role,
            std::cmp::Reverse(a.read_bytes + a.write_bytes),
            std::cmp::Reverse(a.calls),
        )
            .cmp(&(
                b.role,
                std::cmp::Reverse(b.read_bytes + b.write_bytes),
                std::cmp::Reverse(b.calls),
            ))
            .then(a.path.cmp(&b.path))
    });
    for f in files {
        let _ = writeln!(
            s,
            "{:<11} {:>10} {:>12} {:>12}  {:<16} {}{}",
            f.role.as_str(),
            f.calls,
            fmt_bytes(f.read_bytes as f64),
            fmt_bytes(f.write_bytes as f64),
            if f.fs_type == UNKNOWN_MOUNT {
                f.mount.clone()
            } else {
                format!("{} ({})", f.mount, f.fs_type)
            },
            f.path,
            if f.directory && f.path != "/" {
                "/"
            } else {
                ""
            }
        );
    }
    s
}

fn parent_of(p: &str) -> Option<&str> {
    if p == "/" || !p.starts_with('/') {
        return None;
    }
    match p.rfind('/') {
        Some(0) => Some("/"),
        Some(i) => Some(&p[..i]),
        None => None,
    }
}

fn under(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn system_or_scratch(p: &str) -> Option<Role> {
    match form_of(p) {
        Form::Kernel | Form::Device | Form::Special => Some(Role::System),
        _ if under(p, "/etc") => Some(Role::System),
        _ if under(p, "/dev/shm") => Some(Role::Scratch),
        _ => None,
    }
}

/// Rules 1 to 4 of the module's list; `None` for a name only looked up.
fn by_name(p: &str, s: &Stats) -> Option<Role> {
    if let Some(r) = system_or_scratch(p) {
        return Some(r);
    }
    if s.made {
        return Some(if looks_like_code(p) {
            Role::Code
        } else if s.removed {
            Role::Scratch
        } else {
            Role::Checkpoint
        });
    }
    if looks_like_code(p) {
        return Some(Role::Code);
    }
    if s.read_bytes > 0 {
        return Some(if looks_like_checkpoint(p) {
            Role::Checkpoint
        } else {
            Role::Dataset
        });
    }
    None
}

/// Python sources and byte code, shared libraries, installed packages,
/// the system's program and library trees, and executables.
pub fn looks_like_code(p: &str) -> bool {
    const TREES: [&str; 8] = [
        "/usr",
        "/lib",
        "/lib64",
        "/bin",
        "/sbin",
        "/opt/conda",
        "/snap",
        "/nix",
    ];
    if TREES.iter().any(|t| under(p, t)) {
        return true;
    }
    let name = p.rsplit('/').next().unwrap_or(p);
    let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    if matches!(ext, "py" | "pyc" | "pyi" | "pyx" | "pxd" | "so")
        || name.contains(".so.")
        || name == ".python-version"
    {
        return true;
    }
    let comps: Vec<&str> = p.split('/').collect();
    comps.iter().any(|c| {
        matches!(
            *c,
            "site-packages" | "dist-packages" | "__pycache__" | ".pyenv"
        ) || c.ends_with(".dist-info")
            || c.ends_with(".egg-info")
            || c.starts_with("torchinductor_")
            || c.starts_with("triton")
    }) || comps.len() >= 2 && matches!(comps[comps.len() - 2], "bin" | "sbin")
        || comps
            .windows(2)
            .any(|w| w[0] == "lib" && w[1].starts_with("python"))
}

/// Saved state read back: a model's weights, an optimizer's state, a
/// distributed checkpoint's shards.
pub fn looks_like_checkpoint(p: &str) -> bool {
    let lower = p.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    matches!(ext, "pt" | "pth" | "ckpt" | "safetensors" | "distcp")
        || lower.contains("checkpoint")
        || lower.contains("ckpt")
}

#[cfg(test)]
mod tests;
