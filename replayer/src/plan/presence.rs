//! What the name space looked like when the traced job began, judged from
//! the trace alone: a path's first call whose result tells (a stat that
//! succeeded, an open that failed with ENOENT, a mkdir that created it)
//! says whether it existed before. The replay starts each rank from that
//! state, so a metadata call meets what the job's call met: the probe for a
//! missing file fails, the stat of a dataset file succeeds, the checkpoint
//! directory is created anew even when an earlier replay left one behind.

use iorepro_format::Op;

/// Whether a path existed when the traced job started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Presence {
    /// No call on it told (only calls whose failure says nothing).
    #[default]
    Unknown,
    Before,
    Absent,
}

/// Which of a call's paths is judged: its first, or its second (the new
/// name of a rename or link, the link of a symlink).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    First,
    Second,
}

fn errno(ret: i64, e: i32) -> bool {
    ret == -(e as i64)
}

/// What a call with result `ret` says about its path, if anything.
pub fn judge(op: Op, role: Role, ret: i64, flags: Option<i32>) -> Option<Presence> {
    let two_paths = matches!(op, Op::Rename | Op::Link);
    if ret < 0 {
        return if errno(ret, libc::EEXIST) || errno(ret, libc::ENOTEMPTY) {
            Some(Presence::Before)
        } else if errno(ret, libc::ENOENT) && !two_paths {
            // (A rename or link fails with ENOENT for either name.)
            Some(Presence::Absent)
        } else {
            None
        };
    }
    match (op, role) {
        // A symlink's first path is only the string it holds.
        (Op::Symlink, Role::First) => None,
        (Op::Mkdir, _) | (_, Role::Second) => Some(Presence::Absent),
        // Created or not, the call cannot tell; taken as created, so a
        // replay starts without it.
        (Op::Open, _) if flags.is_some_and(|f| f & libc::O_CREAT != 0) => Some(Presence::Absent),
        _ => Some(Presence::Before),
    }
}

/// Calls that changed the name space or a file's data: their paths (and
/// all beneath them) are each target rank's own, so a rank never changes
/// what the others read. A call that failed changed nothing: it is made
/// again where its path lives, and fails there too (a `makedirs` of the
/// dataset's directory, which exists, leaves the dataset shared).
pub fn changes(op: Op, role: Role, ret: i64, flags: Option<i32>) -> bool {
    if ret < 0 {
        return false;
    }
    match op {
        Op::Write | Op::Truncate | Op::Unlink | Op::Rename | Op::Mkdir | Op::Rmdir => true,
        Op::Link | Op::Symlink => role == Role::Second,
        Op::Open => flags.is_some_and(opens_for_writing),
        _ => false,
    }
}

/// Open flags that mean the file is written.
pub fn opens_for_writing(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY || flags & (libc::O_CREAT | libc::O_TRUNC) != 0
}

/// Calls that show their path is a directory.
pub fn names_a_directory(op: Op) -> bool {
    matches!(op, Op::Mkdir | Op::Rmdir | Op::Getdents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_tell_what_existed() {
        let enoent = -(libc::ENOENT as i64);
        let eexist = -(libc::EEXIST as i64);
        use Presence::*;
        assert_eq!(judge(Op::Stat, Role::First, 0, None), Some(Before));
        assert_eq!(judge(Op::Stat, Role::First, enoent, None), Some(Absent));
        assert_eq!(judge(Op::Mkdir, Role::First, 0, None), Some(Absent));
        assert_eq!(judge(Op::Mkdir, Role::First, eexist, None), Some(Before));
        assert_eq!(
            judge(
                Op::Open,
                Role::First,
                3,
                Some(libc::O_WRONLY | libc::O_CREAT)
            ),
            Some(Absent)
        );
        assert_eq!(judge(Op::Open, Role::First, 3, Some(0)), Some(Before));
        assert_eq!(judge(Op::Rename, Role::Second, 0, None), Some(Absent));
        assert_eq!(judge(Op::Rename, Role::First, enoent, None), None);
        assert_eq!(judge(Op::Symlink, Role::First, 0, None), None);
        assert_eq!(
            judge(Op::Access, Role::First, -(libc::EACCES as i64), None),
            None
        );
        assert!(changes(Op::Link, Role::Second, 0, None));
        assert!(!changes(Op::Link, Role::First, 0, None));
        assert!(!changes(Op::Open, Role::First, 3, Some(libc::O_RDONLY)));
        assert!(!changes(Op::Mkdir, Role::First, eexist, None));
    }
}
