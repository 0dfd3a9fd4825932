//! What a replay replays: by default the I/O of the job's dataset,
//! checkpoint and scratch files (see [`iorepro_analysis::roles`]);
//! `--roles` chooses other roles, `--include PREFIX` adds the paths beneath
//! a prefix whatever their role, `--exclude PREFIX` leaves them out. Names
//! that have no counterpart beneath a target are always left out: the root
//! `/`, the kernel's files (/proc, /sys), devices (/dev but /dev/shm),
//! pipes, sockets, anonymous inodes and memfds, a call naming the empty
//! path that acts on no descriptor, and the URL of an object-storage
//! request the replay does not make (one that failed, or a bucket's own
//! settings; the others are file calls by then, see
//! [`crate::plan::requests_as_calls`]). Every call left out is counted, by role and
//! by reason, and shown before the replay starts and in its report.

use std::collections::BTreeMap;

use serde::Serialize;

use iorepro_analysis::roles::forms::{beneath, form_of, Form};
use iorepro_analysis::roles::Role;

/// Which files' calls a replay makes.
#[derive(Debug, Clone, PartialEq)]
pub struct Scope {
    pub roles: Vec<Role>,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

impl Default for Scope {
    fn default() -> Self {
        Scope {
            roles: Role::REPLAYED_BY_DEFAULT.to_vec(),
            include: Vec::new(),
            exclude: Vec::new(),
        }
    }
}

/// Why a path's calls are left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Skip {
    /// A name with no counterpart beneath a target.
    Form(Form),
    /// Beneath an `--exclude` prefix.
    Excluded,
    /// Its role is not replayed.
    Role(Role),
}

impl Skip {
    /// The reason as the report's key.
    pub fn key(self) -> String {
        match self {
            Skip::Form(Form::Root) => "root_directory".into(),
            Skip::Form(Form::Empty) => "empty_path".into(),
            Skip::Form(Form::Kernel) => "kernel_file".into(),
            Skip::Form(Form::Device) => "device".into(),
            Skip::Form(Form::Special) => "pipe_socket_or_anonymous".into(),
            Skip::Form(f) => f.as_str().into(),
            Skip::Excluded => "excluded".into(),
            // The launcher's own files are left out for what they are, not
            // as a role a user might choose to replay.
            Skip::Role(Role::Launcher) => "launcher".into(),
            Skip::Role(r) => format!("role_{r}"),
        }
    }
}

impl Scope {
    /// Why the calls naming `path` (whose role is `role`) are left out, if they are.
    pub fn decide(&self, path: &str, role: Role) -> Option<Skip> {
        match form_of(path) {
            f @ (Form::Root
            | Form::Empty
            | Form::Kernel
            | Form::Device
            | Form::Special
            | Form::Pseudo
            // Requests the replay does not make (crate::plan::requests_as_calls).
            | Form::Url) => return Some(Skip::Form(f)),
            Form::File | Form::Relative => {}
        }
        if self.exclude.iter().any(|p| beneath(path, p)) {
            return Some(Skip::Excluded);
        }
        if self.include.iter().any(|p| beneath(path, p)) || self.roles.contains(&role) {
            return None;
        }
        Some(Skip::Role(role))
    }

    /// The roles replayed, as a list for messages.
    pub fn describe(&self) -> String {
        let mut s: Vec<String> = self.roles.iter().map(|r| r.to_string()).collect();
        s.extend(self.include.iter().map(|p| format!("+{p}")));
        s.extend(self.exclude.iter().map(|p| format!("-{p}")));
        s.join(",")
    }
}

/// Files, calls and bytes left out of a replay (in all, or of one role,
/// reason or mount).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct LeftOutCount {
    pub files: u64,
    pub calls: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl LeftOutCount {
    pub(crate) fn add(&mut self, other: &LeftOutCount) {
        self.files += other.files;
        self.calls += other.calls;
        self.read_bytes += other.read_bytes;
        self.write_bytes += other.write_bytes;
    }
}

/// What a replay leaves out of the trace: in all, by the files' role, and
/// by reason.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LeftOut {
    /// The roles (and prefixes) replayed.
    pub scope: String,
    #[serde(flatten)]
    pub total: LeftOutCount,
    pub roles: BTreeMap<String, LeftOutCount>,
    pub reasons: BTreeMap<String, LeftOutCount>,
    /// By the mount (file system) the files were on; `unknown` for a
    /// trace without a mount table.
    pub mounts: BTreeMap<String, LeftOutCount>,
}

impl LeftOut {
    /// One line per role left out, for a person.
    pub fn render(&self) -> String {
        use iorepro_format::units::fmt_bytes;
        if self.total.calls == 0 {
            return format!("replaying {}: nothing left out\n", self.scope);
        }
        let mut s = format!(
            "replaying {}; left out {} calls on {} files ({} read, {} written):\n",
            self.scope,
            self.total.calls,
            self.total.files,
            fmt_bytes(self.total.read_bytes as f64),
            fmt_bytes(self.total.write_bytes as f64)
        );
        for (why, t) in &self.reasons {
            s.push_str(&format!(
                "  {why:<26} {:>10} calls {:>8} files {:>12} read {:>12} written\n",
                t.calls,
                t.files,
                fmt_bytes(t.read_bytes as f64),
                fmt_bytes(t.write_bytes as f64)
            ));
        }
        if self
            .mounts
            .keys()
            .any(|m| m != iorepro_format::mounts::UNKNOWN_MOUNT)
        {
            for (mount, t) in &self.mounts {
                s.push_str(&format!(
                    "  on {mount:<23} {:>10} calls {:>8} files {:>12} read {:>12} written\n",
                    t.calls,
                    t.files,
                    fmt_bytes(t.read_bytes as f64),
                    fmt_bytes(t.write_bytes as f64)
                ));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_decides_by_form_prefix_and_role() {
        let s = Scope {
            include: vec!["/opt/model/".into()],
            exclude: vec!["/data/val".into()],
            ..Default::default()
        };
        assert_eq!(s.decide("/", Role::System), Some(Skip::Form(Form::Root)));
        assert_eq!(s.decide("", Role::Other), Some(Skip::Form(Form::Empty)));
        assert_eq!(
            s.decide("/proc/self/maps", Role::Dataset),
            Some(Skip::Form(Form::Kernel))
        );
        assert_eq!(
            s.decide("/data/val/1.jpg", Role::Dataset),
            Some(Skip::Excluded)
        );
        assert_eq!(s.decide("/data/validation/1.jpg", Role::Dataset), None);
        assert_eq!(s.decide("/opt/model/w.py", Role::Code), None);
        assert_eq!(
            s.decide("/venv/x.py", Role::Code),
            Some(Skip::Role(Role::Code))
        );
        assert_eq!(s.decide("/dev/shm/x", Role::Scratch), None);
    }
}
