//! strace's text: one line into a [`Call`] (arguments split, `-y` paths,
//! return value and errno, `-T` duration, `-ttt` or `-tt` time), split calls
//! (`<unfinished ...>` / `<... resumed>`) joined, and the descriptors each
//! process holds, followed in a [`Tracker`].

use std::collections::HashMap;

/// One descriptor as a process sees it.
#[derive(Debug, Clone)]
pub(super) struct FdState {
    pub(super) path: String,
    pub(super) position: Option<i64>,
}

#[derive(Default)]
pub(crate) struct Tracker {
    pub(super) fds: HashMap<(i32, i32), FdState>,
    pub(super) unfinished: HashMap<i32, (i64, String)>,
    pub(super) last_day_ns: i64,
    pub(super) last_tod_ns: i64,
}

/// A parsed syscall line, before it becomes a row.
pub(crate) struct Call<'a> {
    pub(crate) pid: i32,
    pub(crate) ts_ns: i64,
    pub(crate) name: &'a str,
    pub(crate) args: Vec<&'a str>,
    pub(crate) ret: i64,
    /// The `<path>` strace -y printed after a returned descriptor.
    pub(crate) ret_path: Option<&'a str>,
    pub(crate) dur_ns: i64,
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

pub(super) fn errno(name: &str) -> i64 {
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

/// Open flags as strace prints them (`O_WRONLY|O_CREAT`), or as a number
/// (DFTracer's).
pub(super) fn open_flags(s: &str) -> i32 {
    if let Ok(n) = s.trim().parse::<i32>() {
        return n;
    }
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
pub(super) fn split_args(s: &str) -> Option<(Vec<&str>, &str)> {
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
pub(super) fn fd_arg(a: &str) -> Option<(i32, Option<&str>)> {
    let (num, rest) = match a.find('<') {
        Some(i) => (&a[..i], Some(&a[i + 1..])),
        None => (a, None),
    };
    let fd = num.trim().parse().ok()?;
    Some((fd, rest.map(|r| r.strip_suffix('>').unwrap_or(r))))
}

pub(super) fn string_arg(a: &str) -> Option<&str> {
    let a = a.strip_suffix("...").unwrap_or(a);
    a.strip_prefix('"')?.strip_suffix('"')
}

impl Tracker {
    /// Wall-clock ns of a `-ttt` or `-tt` timestamp.
    pub(super) fn timestamp(&mut self, t: &str, date_days: i64) -> Option<i64> {
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
pub(super) fn parse_line<'a>(
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
