//! What each parsed strace [`Call`] becomes in the trace: one [`Row`] per
//! call on a regular file (two for a call that copies between descriptors),
//! with the offsets strace does not print followed per process and
//! descriptor (from `open`, `lseek`, the bytes moved, and a forked child's
//! inherited positions).

use iorepro_format::event::OwnedRow;
use iorepro_format::schema::{Op, VIA_COPY_FILE_RANGE, VIA_SENDFILE, VIA_SPLICE};

use super::parse::{fd_arg, open_flags, string_arg, Call, FdState, Tracker};

/// Only regular files are kept (absolute paths outside /proc, /sys and
/// /dev), as the collector does.
fn regular(path: &str) -> bool {
    path.starts_with('/')
        && !["/proc/", "/sys/", "/dev/"]
            .iter()
            .any(|p| path.starts_with(p))
}

/// A row as owned values (paths outlive the line they came from); strace
/// knows no threads apart from processes, no ranks and no runs.
pub(crate) type Row = OwnedRow<String>;

/// The rows of one call, added to `rows`: none for calls on anything but a
/// regular file and for calls the trace has no op for (after following
/// their effect on descriptors), two for a copy between two files.
pub(crate) fn to_rows(c: &Call<'_>, t: &mut Tracker, rows: &mut Vec<Row>) {
    match c.name {
        "sendfile" | "sendfile64" | "copy_file_range" | "splice" => copy(c, t, rows),
        _ => rows.extend(to_row(c, t)),
    }
}

/// The row of a call that stands for one row at most.
fn to_row(c: &Call<'_>, t: &mut Tracker) -> Option<Row> {
    match c.name {
        "open" | "openat" | "creat" => open(c, t),
        "close" => close(c, t),
        "read" | "pread64" | "readv" | "preadv" | "preadv2" | "write" | "pwrite64" | "writev"
        | "pwritev" | "pwritev2" => data(c, t),
        "lseek" => lseek(c, t),
        "fsync" | "fdatasync" | "ftruncate" => on_descriptor(c, t),
        "truncate" => {
            let path = string_arg(c.args.first()?)?;
            let size = c.args.get(1).and_then(|s| s.parse().ok());
            regular(path).then(|| row(c, Op::Truncate, path, None, None, size, None))
        }
        "fstat" => {
            let (fd, path) = fd_path(c, t, 0)?;
            regular(&path).then(|| row(c, Op::Stat, &path, Some(fd), None, None, None))
        }
        "getdents64" | "getdents" => {
            let (fd, path) = fd_path(c, t, 0)?;
            let size = c.args.get(2).and_then(|s| s.parse().ok());
            regular(&path).then(|| row(c, Op::Getdents, &path, Some(fd), None, size, None))
        }
        "stat" | "lstat" | "newfstatat" | "statx" | "access" | "faccessat" | "faccessat2"
        | "mkdir" | "mkdirat" | "rmdir" | "unlink" | "unlinkat" | "rename" | "renameat"
        | "renameat2" | "link" | "linkat" | "symlink" | "symlinkat" => named(c),
        "mmap" => mmap(c, t),
        "clone" | "clone3" | "fork" | "vfork" => {
            inherit_descriptors(c, t);
            None
        }
        "dup" | "dup2" | "dup3" => {
            duplicate(c, t);
            None
        }
        "fcntl" if c.args.get(1).is_some_and(|a| a.starts_with("F_DUPFD")) => {
            duplicate(c, t);
            None
        }
        _ => None,
    }
}

fn row(
    c: &Call<'_>,
    op: Op,
    path: &str,
    fd: Option<i32>,
    offset: Option<i64>,
    size: Option<i64>,
    flags: Option<i32>,
) -> Row {
    Row {
        ts_ns: c.ts_ns,
        dur_ns: c.dur_ns,
        pid: c.pid,
        tid: c.pid,
        rank: None,
        op,
        path: Some(path.to_string()),
        fd,
        offset,
        size,
        ret: c.ret,
        flags,
        calls: 1,
        span_ns: None,
        path2: None,
        via: None,
        exchange: None,
        from_storage: None,
    }
}

/// The descriptor in argument `i` and its path: strace's `-y` path, else
/// the one the process opened it with.
fn fd_path(c: &Call<'_>, t: &Tracker, i: usize) -> Option<(i32, String)> {
    let (fd, p) = fd_arg(c.args.get(i)?)?;
    let path = match p {
        Some(p) => p.to_string(),
        None => t.fds.get(&(c.pid, fd))?.path.clone(),
    };
    Some((fd, path))
}

fn open(c: &Call<'_>, t: &mut Tracker) -> Option<Row> {
    let a = &c.args;
    let (pi, fi) = match c.name {
        "openat" => (1, 2),
        "creat" => (0, usize::MAX),
        _ => (0, 1),
    };
    let flags = match c.name {
        "creat" => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        _ => open_flags(a.get(fi)?),
    };
    let path = match c.ret_path {
        Some(p) => p.to_string(),
        None => string_arg(a.get(pi)?)?.to_string(),
    };
    if !regular(&path) || flags & libc::O_DIRECTORY != 0 {
        return None;
    }
    let fd = (c.ret >= 0).then_some(c.ret as i32);
    if let Some(fd) = fd {
        let position = (flags & libc::O_APPEND == 0).then_some(0);
        t.fds.insert(
            (c.pid, fd),
            FdState {
                path: path.clone(),
                position,
            },
        );
    }
    Some(row(c, Op::Open, &path, fd, None, None, Some(flags)))
}

fn close(c: &Call<'_>, t: &mut Tracker) -> Option<Row> {
    let (fd, _) = fd_arg(c.args.first()?)?;
    let st = t.fds.remove(&(c.pid, fd));
    let path = fd_path(c, t, 0).map(|p| p.1).or(st.map(|s| s.path))?;
    regular(&path).then(|| row(c, Op::Close, &path, Some(fd), None, None, None))
}

/// Reads and writes, plain, positional or vectored: a plain call's offset
/// is where the descriptor stood, and it moves the descriptor on.
fn data(c: &Call<'_>, t: &mut Tracker) -> Option<Row> {
    let a = &c.args;
    let (fd, path) = fd_path(c, t, 0)?;
    if !regular(&path) {
        return None;
    }
    let op = if c.name.contains("read") {
        Op::Read
    } else {
        Op::Write
    };
    let positional = c.name.starts_with('p');
    let vectored = c.name.ends_with('v') || c.name.ends_with("v2");
    let size = if vectored {
        (c.ret >= 0).then_some(c.ret)
    } else {
        a.get(2)?.parse().ok()
    };
    let st = t.fds.entry((c.pid, fd)).or_insert(FdState {
        path: path.clone(),
        position: None,
    });
    let offset = if positional {
        a.get(3).and_then(|o| o.parse().ok())
    } else {
        let at = st.position;
        if c.ret > 0 {
            st.position = at.map(|p| p + c.ret);
        }
        at
    };
    Some(row(c, op, &path, Some(fd), offset, size, None))
}

/// sendfile, copy_file_range and splice, as the collector records them: a
/// read of the source file and a write of the destination file, each named
/// by `via`, at the offset the call was given (`[N]`) or else where the
/// descriptor stood (which then moves on by the bytes moved). A pipe's end
/// has no row; a failed call has one, on its source (on its destination
/// when the source is a pipe), with the length it asked for.
fn copy(c: &Call<'_>, t: &mut Tracker, rows: &mut Vec<Row>) {
    // Arguments: source, its offset, destination, its offset, length.
    let (via, from, from_off, to, to_off, len) = match c.name {
        "copy_file_range" => (VIA_COPY_FILE_RANGE, 0, Some(1), 2, Some(3), 4),
        "splice" => (VIA_SPLICE, 0, Some(1), 2, Some(3), 4),
        _ => (VIA_SENDFILE, 1, Some(2), 0, None, 3),
    };
    let a = &c.args;
    let Some(asked) = a.get(len).and_then(|l| l.parse::<i64>().ok()) else {
        return;
    };
    let size = if c.ret >= 0 { c.ret } else { asked };
    let mut end = |i: usize, off: Option<usize>| {
        let (fd, path) = fd_path(c, t, i).filter(|(_, p)| regular(p))?;
        let given = off.and_then(|o| offset_arg(a.get(o)?));
        let at = given.or_else(|| {
            let st = t.fds.get_mut(&(c.pid, fd))?;
            let at = st.position;
            if c.ret > 0 {
                st.position = at.map(|p| p + c.ret);
            }
            at
        });
        Some((fd, path, at))
    };
    let (source, destination) = (end(from, from_off), end(to, to_off));
    let mut push = |op: Op, (fd, path, at): (i32, String, Option<i64>)| {
        let mut r = row(c, op, &path, Some(fd), at, Some(size), None);
        r.via = Some(via);
        rows.push(r);
    };
    let had_source = source.is_some();
    if let Some(s) = source {
        push(Op::Read, s);
    }
    if let Some(d) = destination.filter(|_| c.ret >= 0 || !had_source) {
        push(Op::Write, d);
    }
}

/// An offset argument as strace prints it: `NULL`, `[N]`, or `[N] => [M]`
/// (where the kernel left it); the offset N the call started at.
fn offset_arg(arg: &str) -> Option<i64> {
    arg.trim()
        .strip_prefix('[')?
        .split(']')
        .next()?
        .parse()
        .ok()
}

fn lseek(c: &Call<'_>, t: &mut Tracker) -> Option<Row> {
    let (fd, path) = fd_path(c, t, 0)?;
    if c.ret >= 0 {
        if let Some(st) = t.fds.get_mut(&(c.pid, fd)) {
            st.position = Some(c.ret);
        }
    }
    let off = c.args.get(1).and_then(|o| o.parse().ok());
    regular(&path).then(|| row(c, Op::Lseek, &path, Some(fd), off, None, None))
}

/// fsync, fdatasync and ftruncate: calls on a descriptor that move no data.
fn on_descriptor(c: &Call<'_>, t: &mut Tracker) -> Option<Row> {
    let (fd, path) = fd_path(c, t, 0)?;
    let op = match c.name {
        "fsync" => Op::Fsync,
        "fdatasync" => Op::Fdatasync,
        _ => Op::Truncate,
    };
    let size = (op == Op::Truncate)
        .then(|| c.args.get(1).and_then(|s| s.parse().ok()))
        .flatten();
    regular(&path).then(|| row(c, op, &path, Some(fd), None, size, None))
}

/// Where a call names a path: the argument of its directory descriptor (if
/// any; `usize::MAX` for a symlink's target, a string kept as written) and
/// of the path itself.
type PathArg = (Option<usize>, usize);

/// Calls that name paths: stat, access, mkdir, rmdir, unlink, rename, link,
/// symlink and their `*at` forms.
fn named(c: &Call<'_>) -> Option<Row> {
    let a = &c.args;
    let (op, first, second): (Op, PathArg, Option<PathArg>) = match c.name {
        "stat" | "lstat" => (Op::Stat, (None, 0), None),
        "newfstatat" | "statx" => (Op::Stat, (Some(0), 1), None),
        "access" => (Op::Access, (None, 0), None),
        "faccessat" | "faccessat2" => (Op::Access, (Some(0), 1), None),
        "mkdir" => (Op::Mkdir, (None, 0), None),
        "mkdirat" => (Op::Mkdir, (Some(0), 1), None),
        "rmdir" => (Op::Rmdir, (None, 0), None),
        "unlink" => (Op::Unlink, (None, 0), None),
        "unlinkat" if a.get(2).is_some_and(|f| f.contains("AT_REMOVEDIR")) => {
            (Op::Rmdir, (Some(0), 1), None)
        }
        "unlinkat" => (Op::Unlink, (Some(0), 1), None),
        "rename" => (Op::Rename, (None, 0), Some((None, 1))),
        "link" => (Op::Link, (None, 0), Some((None, 1))),
        "renameat" | "renameat2" => (Op::Rename, (Some(0), 1), Some((Some(2), 3))),
        "linkat" => (Op::Link, (Some(0), 1), Some((Some(2), 3))),
        // A symlink's target is a string, kept as written.
        "symlink" => (Op::Symlink, (Some(usize::MAX), 0), Some((None, 1))),
        _ => (Op::Symlink, (Some(usize::MAX), 0), Some((Some(1), 2))),
    };
    let path = path_named(c, first)?;
    let path2 = match second {
        Some(n) => Some(path_named(c, n)?),
        None => None,
    };
    // A symlink is judged by the link, not by its target.
    let judged = if op == Op::Symlink {
        path2.as_deref()?
    } else {
        &path
    };
    if !regular(judged) {
        return None;
    }
    // `newfstatat(fd, "", ..., AT_EMPTY_PATH)` is an fstat of the descriptor.
    let fd = (c.name == "newfstatat" || c.name == "statx")
        .then(|| {
            string_arg(a.get(1)?)
                .filter(|p| p.is_empty())
                .and(fd_arg(a.first()?))
        })
        .flatten()
        .map(|(fd, _)| fd);
    let mut r = row(c, op, &path, fd, None, None, None);
    r.path2 = path2;
    Some(r)
}

/// The path a call names at `(dirfd, i)`.
fn path_named(c: &Call<'_>, (dirfd, i): PathArg) -> Option<String> {
    let a = &c.args;
    let raw = string_arg(a.get(i)?)?;
    if dirfd == Some(usize::MAX) || raw.starts_with('/') {
        return Some(raw.to_string());
    }
    // Relative to a descriptor (`3</dir>` with -y), or to the working
    // directory, which strace does not show.
    match dirfd.and_then(|d| fd_arg(a.get(d)?)) {
        Some((_, Some(dir))) if raw.is_empty() => Some(dir.to_string()),
        Some((_, Some(dir))) => Some(format!("{}/{raw}", dir.trim_end_matches('/'))),
        _ => Some(raw.to_string()),
    }
}

fn mmap(c: &Call<'_>, t: &mut Tracker) -> Option<Row> {
    let (fd, path) = fd_path(c, t, 4)?;
    let len = c.args.get(1).and_then(|s| s.parse().ok());
    let off = c.args.get(5).and_then(|s| {
        s.strip_prefix("0x")
            .map_or_else(|| s.parse().ok(), |h| i64::from_str_radix(h, 16).ok())
    });
    regular(&path).then(|| row(c, Op::Mmap, &path, Some(fd), off, len, None))
}

/// A duplicated descriptor (`dup`, `dup2`, `dup3`, `fcntl(F_DUPFD)`), the
/// new one returned, names the same file at the same position: a shell's
/// `> file` is an open, a `dup2` onto 1, and a close.
fn duplicate(c: &Call<'_>, t: &mut Tracker) {
    let Some((fd, _)) = c.args.first().and_then(|a| fd_arg(a)) else {
        return;
    };
    if c.ret < 0 || c.ret as i32 == fd {
        return;
    }
    if let Some(st) = t.fds.get(&(c.pid, fd)).cloned() {
        t.fds.insert((c.pid, c.ret as i32), st);
    }
}

/// A forked child starts with its parent's descriptors and positions.
fn inherit_descriptors(c: &Call<'_>, t: &mut Tracker) {
    if c.ret <= 0 {
        return;
    }
    let child = c.ret as i32;
    let inherited: Vec<(i32, FdState)> = t
        .fds
        .iter()
        .filter(|((p, _), _)| *p == c.pid)
        .map(|((_, fd), st)| (*fd, st.clone()))
        .collect();
    for (fd, st) in inherited {
        t.fds.insert((child, fd), st);
    }
}
