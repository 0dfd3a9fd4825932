//! The metadata calls of a replay (stat, access, mkdir, rmdir, directory
//! listings, unlink, rename, link, symlink), each made on the rank's copy of
//! the trace's path beneath the target. A name is made in its directory,
//! opened beneath the target and kept open for the calls that follow, so
//! nothing outside the target is reached and a storm of stats in one
//! directory costs one syscall a stat, as it did the traced job. The call's
//! own failure is its result, not an error of the replay: the trace's probes
//! for missing files fail here too. A stat or access that failed in the
//! trace names its whole path from the target's root, one call as the
//! traced one was, even where a directory on the way is missing; should it
//! succeed here, it is made again the confined way and that answer counts,
//! so at most a failed lookup can pass a symlink planted beneath the target.

use std::ffi::{CStr, CString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode};

use iorepro_format::Op;

use super::files::{FileCalls, OpenFile};
use crate::error::ReplayResult;
use crate::io::confine::{cstr, Confined};
use crate::plan::ops::PlannedOp;
use crate::plan::survey::NO_PATH;

/// Directories held open at most; past it they are all let go.
const HELD_DIRECTORIES: usize = 4096;
/// A listing's buffer: what the traced call asked for, within these bounds.
const LISTING_MIN: usize = 1 << 10;
const LISTING_MAX: usize = 1 << 20;

/// faccessat(2) of `name` at `dir`, judging a final symlink itself (it is
/// not followed out). Stays on libc: on kernels without faccessat2 (before
/// 5.8) glibc emulates AT_SYMLINK_NOFOLLOW with a stat, where rustix answers
/// ENOSYS, which the traced call never saw.
fn access_nofollow(dir: BorrowedFd<'_>, name: &CStr, mode: i32) -> io::Result<()> {
    // SAFETY: dir is an open directory and name a C string.
    let r = unsafe {
        libc::faccessat(
            dir.as_raw_fd(),
            name.as_ptr(),
            mode,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Where a name is looked up: a directory held open, or the target's root.
enum Dir {
    Held(Arc<OwnedFd>),
    Root,
}

impl Dir {
    fn fd<'a>(&'a self, root: BorrowedFd<'a>) -> BorrowedFd<'a> {
        match self {
            Dir::Held(fd) => fd.as_fd(),
            Dir::Root => root,
        }
    }
}

/// What a symlink holds: a relative target as written; an absolute one
/// pointed at its copy beneath the target, relative to the link, so the
/// link leads where the traced one did and never outside.
fn link_text(target: &str, target_rel: &Path, link_rel: &Path) -> PathBuf {
    if !target.starts_with('/') {
        return PathBuf::from(target);
    }
    let depth = link_rel.parent().map_or(0, |p| {
        p.components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count()
    });
    let mut text: PathBuf = std::iter::repeat_n("..", depth).collect();
    text.push(target_rel);
    text
}

impl FileCalls<'_> {
    /// Makes a metadata call: `None` when it names nothing the replay can
    /// make it on, else the call's own result.
    pub(super) fn metadata(&mut self, op: &PlannedOp) -> ReplayResult<Option<io::Result<()>>> {
        let key = (op.pid, op.fd);
        if op.op == Op::Stat && op.fd >= 0 {
            if let Some(f) = self.files.get(&key) {
                let fd = f.fd.as_raw_fd();
                return Ok(Some(
                    self.engine.stat_at(fd, c"", libc::AT_EMPTY_PATH).map(drop),
                ));
            }
        }
        if op.op == Op::Getdents {
            return self.list(op);
        }
        if op.path == NO_PATH {
            return Ok(None);
        }
        let rel = self.places.rel_path(op.path)?;
        if op.failed && matches!(op.op, Op::Stat | Op::Access) {
            let conf = self.conf;
            let from_root = cstr(&rel).and_then(|path| self.look(op, conf.root(), &path));
            if from_root.is_err() {
                return Ok(Some(from_root));
            }
        }
        let result = match op.op {
            Op::Stat => self.stat(&rel, op.flags.unwrap_or(0)),
            Op::Access => self.at(&rel, |dir, name| {
                access_nofollow(dir, name, op.flags.unwrap_or(libc::F_OK))
            }),
            Op::Mkdir => self.at(&rel, |dir, name| {
                let mode = op.flags.map_or(0o755, |m| m as u32 & 0o7777);
                Ok(rustix::fs::mkdirat(
                    dir,
                    name,
                    Mode::from_bits_retain(mode),
                )?)
            }),
            Op::Rmdir | Op::Unlink => {
                let flags = if op.op == Op::Rmdir {
                    AtFlags::REMOVEDIR
                } else {
                    AtFlags::empty()
                };
                let r = self.at(&rel, |dir, name| {
                    Ok(rustix::fs::unlinkat(dir, name, flags)?)
                });
                if r.is_ok() && op.op == Op::Rmdir {
                    self.parents.clear();
                }
                r
            }
            Op::Rename | Op::Link => {
                // Traces without a second path name a rename's old name only:
                // it is renamed onto itself, the same lookups and no new name.
                let rel2 = if op.path2 == NO_PATH {
                    rel.clone()
                } else {
                    self.places.rel_path(op.path2)?
                };
                let r = self.between(&rel, &rel2, |d1, n1, d2, n2| {
                    let r = if op.op == Op::Rename {
                        rustix::fs::renameat(d1, n1, d2, n2)
                    } else {
                        rustix::fs::linkat(d1, n1, d2, n2, AtFlags::empty())
                    };
                    Ok(r?)
                });
                if r.is_ok()
                    && op.op == Op::Rename
                    && self.shared.survey.paths[op.path as usize].is_dir
                {
                    self.parents.clear();
                }
                r
            }
            Op::Symlink => {
                if op.path2 == NO_PATH {
                    return Ok(None);
                }
                let link = self.places.rel_path(op.path2)?;
                let target = self.shared.survey.paths[op.path as usize].path.clone();
                let text = match cstr(&link_text(&target, &rel, &link)) {
                    Ok(t) => t,
                    Err(e) => return Ok(Some(Err(e))),
                };
                self.at(&link, |dir, name| {
                    Ok(rustix::fs::symlinkat(text.as_c_str(), dir, name)?)
                })
            }
            _ => return Ok(None),
        };
        Ok(Some(result))
    }

    /// A stat or access of `path` at `dir` that follows no final symlink.
    fn look(&mut self, op: &PlannedOp, dir: BorrowedFd<'_>, path: &CStr) -> io::Result<()> {
        if op.op == Op::Stat {
            self.engine
                .stat_at(dir.as_raw_fd(), path, libc::AT_SYMLINK_NOFOLLOW)
                .map(drop)
        } else {
            access_nofollow(dir, path, op.flags.unwrap_or(libc::F_OK))
        }
    }

    /// A stat, following a final symlink unless the call said not to (it
    /// is followed beneath the target only).
    fn stat(&mut self, rel: &Path, flags: i32) -> io::Result<()> {
        let no_follow = flags & libc::AT_SYMLINK_NOFOLLOW != 0;
        let (dir, name) = self.parent(rel)?;
        let conf = self.conf;
        let dir = dir.fd(conf.root()).as_raw_fd();
        let mode = self.engine.stat_at(dir, &name, libc::AT_SYMLINK_NOFOLLOW)?;
        if no_follow || mode & libc::S_IFMT != libc::S_IFLNK {
            return Ok(());
        }
        let fd = self
            .conf
            .open_via(&mut *self.engine, rel, libc::O_PATH, 0)?;
        let r = self
            .engine
            .stat_at(fd.as_raw_fd(), c"", libc::AT_EMPTY_PATH);
        drop(fd);
        r.map(drop)
    }

    /// A directory listing: one getdents64 on the directory the traced
    /// descriptor held, opened beneath the target at its first listing.
    fn list(&mut self, op: &PlannedOp) -> ReplayResult<Option<io::Result<()>>> {
        let key = (op.pid, op.fd);
        if !self.files.contains_key(&key) {
            if op.path == NO_PATH {
                return Ok(None);
            }
            let rel = self.places.rel_path(op.path)?;
            let flags = libc::O_RDONLY | libc::O_DIRECTORY;
            let fd = match self.conf.open_via(&mut *self.engine, &rel, flags, 0) {
                Ok(fd) => fd,
                Err(e) => return Ok(Some(Err(e))),
            };
            self.files.insert(
                key,
                OpenFile {
                    id: op.path,
                    fd,
                    direct: None,
                    rel,
                    flags,
                    traced_direct: false,
                    pos: 0,
                },
            );
        }
        let len = (op.bytes.max(0) as usize).clamp(LISTING_MIN, LISTING_MAX);
        if self.listing.len() < len {
            self.listing.resize(len, MaybeUninit::uninit());
        }
        // The first entry asks for one getdents64 of the buffer; the rest
        // of what it read is dropped with the reader.
        let fd = &self.files[&key].fd;
        let mut dir = rustix::fs::RawDir::new(fd, &mut self.listing[..len]);
        Ok(Some(match dir.next() {
            None | Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(e.into()),
        }))
    }

    /// The directory `rel` is named in (held open) and its last component.
    /// Where that directory is missing, as it was for the traced call, the
    /// call names the whole path from the target instead, so it is still
    /// made and fails at the same missing component: resolving beneath the
    /// target met a missing name before anything that could lead outside.
    fn parent(&mut self, rel: &Path) -> io::Result<(Dir, CString)> {
        let (dir, name) = Confined::split(rel)?;
        if let Some(fd) = self.parents.get(dir) {
            return Ok((Dir::Held(fd.clone()), name));
        }
        let fd = match self.conf.open_dir(dir) {
            Ok(fd) => Arc::new(fd),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                return Ok((Dir::Root, cstr(rel)?));
            }
            Err(e) => return Err(e),
        };
        if self.parents.len() >= HELD_DIRECTORIES {
            self.parents.clear();
        }
        self.parents.insert(dir.to_path_buf(), fd.clone());
        Ok((Dir::Held(fd), name))
    }

    /// A call on one name in its directory.
    fn at(
        &mut self,
        rel: &Path,
        call: impl FnOnce(BorrowedFd<'_>, &CStr) -> io::Result<()>,
    ) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        let root = self.conf.root();
        call(dir.fd(root), &name)
    }

    /// A call on two names, each in its directory.
    fn between(
        &mut self,
        from: &Path,
        to: &Path,
        call: impl FnOnce(BorrowedFd<'_>, &CStr, BorrowedFd<'_>, &CStr) -> io::Result<()>,
    ) -> io::Result<()> {
        let (d1, n1) = self.parent(from)?;
        let (d2, n2) = self.parent(to)?;
        let root = self.conf.root();
        call(d1.fd(root), &n1, d2.fd(root), &n2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_symlinks_point_at_their_copy_beneath_the_target() {
        let link = Path::new("ranks/rank-00001/ckpt/latest");
        let target = Path::new("ranks/rank-00001/ckpt/step-2");
        assert_eq!(
            link_text("/ckpt/step-2", target, link),
            PathBuf::from("../../../ranks/rank-00001/ckpt/step-2")
        );
        assert_eq!(link_text("step-2", target, link), PathBuf::from("step-2"));
    }
}
