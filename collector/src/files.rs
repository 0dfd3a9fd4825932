//! Which path a kernel record is about.
//!
//! Every record of an open file carries the file's (device, inode), read from
//! the descriptor in the kernel at the time of the call, so a descriptor's
//! history (dup, dup2/dup3, fork, exec, passing over a socket, reuse of a
//! closed number) never has to be replayed here: the inode names the file.
//! Paths are learned from `open` records (absolute, or joined to the inode of
//! the directory they were relative to), from `rename`, and for files opened
//! before tracing began, from `/proc/PID/fd`, `/proc/PID/maps` and `/proc/PID/cwd`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use iorepro_format::paths::spelling;
use std::rc::Rc;

use rustc_hash::FxHashMap;

/// `(user-space st_dev, inode)`.
pub type FileKey = (u64, u64);

/// Converts the kernel's internal dev_t (major << 20 | minor) to `st_dev`.
pub fn user_dev(kernel_dev: u32) -> u64 {
    rustix::fs::makedev(kernel_dev >> 20, kernel_dev & 0xfffff)
}

#[derive(Default)]
pub struct FileTable {
    paths: FxHashMap<FileKey, Rc<str>>,
}

impl FileTable {
    pub fn learn(&mut self, key: FileKey, path: &str) -> Rc<str> {
        if let Some(p) = self.paths.get(&key) {
            if &**p == path {
                return p.clone();
            }
        }
        let p: Rc<str> = Rc::from(path);
        self.paths.insert(key, p.clone());
        p
    }

    pub fn get(&self, key: FileKey) -> Option<Rc<str>> {
        self.paths.get(&key).cloned()
    }

    /// The path of an open file; for a file whose open was not seen, the
    /// process's descriptor link, checked to be that very inode.
    pub fn path_of(&mut self, key: FileKey, tgid: u32, fd: i32) -> Option<Rc<str>> {
        if let Some(p) = self.paths.get(&key) {
            return Some(p.clone());
        }
        if fd < 0 {
            return None;
        }
        let link = PathBuf::from(format!("/proc/{tgid}/fd/{fd}"));
        let p = verified_link(&link, key)?;
        Some(self.learn(key, &p))
    }

    /// Joins a path argument to the directory it is relative to.
    pub fn resolve(&mut self, raw: &str, dir: FileKey, tgid: u32) -> String {
        // The kernel already found the real file; the trace only needs the
        // format's one spelling of its name.
        if raw.starts_with('/') {
            return spelling(raw);
        }
        let base = self.paths.get(&dir).map(|p| p.to_string()).or_else(|| {
            // The working directory is the usual start; check it is the same inode.
            let cwd = PathBuf::from(format!("/proc/{tgid}/cwd"));
            let p = verified_link(&cwd, dir)?;
            self.learn(dir, &p);
            Some(p)
        });
        match base {
            Some(b) => spelling(&format!("{b}/{raw}")),
            // Unknown start directory: kept as given, visibly relative.
            None => raw.to_string(),
        }
    }

    /// Follows a rename: the file and, for a directory, everything below it.
    pub fn rename(&mut self, from: &str, to: &str) {
        let below = format!("{from}/");
        for p in self.paths.values_mut() {
            if &**p == from {
                *p = Rc::from(to);
            } else if let Some(rest) = p.strip_prefix(&below) {
                *p = Rc::from(format!("{to}/{rest}"));
            }
        }
    }

    /// Files a process already had open or mapped, and its working directory.
    pub fn scan_process(&mut self, tgid: u32) {
        let proc = PathBuf::from(format!("/proc/{tgid}"));
        if let Ok(dir) = std::fs::read_dir(proc.join("fd")) {
            for e in dir.flatten() {
                self.learn_link(&e.path());
            }
        }
        self.learn_link(&proc.join("cwd"));
        if let Ok(maps) = std::fs::read_to_string(proc.join("maps")) {
            for line in maps.lines() {
                self.learn_mapping(line);
            }
        }
    }

    /// The program a process just exec'd (its pages fault in without an open).
    pub fn learn_exe(&mut self, tgid: u32) {
        self.learn_link(&PathBuf::from(format!("/proc/{tgid}/exe")));
    }

    fn learn_link(&mut self, link: &Path) {
        let (Ok(target), Ok(meta)) = (std::fs::read_link(link), std::fs::metadata(link)) else {
            return;
        };
        if target.is_absolute() {
            self.learn((meta.dev(), meta.ino()), &target.to_string_lossy());
        }
    }

    /// `addr perms offset MAJ:MIN inode path` lines of /proc/PID/maps.
    fn learn_mapping(&mut self, line: &str) {
        let mut f = line.split_whitespace();
        let (Some(_), Some(_), Some(_), Some(dev), Some(ino)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            return;
        };
        let path = f.collect::<Vec<_>>().join(" ");
        let (Some((maj, min)), Ok(ino)) = (dev.split_once(':'), ino.parse::<u64>()) else {
            return;
        };
        let (Ok(maj), Ok(min)) = (u32::from_str_radix(maj, 16), u32::from_str_radix(min, 16))
        else {
            return;
        };
        if ino != 0 && path.starts_with('/') && !path.ends_with(" (deleted)") {
            self.learn((rustix::fs::makedev(maj, min), ino), &path);
        }
    }
}

/// The target of a /proc link, if it still names the inode `key`.
fn verified_link(link: &Path, key: FileKey) -> Option<String> {
    let target = std::fs::read_link(link).ok()?;
    let meta = std::fs::metadata(link).ok()?;
    ((meta.dev(), meta.ino()) == key && target.is_absolute())
        .then(|| target.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_joined_to_their_directory_in_one_spelling() {
        let mut t = FileTable::default();
        t.learn((1, 9), "/data/run");
        assert_eq!(t.resolve("/a/./b/../c//d", (1, 9), 0), "/a/c/d");
        assert_eq!(t.resolve("../x/./y", (1, 9), 0), "/data/x/y");
        assert_eq!(t.resolve("../../../z", (1, 9), 0), "/z");
    }

    #[test]
    fn rename_moves_files_below_a_directory() {
        let mut t = FileTable::default();
        t.learn((1, 1), "/d/old/f");
        t.learn((1, 2), "/d/old");
        t.learn((1, 3), "/d/older");
        t.rename("/d/old", "/d/new");
        assert_eq!(t.get((1, 1)).as_deref(), Some("/d/new/f"));
        assert_eq!(t.get((1, 2)).as_deref(), Some("/d/new"));
        assert_eq!(t.get((1, 3)).as_deref(), Some("/d/older"));
    }

    #[test]
    fn maps_lines_name_inodes() {
        let mut t = FileTable::default();
        t.learn_mapping("7f00-7f10 r--s 00000000 08:01 1234 /data/x y.npy");
        assert_eq!(
            t.get((rustix::fs::makedev(8, 1), 1234)).as_deref(),
            Some("/data/x y.npy")
        );
    }
}
