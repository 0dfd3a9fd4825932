//! The one lexical spelling of a path. The kernel accepts many spellings of
//! one file (`d/./f`, `d/x/../f`, `d//f`, `d/`, `d/.`); the collector writes
//! paths in this spelling, and analysis, the replayer and the exports read
//! them through it, so one file is one name everywhere. The clean-up is
//! lexical: it never asks the file system (a trace is read far from the
//! machine it was taken on), so `x/..` is taken back even where `x` was a
//! symlink.

/// Whether a row's path is a URL, an object-storage request's (see
/// [`crate::schema::COL_METHOD`]), rather than a file's: no file's path
/// is spelled so, and analyses of files leave URLs out.
pub fn is_url(path: &str) -> bool {
    path.starts_with("http://") || path.starts_with("https://")
}

/// A path in its one spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonical {
    pub path: String,
    /// The spelling ended in `/`, `/.` or `/..`: it can only name a directory.
    pub names_dir: bool,
}

/// The one spelling of `path`: `.` dropped, `..` taken back lexically (never
/// above the root of an absolute path; kept in front of a relative one,
/// whose start the trace does not know), repeated and trailing slashes
/// gone; a relative path that comes to nothing is `.`. `None` for the empty
/// path (a call on a descriptor: `AT_EMPTY_PATH`, `fstat`) and for names
/// that are no path (`pipe:[12]`, `socket:[3]`).
pub fn canonical(path: &str) -> Option<Canonical> {
    if path.is_empty() || !path.starts_with('/') && path.contains(":[") {
        return None;
    }
    // Most paths come already spelled so (the collector writes them so):
    // they are kept as they are, without being taken apart.
    if in_spelling(path) {
        return Some(Canonical {
            path: path.to_string(),
            names_dir: false,
        });
    }
    Some(rebuilt(path))
}

/// [`canonical`]'s spelling of a path, from its components.
fn rebuilt(path: &str) -> Canonical {
    let absolute = path.starts_with('/');
    let (parts, names_dir) = components(path, absolute);
    let joined = parts.join("/");
    let path = if absolute {
        format!("/{joined}")
    } else if joined.is_empty() {
        ".".to_string()
    } else {
        joined
    };
    let names_dir = names_dir && path != "/";
    Canonical { path, names_dir }
}

/// Whether `path` names a path and is already in [`canonical`]'s spelling,
/// which is then `path` itself: no empty, `.` or `..` component, and no
/// trailing slash (`/` itself is left to [`canonical`]).
fn in_spelling(path: &str) -> bool {
    let rest = path.strip_prefix('/').unwrap_or(path);
    !rest.is_empty()
        && (path.starts_with('/') || !path.contains(":["))
        && rest.split('/').all(|c| !matches!(c, "" | "." | ".."))
}

/// [`canonical`]'s spelling of `path`, borrowed when `path` is in it
/// already: for callers that only look at the spelling.
pub fn spelled(path: &str) -> Option<std::borrow::Cow<'_, str>> {
    if in_spelling(path) {
        return Some(path.into());
    }
    canonical(path).map(|c| c.path.into())
}

/// [`canonical`]'s spelling, or `path` as it is when it names no path.
pub fn spelling(path: &str) -> String {
    canonical(path).map_or_else(|| path.to_string(), |c| c.path)
}

/// `path` as a relative path beneath a root it cannot leave: the leading
/// `/` dropped, `.` dropped, and `..` climbing no higher than the root
/// (`/../etc/x` and `../etc/x` are both `etc/x`). `None` when nothing is
/// left (`/`, `/..`, the empty path). This is how a traced path is placed
/// under a replay's target or an export's directory.
pub fn beneath_root(path: &str) -> Option<String> {
    if in_spelling(path) {
        return Some(path.strip_prefix('/').unwrap_or(path).to_string());
    }
    let (parts, _) = components(path, true);
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The components of `path` once `.` and empty ones are dropped and each
/// `..` has taken back the one before it; a `..` with nothing before it is
/// dropped when `clamped` (at a root) and kept otherwise. Also whether the
/// spelling ended as a directory's does (`/`, `/.`, `/..`).
fn components(path: &str, clamped: bool) -> (Vec<&str>, bool) {
    let mut parts: Vec<&str> = Vec::new();
    let mut names_dir = false;
    for comp in path.split('/') {
        names_dir = matches!(comp, "" | "." | "..");
        match comp {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !clamped {
                    parts.push("..");
                }
            }
            c => parts.push(c),
        }
    }
    (parts, names_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(p: &str) -> (String, bool) {
        let c = canonical(p).unwrap();
        (c.path, c.names_dir)
    }

    #[test]
    fn one_spelling_per_path() {
        assert_eq!(c("/d/./f"), ("/d/f".into(), false));
        assert_eq!(c("/d/."), ("/d".into(), true));
        assert_eq!(c("/d/x/.."), ("/d".into(), true));
        assert_eq!(c("/d//f/"), ("/d/f".into(), true));
        assert_eq!(c("/a/./b/../c//d"), ("/a/c/d".into(), false));
        assert_eq!(c("/../../etc/x"), ("/etc/x".into(), false));
        assert_eq!(c("/"), ("/".into(), false));
        assert_eq!(c("/."), ("/".into(), false));
        assert_eq!(c("//"), ("/".into(), false));
    }

    #[test]
    fn a_path_in_its_spelling_is_kept_as_it_is() {
        let spellings = [
            "/d/f",
            "/d",
            "a/b",
            "a",
            "/tmp/x:[1]",
            "/d/.hidden",
            "/d/..x",
            "/d/x..",
            "/",
            "//",
            "/d/",
            "/d/.",
            "/d/..",
            "/d//f",
            "./a",
            "a/./b",
            "../a",
            "a/..",
            ".",
            "..",
        ];
        for p in spellings {
            // Only a path its components would spell the same is kept.
            let rebuilt = rebuilt(p);
            if in_spelling(p) {
                assert_eq!(
                    (rebuilt.path.as_str(), rebuilt.names_dir),
                    (p, false),
                    "{p}"
                );
            }
            assert_eq!(spelled(p).as_deref(), Some(rebuilt.path.as_str()), "{p}");
            assert_eq!(canonical(p), Some(rebuilt), "{p}");
        }
        assert!(in_spelling("/d/.hidden") && in_spelling("a/b") && !in_spelling("/"));
        assert!(!in_spelling("pipe:[3]") && canonical("pipe:[3]").is_none());
    }

    #[test]
    fn relative_paths_keep_what_climbs_above_their_start() {
        assert_eq!(c("a/../../b"), ("../b".into(), false));
        assert_eq!(c("../../x/./y"), ("../../x/y".into(), false));
        assert_eq!(c("a/.."), (".".into(), true));
        assert_eq!(c("./a/b/"), ("a/b".into(), true));
    }

    #[test]
    fn names_that_are_no_path() {
        assert!(canonical("").is_none());
        assert!(canonical("pipe:[123]").is_none());
        assert!(canonical("socket:[9]").is_none());
        assert_eq!(spelling("pipe:[123]"), "pipe:[123]");
        assert_eq!(spelling("/d/./f"), "/d/f");
        // Under the root, `:[` is only a file name.
        assert_eq!(c("/tmp/x:[1]"), ("/tmp/x:[1]".into(), false));
    }

    #[test]
    fn beneath_a_root_nothing_climbs_out() {
        assert_eq!(beneath_root("/data/a.bin").as_deref(), Some("data/a.bin"));
        assert_eq!(
            beneath_root("/../../etc/passwd").as_deref(),
            Some("etc/passwd")
        );
        assert_eq!(beneath_root("/data/../../x/./y").as_deref(), Some("x/y"));
        assert_eq!(beneath_root("../x").as_deref(), Some("x"));
        assert_eq!(beneath_root("rel/p/").as_deref(), Some("rel/p"));
        assert_eq!(beneath_root("/"), None);
        assert_eq!(beneath_root("/.."), None);
        assert_eq!(beneath_root(""), None);
    }
}
