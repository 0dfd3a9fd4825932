//! Every filesystem call the replayer makes under `--target` goes through
//! [`Confined`]: paths are resolved by the kernel with `openat2(2)` and
//! `RESOLVE_BENEATH`, so `..` and symlinks planted inside the target cannot
//! lead outside it (the kernel answers EXDEV, reported as a refusal), and
//! directory-changing calls (`mkdirat`, `unlinkat`, `renameat`) act on a
//! parent directory opened that way, never on a path string.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};

use crate::io::engine::{Engine, OpenHow, Psync};

/// A directory handle that every replay path is resolved beneath.
#[derive(Debug)]
pub struct Confined {
    root: OwnedFd,
    root_path: PathBuf,
}

pub fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

impl Confined {
    /// Opens the target directory itself (the one path the user named).
    pub fn open_root(path: &Path) -> io::Result<Self> {
        let c = cstr(path)?;
        let root = rustix::fs::open(
            c.as_c_str(),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Confined {
            root,
            root_path: path.to_path_buf(),
        })
    }

    /// The target directory, held open.
    pub fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    pub fn root_path(&self) -> &Path {
        &self.root_path
    }

    /// Why the target is gone, if it is: its directory was removed (no links
    /// are left to it), or its path now leads elsewhere (unmounted, replaced).
    pub fn vanished(&self) -> Option<String> {
        let st = match rustix::fs::fstat(&self.root) {
            Ok(st) => st,
            Err(e) => return Some(format!("{}", io::Error::from(e))),
        };
        if st.st_nlink == 0 {
            return Some("its directory was removed".into());
        }
        match std::fs::metadata(&self.root_path) {
            Err(e) => Some(format!("the path no longer resolves ({e})")),
            Ok(m) if (m.dev(), m.ino()) != (st.st_dev, st.st_ino) => {
                Some("the path now leads to another directory (unmounted or replaced)".into())
            }
            Ok(_) => None,
        }
    }

    /// Whether the target vanished; when `look_again` (calls failed), asked
    /// again for up to a second, so a target whose removal was still under
    /// way is named as such.
    pub fn vanished_settled(&self, look_again: bool) -> Option<String> {
        let mut why = self.vanished();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while why.is_none() && look_again && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            why = self.vanished();
        }
        why
    }

    /// The absolute path a relative one stands for (for messages and records only).
    pub fn display(&self, rel: &Path) -> PathBuf {
        self.root_path.join(rel)
    }

    /// How every open beneath the root resolves: never above it, never
    /// through a magic link.
    fn how(flags: i32, mode: u32) -> OpenHow {
        OpenHow {
            flags: (flags | libc::O_CLOEXEC) as u32 as u64,
            mode: if flags & libc::O_CREAT != 0 {
                mode as u64
            } else {
                0
            },
            resolve: (ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS).bits(),
        }
    }

    /// Opens `rel` (relative, already normalised) beneath the root.
    pub fn open(&self, rel: &Path, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        self.open_via(&mut Psync, rel, flags, mode)
    }

    /// Opens `rel` beneath the root through `engine` (an io_uring request
    /// when the trace's open was one).
    pub fn open_via(
        &self,
        engine: &mut dyn Engine,
        rel: &Path,
        flags: i32,
        mode: u32,
    ) -> io::Result<OwnedFd> {
        let c = cstr(rel)?;
        engine.open_at(self.root.as_raw_fd(), &c, &Self::how(flags, mode))
    }

    /// A directory beneath the root (the root itself for an empty path),
    /// held to name entries in it.
    pub fn open_dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        self.open(rel, libc::O_PATH | libc::O_DIRECTORY, 0)
    }

    /// `mkdir -p` beneath the root, one component at a time, each created in
    /// a parent opened beneath the root (a planted symlink is never followed out).
    pub fn create_dirs(&self, rel_dir: &Path) -> io::Result<()> {
        if self.open_dir(rel_dir).is_ok() {
            return Ok(());
        }
        let mut so_far = PathBuf::new();
        for comp in rel_dir.components() {
            let Component::Normal(name) = comp else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "path is not normalised",
                ));
            };
            let parent = self.open_dir(&so_far)?;
            let c = cstr(Path::new(name))?;
            match rustix::fs::mkdirat(&parent, c.as_c_str(), Mode::from_bits_retain(0o755)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            so_far.push(name);
        }
        // Prove the result is a directory reachable beneath the root.
        self.open_dir(rel_dir).map(drop)
    }

    /// A path's directory and its last component.
    pub fn split(rel: &Path) -> io::Result<(&Path, CString)> {
        let name = rel
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
        Ok((
            rel.parent().unwrap_or(Path::new("")),
            cstr(Path::new(name))?,
        ))
    }

    /// Removes a file; `unlinkat` does not follow a final symlink, and the
    /// parent is resolved beneath the root.
    pub fn unlink(&self, rel: &Path) -> io::Result<()> {
        let (parent, name) = Self::split(rel)?;
        let dir = self.open_dir(parent)?;
        Ok(rustix::fs::unlinkat(
            &dir,
            name.as_c_str(),
            AtFlags::empty(),
        )?)
    }

    /// Removes an empty directory, resolved like [`Confined::unlink`].
    pub fn remove_dir(&self, rel: &Path) -> io::Result<()> {
        let (parent, name) = Self::split(rel)?;
        let dir = self.open_dir(parent)?;
        Ok(rustix::fs::unlinkat(
            &dir,
            name.as_c_str(),
            AtFlags::REMOVEDIR,
        )?)
    }

    /// The names in a directory beneath the root (one directory read, however
    /// many entries: what makes polling a directory cheap).
    pub fn list_dir(&self, rel: &Path) -> io::Result<Vec<std::ffi::OsString>> {
        let dir = self.open(rel, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        // The descriptor's /proc link reads the directory it holds, not a path.
        let listing = Path::new("/proc/self/fd").join(dir.as_raw_fd().to_string());
        std::fs::read_dir(listing)?
            .map(|e| e.map(|e| e.file_name()))
            .collect()
    }

    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (fp, fname) = Self::split(from)?;
        let (tp, tname) = Self::split(to)?;
        let fdir = self.open_dir(fp)?;
        let tdir = self.open_dir(tp)?;
        Ok(rustix::fs::renameat(
            &fdir,
            fname.as_c_str(),
            &tdir,
            tname.as_c_str(),
        )?)
    }

    /// Removes whatever is at `rel`, a directory with all it holds; `false`
    /// when nothing was there. Nothing is followed: each entry is removed
    /// from its own directory, opened without following a symlink.
    pub fn remove_all(&self, rel: &Path) -> io::Result<bool> {
        let (parent, name) = Self::split(rel)?;
        let dir = match self.open_dir(parent) {
            Ok(d) => d,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                return Ok(false)
            }
            Err(e) => return Err(e),
        };
        remove_entry(&dir, &name)
    }

    /// Size of a regular file beneath the root, `None` when it does not exist.
    pub fn file_size(&self, rel: &Path) -> io::Result<Option<u64>> {
        match self.open(rel, libc::O_PATH, 0) {
            Ok(fd) => Ok(Some(rustix::fs::fstat(&fd)?.st_size as u64)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Removes `name` from the open directory `dir`, recursively.
fn remove_entry(dir: &OwnedFd, name: &std::ffi::CStr) -> io::Result<bool> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) => return Ok(true),
        Err(rustix::io::Errno::NOENT) => return Ok(false),
        Err(rustix::io::Errno::ISDIR) => {}
        Err(e) => return Err(e.into()),
    }
    // O_NOFOLLOW keeps a symlink from being entered.
    let sub = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    for entry in entries(&sub)? {
        remove_entry(&sub, &entry)?;
    }
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?;
    Ok(true)
}

/// The names in an open directory, without `.` and `..`.
fn entries(dir: &OwnedFd) -> io::Result<Vec<CString>> {
    let mut names = Vec::new();
    // The stream reads a duplicate of the descriptor, and closes it.
    let stream = rustix::fs::Dir::new(rustix::io::fcntl_dupfd_cloexec(dir, 0)?)?;
    for entry in stream {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_bytes() != b"." && name.to_bytes() != b".." {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}
