//! The one place a traced path becomes a path beneath the target.
//!
//! A trace path is [`normalise`]d (the format's
//! [`iorepro_format::paths::beneath_root`]: the root dropped, `.` ignored,
//! `..` unable to climb above the target), then put in one copy of the name
//! space, its [`Place`]: files that are only read live under
//! `data/rep-KKKK/` (one copy per replica, so replicas of a source rank do
//! not read data another rank just pulled into a cache; one copy for all
//! with `--shared-data` or `--data shard`, and for the code and system
//! files every replica reads alike); files that the trace writes,
//! truncates, renames or unlinks live under `ranks/rank-TTTTT/`, so every
//! target rank works on its own. Which replica a rank reads is the plan's
//! [`RankMap`]; the relative path [`resolve`] returns is opened through
//! [`crate::io::confine::Confined`], so nothing outside the target is touched.

use std::path::PathBuf;

use iorepro_format::paths::beneath_root;

use crate::plan::rank_map::RankMap;
use crate::plan::survey::shared_by_replicas;
use crate::plan::survey::PathInfo;

/// Which copy of the trace's name space a path is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A target rank's own (the paths the trace changes).
    Rank(u32),
    /// A replica of the read-only data.
    Replica(u32),
}

impl Place {
    /// The copy in which target rank `target` makes its calls on a path.
    pub fn of_call(info: &PathInfo, target: u32, map: &RankMap) -> Place {
        if shared_by_replicas(info) {
            Place::Replica(0)
        } else if info.written {
            Place::Rank(target)
        } else {
            Place::Replica(map.replica(target))
        }
    }
}

/// Where a trace path lands in `place`, relative to the target; `None` when
/// it names no file under the target.
pub fn resolve(trace_path: &str, place: Place) -> Option<PathBuf> {
    let n = normalise(trace_path)?;
    let n = n.display();
    // Spelled in one string: a storm of new files resolves one a call.
    Some(PathBuf::from(match place {
        Place::Rank(t) => format!("ranks/rank-{t:05}/{n}"),
        Place::Replica(k) => format!("data/rep-{k:04}/{n}"),
    }))
}

/// Turns a path from a trace into a relative path confined to the target:
/// the root is dropped, `.` ignored, and `..` can climb no higher than the
/// target itself. `None` for an empty result, and for a NUL byte, which a
/// trace written by another tool may hold but no system call can take.
pub fn normalise(trace_path: &str) -> Option<PathBuf> {
    if trace_path.contains('\0') {
        return None;
    }
    beneath_root(trace_path).map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_clamps_at_the_target() {
        assert_eq!(
            normalise("/data/a.bin").unwrap(),
            PathBuf::from("data/a.bin")
        );
        assert_eq!(
            normalise("/../../etc/passwd").unwrap(),
            PathBuf::from("etc/passwd")
        );
        assert_eq!(
            normalise("/data/../../x/./y").unwrap(),
            PathBuf::from("x/y")
        );
        assert_eq!(normalise("rel/p").unwrap(), PathBuf::from("rel/p"));
        assert!(normalise("/").is_none());
        assert!(normalise("/..").is_none());
        assert!(normalise("/a\0b").is_none());
    }

    #[test]
    fn each_place_is_its_own_copy() {
        let m = RankMap {
            sources: vec![0, 1],
            shared_data: false,
            data_sharded: false,
        };
        assert_eq!(
            resolve("/d/f", Place::Replica(m.replica(3))).unwrap(),
            PathBuf::from("data/rep-0001/d/f")
        );
        assert_eq!(
            resolve("/c/x.pt", Place::Rank(3)).unwrap(),
            PathBuf::from("ranks/rank-00003/c/x.pt")
        );
        assert!(resolve("/..", Place::Rank(0)).is_none());
    }
}
