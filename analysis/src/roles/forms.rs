//! How a trace spells a path, and what kind of name it is. The kernel
//! accepts many spellings of one file (`d/./f`, `d/x/../f`, `d/`, `d/.`),
//! names that are no file at all (pipes, sockets, anonymous inodes), and
//! files that stand for the kernel rather than storage (/proc, /sys, /dev),
//! and names an interpreter makes up that were never files
//! (`<frozen importlib._bootstrap>`). Analysis and replay agree on one
//! spelling through the format's [`spelled`], on what a name is through [`form_of`],
//! on which files an `--include` or `--exclude` prefix selects through
//! [`beneath`], and on which files belong to a launcher or runtime rather
//! than to the job through [`is_launcher_file`].

use std::path::Path;

use super::names::under;
// The format's rule: the collector records it before it hashes a name.
pub use iorepro_format::path_traits::is_launcher_file;
use iorepro_format::paths::{spelled, spelling};
use serde::Serialize;

/// Whether `path` (in its one spelling, see [`spelled`]) lies at or beneath
/// `prefix`, component by component: `/data/val` holds `/data/val/1.jpg`
/// but not `/data/validation`. The prefix is taken in its canonical
/// spelling too, so `/data/val/` and `/data/./val` select the same files.
pub fn beneath(path: &str, prefix: &str) -> bool {
    let prefix = spelling(prefix);
    prefix == "/" || Path::new(path).starts_with(&prefix)
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
    /// A name that was never a file: Python's `<frozen ...>`, `<string>`,
    /// `<stdin>` (a path component of the form `<...>`), which the
    /// interpreter stats, often as if relative to its working directory.
    Pseudo,
    /// An object-storage request's URL (`http://...`, `https://...`).
    Url,
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
            Form::Pseudo => "not_a_file",
            Form::Url => "object_request",
        }
    }
}

/// What kind of name `path` (as the trace spells it) is.
pub fn form_of(path: &str) -> Form {
    if path.is_empty() {
        return Form::Empty;
    }
    if iorepro_format::paths::is_url(path) {
        return Form::Url;
    }
    if is_pseudo(path) {
        return Form::Pseudo;
    }
    if !path.starts_with('/') {
        let special = ["pipe:", "socket:", "anon_inode:", "memfd:"];
        return if path.contains(":[") || special.iter().any(|s| path.starts_with(s)) {
            Form::Special
        } else {
            Form::Relative
        };
    }
    let Some(p) = spelled(path) else {
        return Form::Special;
    };
    let p = &*p;
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

/// Whether a component of `path` is a made-up name of the form `<...>`.
fn is_pseudo(path: &str) -> bool {
    path.contains('<')
        && path
            .split('/')
            .any(|c| c.len() >= 2 && c.starts_with('<') && c.ends_with('>'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beneath_goes_by_components_and_spelling() {
        assert!(beneath("/data/val/1.jpg", "/data/val"));
        assert!(beneath("/data/val/1.jpg", "/data/./val/"));
        assert!(beneath("/data/val", "/data/val"));
        assert!(!beneath("/data/validation/1.jpg", "/data/val"));
        assert!(beneath("/anything", "/"));
        assert!(beneath("/anything", "/x/.."));
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
        assert_eq!(form_of("<frozen importlib._bootstrap>"), Form::Pseudo);
        assert_eq!(form_of("<string>"), Form::Pseudo);
        assert_eq!(
            form_of("/home/x/<frozen importlib._bootstrap_external>"),
            Form::Pseudo
        );
        assert_eq!(form_of("/data/<a>/f"), Form::Pseudo);
        assert_eq!(form_of("/data/a<b>"), Form::File);
        assert_eq!(Form::Pseudo.as_str(), "not_a_file");
    }
}
