//! `cargo xtask imports`: no import circle between the files of any crate.
//!
//! Every crate's `src/` is read ([`lex`], [`refs`]), its modules followed
//! from each root through `mod` declarations, and each file linked to the
//! files it names through `crate::`, `super::` and `self::` paths, in a
//! `use`, a `pub use` or inline in the code ([`tree`]); a `mod` declaration
//! is no import. Files that reach each other ([`circles`]) fail the check,
//! each circle listed with the references that make it. With `--rooms` the
//! rule a crate's `lib.rs` states of which room may import which is checked
//! too ([`rooms`]).
//!
//! Paths that start at a module's own child without `self::` (`lines::f()`
//! in `live/mod.rs`) are not followed: a parent that declares a child and
//! calls into it is the tree, not a circle.

mod circles;
mod lex;
mod refs;
mod rooms;
mod tree;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use tree::Edge;

/// Where the sources are read from: the disk, or a made-up tree in tests.
pub trait Files {
    /// A file's text; `None` when there is none.
    fn read(&self, path: &Path) -> Option<String>;
    /// The entries of a folder, sorted; none when there is no such folder.
    fn list(&self, dir: &Path) -> Vec<PathBuf>;
}

/// The workspace on disk, paths relative to its root.
struct Disk<'a>(&'a Path);

impl Files for Disk<'_> {
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(self.0.join(path)).ok()
    }

    fn list(&self, dir: &Path) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.0.join(dir)) else {
            return Vec::new();
        };
        let mut out: Vec<PathBuf> = entries.flatten().map(|e| dir.join(e.file_name())).collect();
        out.sort();
        out
    }
}

/// Checks every crate under `root` (paths are reported relative to it).
pub fn check(root: &Path, with_rooms: bool) -> Result<()> {
    let disk = Disk(root);
    let mut problems = Vec::new();
    let mut crates = 0;
    for src in crate_sources(root, Path::new("")) {
        crates += 1;
        let edges = crate_edges(&src, &disk);
        for (files, inside) in circles::circles(&edges) {
            problems.push(describe_circle(&files, &inside));
        }
        if !with_rooms {
            continue;
        }
        let Some(rule) = disk.read(&src.join("lib.rs")).and_then(|t| rooms::rule(&t)) else {
            continue;
        };
        for e in rooms::breaks(&rule, &src, &edges) {
            problems.push(format!(
                "room rule of {}: {}:{} imports {} ({})",
                src.join("lib.rs").display(),
                e.from.display(),
                e.line,
                e.to.display(),
                e.path
            ));
        }
    }
    if problems.is_empty() {
        println!("imports: no circle between the files of {crates} crates");
        return Ok(());
    }
    for p in &problems {
        eprintln!("{p}");
    }
    bail!("imports: {} problem(s), listed above", problems.len())
}

/// Every file reference of the crate whose sources are in `src`, from all
/// its roots, each pair of files once (the first reference written).
fn crate_edges(src: &Path, files: &dyn Files) -> Vec<Edge> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for root in tree::roots(src, files) {
        for e in tree::edges(&root, files) {
            if seen.insert((e.from.clone(), e.to.clone())) {
                out.push(e);
            }
        }
    }
    out
}

fn describe_circle(files: &[PathBuf], inside: &[Edge]) -> String {
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let mut text = format!("import circle: {}", names.join(", "));
    for e in inside {
        text.push_str(&format!(
            "\n  {}:{} names {} ({})",
            e.from.display(),
            e.line,
            e.to.display(),
            e.path
        ));
    }
    text
}

/// The `src/` folders of the crates beneath `dir` (relative to `root`):
/// every folder with a `Cargo.toml` and a `src/`, build output and hidden
/// folders left out.
fn crate_sources(root: &Path, dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if root.join(dir).join("Cargo.toml").is_file() && root.join(dir).join("src").is_dir() {
        out.push(dir.join("src"));
    }
    let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
        return out;
    };
    let mut subdirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name())
        .filter(|n| {
            let n = n.to_string_lossy();
            !n.starts_with('.') && n != "target" && n != "src"
        })
        .map(|n| dir.join(n))
        .collect();
    subdirs.sort();
    for d in subdirs {
        out.extend(crate_sources(root, &d));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A made-up crate: (path under `src/`, text).
    struct Made(BTreeMap<PathBuf, String>);

    impl Files for Made {
        fn read(&self, path: &Path) -> Option<String> {
            self.0.get(path).cloned()
        }

        fn list(&self, dir: &Path) -> Vec<PathBuf> {
            self.0
                .keys()
                .filter(|p| p.parent() == Some(dir))
                .cloned()
                .collect()
        }
    }

    fn circles_of(files: &[(&str, &str)]) -> Vec<Vec<String>> {
        let made = Made(
            files
                .iter()
                .map(|(p, t)| (Path::new("src").join(p), t.to_string()))
                .collect(),
        );
        let edges = crate_edges(Path::new("src"), &made);
        circles::circles(&edges)
            .into_iter()
            .map(|(f, _)| f.iter().map(|p| p.display().to_string()).collect())
            .collect()
    }

    #[test]
    fn a_circle_through_pub_use() {
        let found = circles_of(&[
            ("lib.rs", "pub mod a;\npub mod b;\n"),
            ("a.rs", "pub use crate::b::Thing;\npub struct Other;\n"),
            ("b.rs", "use crate::a::Other;\npub struct Thing(Other);\n"),
        ]);
        assert_eq!(found, vec![vec!["src/a.rs", "src/b.rs"]]);
    }

    #[test]
    fn a_circle_through_an_inline_path_across_folders() {
        let found = circles_of(&[
            ("lib.rs", "mod report;\nmod plan;\n"),
            ("report/mod.rs", "pub mod stats;\n"),
            (
                "report/stats.rs",
                "pub fn now() -> u64 { crate::plan::scale::route::Router::now() }\n",
            ),
            ("plan/mod.rs", "pub mod scale;\n"),
            ("plan/scale/mod.rs", "pub mod route;\n"),
            (
                "plan/scale/route.rs",
                "pub struct Router;\nimpl Router { pub fn now() -> u64 { 0 }\n fn t() -> u64 { super::super::super::report::stats::now() } }\n",
            ),
        ]);
        assert_eq!(
            found,
            vec![vec!["src/plan/scale/route.rs", "src/report/stats.rs"]]
        );
    }

    #[test]
    fn a_tree_without_circles() {
        let found = circles_of(&[
            ("lib.rs", "pub mod live;\npub mod error;\n#[cfg(test)]\nmod tests;\n"),
            // A parent declares its children and calls into them; they use
            // what the parent defines: the tree, not a circle.
            ("live/mod.rs", "pub mod lines;\npub struct Snapshot;\npub fn f() { lines::line(); }\n"),
            ("live/lines.rs", "use super::Snapshot;\nuse crate::error::Error;\n// crate::live::f() in a comment\npub fn line() { let _ = \"self::f\"; }\n"),
            ("error.rs", "pub struct Error;\n"),
            ("tests.rs", "use super::*;\n"),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn the_workspace_is_read_across_folders_and_binaries() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let sources = crate_sources(root, Path::new(""));
        assert!(
            sources.contains(&PathBuf::from("format/src")),
            "{sources:?}"
        );
        assert!(sources.contains(&PathBuf::from("ebpf/iorepro-ebpf/src")));
        let disk = Disk(root);
        let roots = tree::roots(Path::new("replayer/src"), &disk);
        assert!(roots.len() > 1, "{roots:?}");
        let edges = crate_edges(Path::new("replayer/src"), &disk);
        // The replay's run reaches its rooms; the check sees across folders.
        assert!(edges
            .iter()
            .any(|e| e.from == Path::new("replayer/src/run.rs")
                && e.to.starts_with("replayer/src/plan")));
    }
}
