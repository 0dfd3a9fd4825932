//! The spellings of a path a replay meets in a whole capture, and what each
//! tells. One spelling per file ([`spelling`]: `d/./f`, `d/x/../f`, `d//f`
//! are `d/f`; `d/`, `d/.` are `d`, and name a directory); the empty path
//! of a call on a descriptor ([`on_descriptor`]); and what a call found a
//! path to be ([`form_shown`]), so the replay's copy starts as a file or a
//! directory as the job's did. Which forms are left out is [`crate::plan::scope`]'s
//! decision; docs/REPLAY.md has the table.

use std::borrow::Cow;

use iorepro_format::paths::canonical;
use iorepro_format::Op;

/// The one spelling of `path`, and whether this spelling can only name a
/// directory. The empty path and names that are no path (`pipe:[7]`)
/// stay as they are.
pub fn spelling(path: &str) -> (Cow<'_, str>, bool) {
    match canonical(path) {
        Some(c) if c.path == path => (Cow::Borrowed(path), false),
        Some(c) => (Cow::Owned(c.path), c.names_dir),
        None => (Cow::Borrowed(path), false),
    }
}

/// Whether a row naming `path` is a call on its descriptor alone: the
/// empty path with a descriptor (`fstat`, `AT_EMPTY_PATH`, a listing of
/// an open directory, data calls). It is made on the replay's open file.
pub fn on_descriptor(path: &str, op: Op, fd: Option<i32>) -> bool {
    path.is_empty() && fd.is_some_and(|fd| fd >= 0) && op.acts_on_descriptor()
}

/// What one call found its path to be: `Some(true)` a directory,
/// `Some(false)` something else (a file), `None` when the call cannot tell.
/// A probe beneath a file (`f/__init__.py`, failing with ENOTDIR) tells
/// nothing of its own path; a spelling that names a directory and fails
/// with ENOTDIR (`f/`) finds a file.
pub fn form_shown(op: Op, ret: i64, flags: Option<i32>, names_dir: bool) -> Option<bool> {
    let flags = flags.unwrap_or(0);
    let wants_dir = names_dir || op == Op::Open && flags & libc::O_DIRECTORY != 0;
    if ret < 0 {
        return (ret == -(libc::ENOTDIR as i64) && wants_dir).then_some(false);
    }
    match op {
        Op::Getdents | Op::Mkdir | Op::Rmdir => Some(true),
        _ if wants_dir => Some(true),
        _ if op.fails_on_directory() => Some(false),
        Op::Open if flags & (libc::O_CREAT | libc::O_TRUNC) != 0 => Some(false),
        Op::Open if flags & libc::O_ACCMODE != libc::O_RDONLY => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_and_forms() {
        assert_eq!(spelling("/d/./f"), (Cow::Borrowed("/d/f"), false));
        assert_eq!(spelling("/d/."), (Cow::Borrowed("/d"), true));
        assert_eq!(spelling("/d/e/.."), (Cow::Borrowed("/d"), true));
        assert_eq!(spelling("/d/"), (Cow::Borrowed("/d"), true));
        assert_eq!(spelling(""), (Cow::Borrowed(""), false));
        assert_eq!(spelling("pipe:[3]"), (Cow::Borrowed("pipe:[3]"), false));
        assert!(on_descriptor("", Op::Stat, Some(3)));
        assert!(!on_descriptor("", Op::Unlink, Some(3)));
        assert!(!on_descriptor("", Op::Stat, None));
        let enotdir = -(libc::ENOTDIR as i64);
        assert_eq!(form_shown(Op::Stat, enotdir, None, false), None);
        assert_eq!(form_shown(Op::Stat, enotdir, None, true), Some(false));
        assert_eq!(form_shown(Op::Stat, 0, None, true), Some(true));
        assert_eq!(form_shown(Op::Getdents, 64, None, false), Some(true));
        assert_eq!(form_shown(Op::Read, 10, None, false), Some(false));
        assert_eq!(form_shown(Op::Stat, 0, None, false), None);
    }
}
