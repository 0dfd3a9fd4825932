//! The role of every file a job touched, found from what the job did with
//! it: the data it reads in its read phases (dataset), the state it saves
//! and loads back (checkpoint), the log it appends to through the run
//! (log), the small records it writes of the run (output), what it imports
//! and maps to start (code), what it makes and removes again (scratch),
//! the files of its launcher and runtime (launcher), the kernel's own files
//! (system), and the rest (other). A replay uses the roles to choose what
//! it replays; `summary` and `files` show them.
//!
//! The rules, first match wins, on one spelling of each path
//! ([`iorepro_format::paths::canonical`]):
//! 1. Names that are no file (Python's `<frozen ...>`, `<string>`: a path
//!    component `<...>`, see [`forms::Form::Pseudo`]) are *other*; /proc,
//!    /sys, /dev (not /dev/shm), /etc, pipes, sockets, anonymous inodes and
//!    memfds are *system*; the files of a launcher or runtime (Open MPI and
//!    PMIx session files, Slurm's spool, torchrun's, multiprocessing's
//!    `pymp-*`, NCCL, Gloo and PyTorch shared memory, semaphores, a user's
//!    `~/.openmpi` and `~/.pmix`: see [`forms::is_launcher_file`]; not a
//!    launcher's installed code) are *launcher*; the rest of /dev/shm is
//!    *scratch*.
//! 2. A file the job wrote or created, in this order: *code* if it looks
//!    like code (a Python byte-code cache, a compiled kernel); *scratch* if
//!    the job removed it again; *log* when its name says so (`*.log`,
//!    `*.log.N`, `*.out`, `*.err`, `stdout`, `stderr`, a `*.txt` appended
//!    in small writes); *checkpoint* when its name says saved state (the
//!    names of rule 4, `zero_pp_rank_*`, `.bin`, `.npz`); *log* when the job
//!    appended to it in many small writes (8 or more, 64 KiB or less on
//!    average, begun anew at most once) spread over a quarter of the run or
//!    more (a redirected stdout, an event file); *output* when it is a small
//!    record of the run (`.json`, `.yaml`, `.yml`, `.csv`, `.toml`, `.txt`);
//!    else *checkpoint*: bulk state. Small is judged against the run's bulk
//!    writes: at most 1 MiB and at most 1/16 of the largest file the job
//!    wrote, never held below 64 KiB (so a run that writes only records
//!    keeps them records, and a run whose checkpoints are a few MiB does
//!    not take a 500 KiB JSON for one). A record known by its name or place
//!    (Hydra's `.hydra/`, an `outputs/` directory, `summary.json`,
//!    `per_epoch_stats.json`, `*_output.json`) is measured alone; one known
//!    by its format alone is measured with its family (the files whose names
//!    differ only in their numbers, `step_100/shard_0.json`, ...), so the
//!    shards of a checkpoint written side by side stay a checkpoint however
//!    small each is. A log or an output is replayed as the job wrote it and
//!    is never a checkpoint. A file renamed into place takes the role of
//!    the name it was renamed to.
//! 3. A file that looks like code (Python sources and byte code, shared
//!    libraries, site-packages and its `.pth` files and package metadata,
//!    `pyvenv.cfg`, `.egg-link`, the system's library and binary trees,
//!    executables in a `bin` directory, a user's tool settings and caches
//!    in a home directory's dot-folders such as `~/.cache`, `~/.config` and
//!    `~/.nv`, but not the model hubs' and dataset libraries' downloads
//!    there) is *code*.
//! 4. A file the job read: *checkpoint* when its name says so (`.pt`,
//!    `.pth`, `.ckpt`, `.safetensors`, `.distcp`, `zero_pp_rank_*`, a
//!    `checkpoint` or `ckpt` in the path), else *dataset*.
//! 5. A name the job only looked up (a stat, a probe that failed, a
//!    listing) takes the role most of the files beside it have; a directory
//!    the role most files beneath it have; failing both, *other*. Names of
//!    rule 1 (not files, launchers') do not vote, so a bare directory such
//!    as /tmp does not take a role from the launcher's files in it. A
//!    directory keeps its `directory` flag whatever role it takes (the
//!    dataset's directory is listed by a replay), and the totals per role
//!    count it among `directories`, not `files`.
//!
//! The cost per row is an index: rows are counted per distinct spelling of
//! a path (see [`observe`]), spellings are made paths and judged once each
//! at the end. `summary` counts roles in the same pass as its other totals.

pub mod forms;
mod judge;
pub(crate) mod names;
mod observe;
pub mod traits;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use iorepro_format::error::TraceResult;
use iorepro_format::mounts::{MountTable, UNKNOWN_MOUNT};
use iorepro_format::reader::TraceReader;
use iorepro_format::scan::scan;
use iorepro_format::schema::{
    COL_CALLS, COL_FLAGS, COL_OP, COL_PATH, COL_PATH2, COL_PATH2_TRAITS, COL_PATH_TRAITS, COL_PID,
    COL_RET, COL_TS,
};

use iorepro_format::paths::spelling;
pub use names::{looks_like_checkpoint, looks_like_code};
pub(crate) use observe::Hot;
pub use observe::RolesBuilder;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Dataset,
    Checkpoint,
    /// Appended in small writes through the run (never a checkpoint).
    Log,
    /// A small record of the run written by the job (never a checkpoint).
    Output,
    Code,
    Scratch,
    /// A launcher's or runtime's own files (MPI, PMIx, Slurm, torchrun,
    /// multiprocessing, NCCL): made by the launcher, not the job.
    Launcher,
    System,
    Other,
}

impl Role {
    /// Every role; on a tie of votes (rule 5) the earlier wins.
    pub const ALL: [Role; 9] = [
        Role::Dataset,
        Role::Checkpoint,
        Role::Log,
        Role::Output,
        Role::Code,
        Role::Scratch,
        Role::Launcher,
        Role::System,
        Role::Other,
    ];

    /// What a replay replays unless told otherwise.
    pub const REPLAYED_BY_DEFAULT: [Role; 5] = [
        Role::Dataset,
        Role::Checkpoint,
        Role::Scratch,
        Role::Log,
        Role::Output,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Dataset => "dataset",
            Role::Checkpoint => "checkpoint",
            Role::Log => "log",
            Role::Output => "output",
            Role::Code => "code",
            Role::Scratch => "scratch",
            Role::Launcher => "launcher",
            Role::System => "system",
            Role::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Every role's name, for messages: `dataset, checkpoint, ...`.
    pub fn names() -> String {
        Self::ALL.map(Role::as_str).join(", ")
    }

    /// A `--roles` list as given (each name once, in the order given;
    /// `all` for every role), or what is wrong with a name. The one reading
    /// of the flag, so that `iorepro-trace filter` and `iorepro-replay`
    /// select the same files for the same words.
    pub fn parse_list(list: &[String]) -> Result<Vec<Role>, String> {
        let mut out = Vec::new();
        for name in list {
            let name = name.trim();
            if name == "all" {
                return Ok(Self::ALL.to_vec());
            }
            let r = Self::parse(name)
                .ok_or_else(|| format!("`{name}` is not a role ({}, all)", Self::names()))?;
            if !out.contains(&r) {
                out.push(r);
            }
        }
        Ok(out)
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
    /// Where the job made, changed or removed it (or asked to make it where
    /// it already was): when and by which process it first named it: a
    /// lookup that failed before it was there, or the first call that made
    /// it.
    #[serde(skip)]
    pub made_named: Option<Named>,
}

/// A call that named a file (kept with the activity the phases read).
pub use crate::activity::Named;

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

/// Paths, calls and bytes of one role on one mount.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RoleMountTotals {
    pub role: Role,
    pub mount_point: String,
    pub fs_type: String,
    #[serde(flatten)]
    pub totals: RoleTotals,
}

/// Paths, calls and bytes of one role.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct RoleTotals {
    /// Paths that are no directory.
    pub files: u64,
    /// Directories (listed, created, or holding another path).
    pub directories: u64,
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
pub const ROLE_COLUMNS: [&str; 10] = [
    COL_TS,
    COL_PID,
    COL_OP,
    COL_PATH,
    COL_PATH2,
    COL_RET,
    COL_FLAGS,
    COL_CALLS,
    COL_PATH_TRAITS,
    COL_PATH2_TRAITS,
];

impl FileRoles {
    /// One parallel pass over the trace ([`iorepro_format::scan`]).
    pub fn compute(reader: &TraceReader) -> TraceResult<FileRoles> {
        let mut b = RolesBuilder::default();
        scan(reader, &ROLE_COLUMNS, RolesBuilder::default, |part| {
            b.merge(part)
        })?;
        Ok(b.finish_with_mounts(reader))
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
            .lookup(&spelling(path))
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

    /// Paths, calls and bytes per role and mount, in role order and busiest
    /// mount first within a role; counted as [`Self::totals`] counts them,
    /// so a role's rows add up to its totals and a mount's to its
    /// [`Self::per_mount`] (its files and directories together).
    pub fn per_role_and_mount(&self) -> Vec<RoleMountTotals> {
        let mut by: BTreeMap<(Role, &str), RoleMountTotals> = BTreeMap::new();
        for f in self.files.values() {
            let r = by
                .entry((f.role, f.mount.as_str()))
                .or_insert_with(|| RoleMountTotals {
                    role: f.role,
                    mount_point: f.mount.clone(),
                    fs_type: f.fs_type.clone(),
                    totals: RoleTotals::default(),
                });
            let t = &mut r.totals;
            if f.directory {
                t.directories += 1;
            } else {
                t.files += 1;
            }
            t.calls += f.calls;
            t.read_bytes += f.read_bytes;
            t.write_bytes += f.write_bytes;
        }
        let mut v: Vec<RoleMountTotals> = by.into_values().collect();
        v.sort_by(|a, b| {
            let (ta, tb) = (&a.totals, &b.totals);
            a.role
                .cmp(&b.role)
                .then(
                    (tb.read_bytes + tb.write_bytes, tb.calls)
                        .cmp(&(ta.read_bytes + ta.write_bytes, ta.calls)),
                )
                .then(a.mount_point.cmp(&b.mount_point))
        });
        v
    }

    /// The role of `path`, however the trace spells it; a path the trace
    /// does not hold is judged by its name alone.
    pub fn role(&self, path: &str) -> Role {
        let key = spelling(path);
        match self.files.get(&key) {
            Some(f) => f.role,
            None => judge::by_name_alone(&key),
        }
    }

    /// The entry of `path`, however the trace spells it.
    pub fn get(&self, path: &str) -> Option<&FileRole> {
        self.files.get(&spelling(path))
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

    /// When the job first named each checkpoint file or folder it made:
    /// where a save that looks up its path before it writes begins (see
    /// [`crate::phases::begin_saves_where_named`]).
    pub fn checkpoints_named(&self) -> Vec<Named> {
        self.files
            .values()
            .filter(|f| f.role == Role::Checkpoint)
            .filter_map(|f| f.made_named)
            .collect()
    }

    /// Files, calls and bytes per role (every role, zero where none).
    pub fn totals(&self) -> &BTreeMap<Role, RoleTotals> {
        &self.totals
    }
}

impl RolesBuilder {
    /// Judges every path seen (see the module's rules).
    pub fn finish(self) -> FileRoles {
        judge::finish(self)
    }

    /// The same, with every path put on its mount from `reader`'s manifest.
    pub fn finish_with_mounts(self, reader: &TraceReader) -> FileRoles {
        let mut roles = self.finish();
        if let Some(m) = &reader.manifest().mounts {
            roles.assign_mounts(&MountTable::new(m));
        }
        roles
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

#[cfg(test)]
mod tests;
