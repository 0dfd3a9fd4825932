//! How a trace spells a path, and what kind of name it is. The kernel
//! accepts many spellings of one file (`d/./f`, `d/x/../f`, `d/`, `d/.`),
//! names that are no file at all (pipes, sockets, anonymous inodes), and
//! files that stand for the kernel rather than storage (/proc, /sys, /dev).
//! Analysis and replay agree on one spelling through [`canonical`] and on
//! what a name is through [`form_of`].

use serde::Serialize;

/// A path reduced to one spelling: `.` dropped, `..` taken back lexically
/// (never above the root), repeated and trailing slashes gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonical {
    pub path: String,
    /// The spelling ended in `/`, `/.` or `/..`: it can only name a directory.
    pub names_dir: bool,
}

/// The one spelling of `path`; `None` for the empty path (a call on a
/// descriptor: `AT_EMPTY_PATH`, `fstat`) and for names that are no path
/// (`pipe:[12]`), which are returned as they are by [`form_of`].
pub fn canonical(path: &str) -> Option<Canonical> {
    if path.is_empty() || !path.starts_with('/') && path.contains(":[") {
        return None;
    }
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    let mut names_dir = false;
    for comp in path.split('/') {
        names_dir = false;
        match comp {
            "" | "." => names_dir = true,
            ".." => {
                names_dir = true;
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            c => parts.push(c),
        }
    }
    let joined = parts.join("/");
    let path = if absolute {
        format!("/{joined}")
    } else if joined.is_empty() {
        ".".to_string()
    } else {
        joined
    };
    let names_dir = names_dir && path != "/";
    Some(Canonical { path, names_dir })
}

/// What a name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// A file or directory on a file system.
    File,
    /// The root directory `/`.
    Root,
    /// The empty path: the call acted on a descriptor.
    Empty,
    /// A name relative to a working directory the trace does not know.
    Relative,
    /// /proc and /sys: the kernel's own files.
    Kernel,
    /// /dev (not /dev/shm, which is memory the job writes as files).
    Device,
    /// A pipe, socket, anonymous inode (eventfd, epoll...) or memfd.
    Special,
}

impl Form {
    pub fn as_str(self) -> &'static str {
        match self {
            Form::File => "file",
            Form::Root => "root",
            Form::Empty => "empty",
            Form::Relative => "relative",
            Form::Kernel => "kernel",
            Form::Device => "device",
            Form::Special => "special",
        }
    }
}

fn under(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// What kind of name `path` (as the trace spells it) is.
pub fn form_of(path: &str) -> Form {
    if path.is_empty() {
        return Form::Empty;
    }
    if !path.starts_with('/') {
        let special = ["pipe:", "socket:", "anon_inode:", "memfd:"];
        return if path.contains(":[") || special.iter().any(|s| path.starts_with(s)) {
            Form::Special
        } else {
            Form::Relative
        };
    }
    let Some(c) = canonical(path) else {
        return Form::Special;
    };
    let p = c.path.as_str();
    if p == "/" {
        Form::Root
    } else if p.starts_with("/memfd:") {
        Form::Special
    } else if under(p, "/proc") || under(p, "/sys") {
        Form::Kernel
    } else if under(p, "/dev") && !under(p, "/dev/shm") {
        Form::Device
    } else {
        Form::File
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(p: &str) -> (String, bool) {
        let c = canonical(p).unwrap();
        (c.path, c.names_dir)
    }

    #[test]
    fn one_spelling_per_path() {
        assert_eq!(c("/d/./f"), ("/d/f".into(), false));
        assert_eq!(c("/d/."), ("/d".into(), true));
        assert_eq!(c("/d/x/.."), ("/d".into(), true));
        assert_eq!(c("/d//f/"), ("/d/f".into(), true));
        assert_eq!(c("/../../etc/x"), ("/etc/x".into(), false));
        assert_eq!(c("/"), ("/".into(), false));
        assert_eq!(c("/."), ("/".into(), false));
        assert_eq!(c("a/../../b"), ("../b".into(), false));
        assert!(canonical("").is_none());
        assert!(canonical("pipe:[123]").is_none());
    }

    #[test]
    fn forms() {
        assert_eq!(form_of("/"), Form::Root);
        assert_eq!(form_of("/x/.."), Form::Root);
        assert_eq!(form_of(""), Form::Empty);
        assert_eq!(form_of("rel/f"), Form::Relative);
        assert_eq!(form_of("pipe:[77]"), Form::Special);
        assert_eq!(form_of("socket:[9]"), Form::Special);
        assert_eq!(form_of("anon_inode:[eventfd]"), Form::Special);
        assert_eq!(form_of("/memfd:buf (deleted)"), Form::Special);
        assert_eq!(form_of("/proc/self/status"), Form::Kernel);
        assert_eq!(form_of("/sys/fs/cgroup/cpu.max"), Form::Kernel);
        assert_eq!(form_of("/dev/null"), Form::Device);
        assert_eq!(form_of("/dev/shm/torch_1"), Form::File);
        assert_eq!(form_of("/processed/x"), Form::File);
        assert_eq!(form_of("/data/f"), Form::File);
    }
}
