//! `strace` output as a trace with source `import`, so machines without eBPF
//! can still be studied.
//!
//! Supported: `strace -f -ttt -T -y -o FILE COMMAND` (recommended), also with
//! `-tt` instead of `-ttt` (wall-clock times of day, taken as UTC on the date
//! given by `--date`, or the log file's modification date), without `-o`
//! (`[pid N]` prefixes), and `-ff -o PREFIX` (a directory of `PREFIX.PID`
//! files). `-T` gives `dur_ns` (0 without it); `-y` gives the path of every
//! descriptor and is required for reads and writes on files opened before
//! tracing began. Calls split across lines (`<unfinished ...>` /
//! `<... resumed>`) are joined, keeping the entry time.
//!
//! strace shows no file offsets for plain `read`/`write`/`readv`/`writev`, so
//! they are followed per process and descriptor from `open`, `lseek` and the
//! bytes moved (a forked child starts from its parent's positions); where a
//! position is unknown the offset is left null. Only regular files are kept
//! (absolute paths outside /proc, /sys and /dev), as the collector does.
//! strace does not know MPI ranks: `--rank` sets one for every row.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::import_common::{files_in, write_imported};
use iorepro_format::error::{TraceError, TraceResult};
use iorepro_format::event::EventRow;
use iorepro_format::manifest::Manifest;
use iorepro_format::schema::Op;

pub struct StraceOptions {
    pub host: String,
    pub rank: Option<i32>,
    /// Days since 1970-01-01 of the capture, for `-tt` times of day.
    pub date_days: Option<i64>,
    pub segment_rows: usize,
}

/// One descriptor as a process sees it.
#[derive(Debug, Clone)]
struct FdState {
    path: String,
    position: Option<i64>,
}

#[derive(Default)]
struct Tracker {
    fds: HashMap<(i32, i32), FdState>,
    unfinished: HashMap<i32, (i64, String)>,
    last_day_ns: i64,
    last_tod_ns: i64,
}

/// A parsed syscall line, before it becomes a row.
struct Call<'a> {
    pid: i32,
    ts_ns: i64,
    name: &'a str,
    args: Vec<&'a str>,
    ret: i64,
    /// The `<path>` strace -y printed after a returned descriptor.
    ret_path: Option<&'a str>,
    dur_ns: i64,
}

pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses `YYYY-MM-DD` into days since the Unix epoch.
pub fn parse_date(s: &str) -> Option<i64> {
    let mut it = s.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (it.next()??, it.next()??, it.next()??);
    ((1..=12).contains(&m) && (1..=31).contains(&d)).then(|| days_from_civil(y, m, d))
}

fn errno(name: &str) -> i64 {
    let n = match name {
        "EPERM" => libc::EPERM,
        "ENOENT" => libc::ENOENT,
        "EINTR" => libc::EINTR,
        "EIO" => libc::EIO,
        "EBADF" => libc::EBADF,
        "EAGAIN" => libc::EAGAIN,
        "EACCES" => libc::EACCES,
        "EEXIST" => libc::EEXIST,
        "ENOTDIR" => libc::ENOTDIR,
        "EISDIR" => libc::EISDIR,
        "EINVAL" => libc::EINVAL,
        "ENOSPC" => libc::ENOSPC,
        "ESPIPE" => libc::ESPIPE,
        "EROFS" => libc::EROFS,
        "ENAMETOOLONG" => libc::ENAMETOOLONG,
        "ELOOP" => libc::ELOOP,
        "ENOTEMPTY" => libc::ENOTEMPTY,
        "EXDEV" => libc::EXDEV,
        "EMLINK" => libc::EMLINK,
        "EMFILE" => libc::EMFILE,
        "ENFILE" => libc::ENFILE,
        "EFBIG" => libc::EFBIG,
        "EDQUOT" => libc::EDQUOT,
        "ENODEV" => libc::ENODEV,
        "ENXIO" => libc::ENXIO,
        "EBUSY" => libc::EBUSY,
        "ETXTBSY" => libc::ETXTBSY,
        "ENOTSUP" | "EOPNOTSUPP" => libc::EOPNOTSUPP,
        "ESTALE" => libc::ESTALE,
        "ENODATA" => libc::ENODATA,
        "EOVERFLOW" => libc::EOVERFLOW,
        _ => 1,
    };
    -(n as i64)
}

fn open_flags(s: &str) -> i32 {
    s.split('|')
        .map(|f| match f.trim() {
            "O_WRONLY" => libc::O_WRONLY,
            "O_RDWR" => libc::O_RDWR,
            "O_CREAT" => libc::O_CREAT,
            "O_EXCL" => libc::O_EXCL,
            "O_TRUNC" => libc::O_TRUNC,
            "O_APPEND" => libc::O_APPEND,
            "O_NONBLOCK" => libc::O_NONBLOCK,
            "O_DIRECT" => libc::O_DIRECT,
            "O_DIRECTORY" => libc::O_DIRECTORY,
            "O_NOFOLLOW" => libc::O_NOFOLLOW,
            "O_CLOEXEC" => libc::O_CLOEXEC,
            "O_SYNC" => libc::O_SYNC,
            "O_DSYNC" => libc::O_DSYNC,
            "O_NOATIME" => libc::O_NOATIME,
            "O_PATH" => libc::O_PATH,
            "O_LARGEFILE" => libc::O_LARGEFILE,
            _ => 0,
        })
        .fold(0, |a, b| a | b)
}

/// Splits `a, "b, c", {d, e}` at top-level commas, honouring quotes and brackets.
/// Returns the arguments and the rest of the line after the closing `)`.
fn split_args(s: &str) -> Option<(Vec<&str>, &str)> {
    let bytes = s.as_bytes();
    let (mut depth, mut in_str, mut esc) = (0i32, false, false);
    // `-y` annotates descriptors as `3</path>`; a path may hold commas.
    let mut in_fd_path = false;
    let mut args = Vec::new();
    let mut start = 0;
    for (i, &c) in bytes.iter().enumerate() {
        if in_fd_path {
            in_fd_path = c != b'>';
            continue;
        }
        if c == b'<' && i > 0 && bytes[i - 1].is_ascii_digit() && !in_str {
            in_fd_path = true;
            continue;
        }
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'(' | b'[' | b'{' => depth += 1,
            b']' | b'}' => depth -= 1,
            b')' if depth == 0 => {
                let last = s[start..i].trim();
                if !last.is_empty() {
                    args.push(last);
                }
                return Some((args, &s[i + 1..]));
            }
            b')' => depth -= 1,
            b',' if depth == 0 => {
                args.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    None
}

/// `3</data/x>` -> (3, Some("/data/x")); `AT_FDCWD` -> None.
fn fd_arg(a: &str) -> Option<(i32, Option<&str>)> {
    let (num, rest) = match a.find('<') {
        Some(i) => (&a[..i], Some(&a[i + 1..])),
        None => (a, None),
    };
    let fd = num.trim().parse().ok()?;
    Some((fd, rest.map(|r| r.strip_suffix('>').unwrap_or(r))))
}

fn string_arg(a: &str) -> Option<&str> {
    let a = a.strip_suffix("...").unwrap_or(a);
    a.strip_prefix('"')?.strip_suffix('"')
}

fn regular(path: &str) -> bool {
    path.starts_with('/')
        && !["/proc/", "/sys/", "/dev/"]
            .iter()
            .any(|p| path.starts_with(p))
}

impl Tracker {
    /// Wall-clock ns of a `-ttt` or `-tt` timestamp.
    fn timestamp(&mut self, t: &str, date_days: i64) -> Option<i64> {
        if let Some((h, rest)) = t.split_once(':') {
            let (m, s) = rest.split_once(':')?;
            let secs: f64 = s.parse().ok()?;
            let tod = (h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60) * 1_000_000_000
                + (secs * 1e9).round() as i64;
            if self.last_day_ns == 0 {
                self.last_day_ns = date_days * 86_400_000_000_000;
            } else if tod + 43_200_000_000_000 < self.last_tod_ns {
                self.last_day_ns += 86_400_000_000_000; // the capture ran past midnight
            }
            self.last_tod_ns = tod;
            Some(self.last_day_ns + tod)
        } else {
            let (s, frac) = t.split_once('.').unwrap_or((t, "0"));
            let frac_ns: i64 = format!("{frac:0<9}")[..9].parse().ok()?;
            Some(s.parse::<i64>().ok()? * 1_000_000_000 + frac_ns)
        }
    }
}

/// Parses one line into a call; `None` for signals, exits and unfinished halves.
fn parse_line<'a>(
    line: &'a str,
    default_pid: i32,
    date_days: i64,
    tracker: &mut Tracker,
    joined: &'a mut String,
) -> Option<Call<'a>> {
    let mut rest = line.trim_start();
    let pid = if let Some(r) = rest.strip_prefix("[pid") {
        let (p, r) = r.trim_start().split_once(']')?;
        rest = r.trim_start();
        p.trim().parse().ok()?
    } else {
        match rest.split_once(' ') {
            Some((p, r)) if p.bytes().all(|b| b.is_ascii_digit()) && !p.is_empty() => {
                rest = r.trim_start();
                p.parse().ok()?
            }
            _ => default_pid,
        }
    };
    let (ts, body) = rest.split_once(' ')?;
    let ts_ns = tracker.timestamp(ts, date_days)?;
    let body = body.trim_start();
    if body.starts_with("---") || body.starts_with("+++") {
        return None;
    }
    let (ts_ns, body): (i64, &str) = if let Some(r) = body.strip_prefix("<... ") {
        let (_, after) = r.split_once(" resumed>")?;
        let (start, head) = tracker.unfinished.remove(&pid)?;
        *joined = head + after;
        (start, joined.as_str())
    } else if let Some(head) = body.strip_suffix("<unfinished ...>") {
        tracker.unfinished.insert(pid, (ts_ns, head.to_string()));
        return None;
    } else {
        (ts_ns, body)
    };
    let open = body.find('(')?;
    let name = &body[..open];
    let (args, tail) = split_args(&body[open + 1..])?;
    let tail = tail.trim_start().strip_prefix('=')?.trim_start();
    // `= 3</d/a, b> <0.000010>`: a path annotation may hold spaces, so it ends
    // at the last `>` before the duration, not at the first space.
    let (ret_tok, after) = match tail.find('<') {
        Some(i)
            if i > 0
                && tail[..i]
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() || b == b'x') =>
        {
            let end = match tail.rfind(" <") {
                Some(d) if d > i => tail[..d].rfind('>')?,
                _ => tail.rfind('>')?,
            };
            (&tail[..=end], &tail[end + 1..])
        }
        _ => tail.split_once(' ').unwrap_or((tail, "")),
    };
    let (ret_num, ret_path) = match ret_tok.find('<') {
        Some(i) => (&ret_tok[..i], Some(ret_tok[i + 1..].trim_end_matches('>'))),
        None => (ret_tok, None),
    };
    let mut ret: i64 = match ret_num.strip_prefix("0x") {
        Some(hex) => i64::from_str_radix(hex, 16).unwrap_or(0),
        None => ret_num.parse().ok()?,
    };
    if ret == -1 {
        ret = after.split_whitespace().next().map(errno).unwrap_or(-1);
    }
    let dur_ns = after
        .rsplit_once('<')
        .and_then(|(_, d)| d.trim_end().strip_suffix('>'))
        .and_then(|d| d.parse::<f64>().ok())
        .map_or(0, |d| (d * 1e9).round() as i64);
    Some(Call {
        pid,
        ts_ns,
        name,
        args,
        ret,
        ret_path,
        dur_ns,
    })
}

/// A row as owned values (paths outlive the line they came from).
struct Row {
    ts_ns: i64,
    dur_ns: i64,
    pid: i32,
    op: Op,
    path: String,
    /// A rename's or link's new name, a symlink's link.
    path2: Option<String>,
    fd: Option<i32>,
    offset: Option<i64>,
    size: Option<i64>,
    ret: i64,
    flags: Option<i32>,
}

fn to_row(c: &Call<'_>, t: &mut Tracker) -> Option<Row> {
    let a = &c.args;
    let row = |op, path: &str, fd, offset, size, flags| Row {
        ts_ns: c.ts_ns,
        dur_ns: c.dur_ns,
        pid: c.pid,
        op,
        path: path.to_string(),
        path2: None,
        fd,
        offset,
        size,
        ret: c.ret,
        flags,
    };
    let fd_path = |t: &Tracker, i: usize| -> Option<(i32, String)> {
        let (fd, p) = fd_arg(a.get(i)?)?;
        let path = match p {
            Some(p) => p.to_string(),
            None => t.fds.get(&(c.pid, fd))?.path.clone(),
        };
        Some((fd, path))
    };
    match c.name {
        "open" | "openat" | "creat" => {
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
            Some(row(Op::Open, &path, fd, None, None, Some(flags)))
        }
        "close" => {
            let (fd, _) = fd_arg(a.first()?)?;
            let st = t.fds.remove(&(c.pid, fd));
            let path = fd_path(t, 0).map(|p| p.1).or(st.map(|s| s.path))?;
            regular(&path).then(|| row(Op::Close, &path, Some(fd), None, None, None))
        }
        "read" | "pread64" | "readv" | "preadv" | "preadv2" | "write" | "pwrite64" | "writev"
        | "pwritev" | "pwritev2" => {
            let (fd, path) = fd_path(t, 0)?;
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
            Some(row(op, &path, Some(fd), offset, size, None))
        }
        "lseek" => {
            let (fd, path) = fd_path(t, 0)?;
            if c.ret >= 0 {
                if let Some(st) = t.fds.get_mut(&(c.pid, fd)) {
                    st.position = Some(c.ret);
                }
            }
            let off = a.get(1).and_then(|o| o.parse().ok());
            regular(&path).then(|| row(Op::Lseek, &path, Some(fd), off, None, None))
        }
        "fsync" | "fdatasync" | "ftruncate" => {
            let (fd, path) = fd_path(t, 0)?;
            let op = match c.name {
                "fsync" => Op::Fsync,
                "fdatasync" => Op::Fdatasync,
                _ => Op::Truncate,
            };
            let size = (op == Op::Truncate)
                .then(|| a.get(1).and_then(|s| s.parse().ok()))
                .flatten();
            regular(&path).then(|| row(op, &path, Some(fd), None, size, None))
        }
        "truncate" => {
            let path = string_arg(a.first()?)?;
            let size = a.get(1).and_then(|s| s.parse().ok());
            regular(path).then(|| row(Op::Truncate, path, None, None, size, None))
        }
        "fstat" => {
            let (fd, path) = fd_path(t, 0)?;
            regular(&path).then(|| row(Op::Stat, &path, Some(fd), None, None, None))
        }
        "getdents64" | "getdents" => {
            let (fd, path) = fd_path(t, 0)?;
            let size = a.get(2).and_then(|s| s.parse().ok());
            regular(&path).then(|| row(Op::Getdents, &path, Some(fd), None, size, None))
        }
        // Calls that name paths: (op, argument of the path and of its
        // directory descriptor, of the second path and its descriptor).
        "stat" | "lstat" | "newfstatat" | "statx" | "access" | "faccessat" | "faccessat2"
        | "mkdir" | "mkdirat" | "rmdir" | "unlink" | "unlinkat" | "rename" | "renameat"
        | "renameat2" | "link" | "linkat" | "symlink" | "symlinkat" => {
            let (op, first, second) = match c.name {
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
            let name = |(dirfd, i): (Option<usize>, usize)| -> Option<String> {
                let raw = string_arg(a.get(i)?)?;
                if dirfd == Some(usize::MAX) || raw.starts_with('/') {
                    return Some(raw.to_string());
                }
                // Relative to a descriptor (`3</dir>` with -y), or to the
                // working directory, which strace does not show.
                match dirfd.and_then(|d| fd_arg(a.get(d)?)) {
                    Some((_, Some(dir))) if raw.is_empty() => Some(dir.to_string()),
                    Some((_, Some(dir))) => Some(format!("{}/{raw}", dir.trim_end_matches('/'))),
                    _ => Some(raw.to_string()),
                }
            };
            let path = name(first)?;
            let path2 = match second {
                Some(n) => Some(name(n)?),
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
            let fd = (c.name == "newfstatat" || c.name == "statx")
                .then(|| {
                    string_arg(a.get(1)?)
                        .filter(|p| p.is_empty())
                        .and(fd_arg(a.first()?))
                })
                .flatten()
                .map(|(fd, _)| fd);
            let mut r = row(op, &path, fd, None, None, None);
            r.path2 = path2;
            Some(r)
        }
        "mmap" => {
            let (fd, path) = fd_path(t, 4)?;
            let len = a.get(1).and_then(|s| s.parse().ok());
            let off = a.get(5).and_then(|s| {
                s.strip_prefix("0x")
                    .map_or_else(|| s.parse().ok(), |h| i64::from_str_radix(h, 16).ok())
            });
            regular(&path).then(|| row(Op::Mmap, &path, Some(fd), off, len, None))
        }
        "clone" | "clone3" | "fork" | "vfork" => {
            // The child starts with its parent's descriptors and positions.
            if c.ret > 0 {
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
            None
        }
        _ => None,
    }
}

fn inputs(input: &Path) -> TraceResult<Vec<(PathBuf, Option<i32>)>> {
    let meta = std::fs::metadata(input).map_err(|e| TraceError::io(input, e))?;
    let pid_of = |p: &Path| {
        p.extension()
            .and_then(|e| e.to_str())
            .and_then(|e| e.parse().ok())
    };
    if !meta.is_dir() {
        return Ok(vec![(input.to_path_buf(), pid_of(input))]);
    }
    let files = files_in(input, |_| true, "no strace output files in this directory")?;
    Ok(files
        .into_iter()
        .map(|p| {
            let pid = pid_of(&p);
            (p, pid)
        })
        .collect())
}

fn mtime_days(path: &Path) -> i64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs() as i64 / 86_400)
}

pub fn import(input: &Path, out: &Path, opts: &StraceOptions) -> TraceResult<Manifest> {
    let mut rows: Vec<Row> = Vec::new();
    let mut tracker = Tracker::default();
    let mut parsed = 0u64;
    for (file, pid) in inputs(input)? {
        let text = std::fs::read_to_string(&file).map_err(|e| TraceError::io(&file, e))?;
        let date = opts.date_days.unwrap_or_else(|| mtime_days(&file));
        tracker.last_day_ns = 0;
        for line in text.lines() {
            let mut joined = String::new();
            if let Some(call) = parse_line(line, pid.unwrap_or(0), date, &mut tracker, &mut joined)
            {
                parsed += 1;
                if let Some(r) = to_row(&call, &mut tracker) {
                    rows.push(r);
                }
            }
        }
    }
    if parsed == 0 {
        return Err(TraceError::invalid(
            input,
            "no system calls found: expected output of `strace -f -ttt -T -y` (or -tt)",
        ));
    }
    rows.sort_by_key(|r| r.ts_ns);
    let events = rows.iter().map(|r| EventRow {
        ts_ns: r.ts_ns,
        dur_ns: r.dur_ns,
        host: &opts.host,
        pid: r.pid,
        tid: r.pid,
        rank: opts.rank,
        comm: "strace",
        op: r.op,
        path: Some(&r.path),
        fd: r.fd,
        offset: r.offset,
        size: r.size,
        ret: r.ret,
        flags: r.flags,
        calls: 1,
        span_ns: None,
        path2: r.path2.as_deref(),
        via: None,
    });
    write_imported(out, opts.segment_rows, "strace", input, events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(line: &str, t: &mut Tracker) -> Option<Row> {
        let mut j = String::new();
        let c = parse_line(line, 0, 0, t, &mut j)?;
        to_row(&c, t)
    }

    #[test]
    fn follows_offsets_and_joins_split_calls() {
        let mut t = Tracker::default();
        let o = call(r#"100 1700000000.000001 openat(AT_FDCWD, "/d/a, b", O_RDONLY|O_CLOEXEC) = 3</d/a, b> <0.000010>"#, &mut t).unwrap();
        assert_eq!(
            (o.op, o.path.as_str(), o.fd, o.dur_ns),
            (Op::Open, "/d/a, b", Some(3), 10_000)
        );
        let r = call(
            r#"100 1700000000.000002 read(3</d/a, b>, "ab\"c)"..., 4096) = 4096 <0.000001>"#,
            &mut t,
        )
        .unwrap();
        assert_eq!(
            (r.op, r.offset, r.size, r.ret),
            (Op::Read, Some(0), Some(4096), 4096)
        );
        assert!(call(
            "100 1700000000.000003 read(3</d/a, b>,  <unfinished ...>",
            &mut t
        )
        .is_none());
        let r = call(
            r#"100 1700000000.000009 <... read resumed>"x", 100) = 10 <0.000005>"#,
            &mut t,
        )
        .unwrap();
        assert_eq!(
            (r.ts_ns, r.offset, r.ret),
            (1_700_000_000_000_003_000, Some(4096), 10)
        );
        let p = call(r#"[pid 101] 1700000000.00001 pwrite64(4</d/c>, "x", 1, 512) = -1 ENOSPC (No space left on device) <0.000002>"#, &mut t).unwrap();
        assert_eq!(
            (p.pid, p.op, p.offset, p.ret),
            (101, Op::Write, Some(512), -28)
        );
        assert!(call(
            r#"100 1700000000.00002 read(5<pipe:[1234]>, "", 10) = 0"#,
            &mut t
        )
        .is_none());
        assert!(call("100 1700000000.00003 +++ exited with 0 +++", &mut t).is_none());
    }

    #[test]
    fn dates() {
        assert_eq!(parse_date("1970-01-02"), Some(1));
        assert_eq!(parse_date("2026-01-01"), Some(20454));
        assert_eq!(parse_date("2026-13-01"), None);
    }
}
