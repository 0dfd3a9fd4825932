//! A crate's modules and the files they live in, followed from a root
//! (`lib.rs`, `main.rs`, a `bin/` file) through `mod` declarations as rustc
//! does, and each file's references resolved to the file of the deepest
//! module they name: `crate::report::stats::unix_ns` is a reference to
//! `report/stats.rs`, `crate::report::Report` one to `report/mod.rs` (where
//! a `pub use` may pass it on: that is an edge of its own).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::lex::tokens;
use super::refs::{scan, FileRefs, PathRef};
use super::Files;

/// One module: the file its items are in (an inline module's is its
/// parent's), and its child modules by name.
#[derive(Debug)]
struct Module {
    file: PathBuf,
    parent: Option<usize>,
    children: BTreeMap<String, usize>,
}

/// A reference from one file to another.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    pub from: PathBuf,
    pub to: PathBuf,
    pub line: u32,
    /// The path as written (`super::summary::per_s`).
    pub path: String,
}

/// The module tree of the crate rooted at `root`, with every file's
/// references as edges between files. A declared module whose file is
/// missing (one under a `#[cfg]` for another platform) is left out.
pub fn edges(root: &Path, files: &dyn Files) -> Vec<Edge> {
    let mut modules = vec![Module {
        file: root.to_path_buf(),
        parent: None,
        children: BTreeMap::new(),
    }];
    // Each file once with the module its top level is, and what it says.
    let mut scanned: Vec<(usize, FileRefs)> = Vec::new();
    let mut pending = vec![(0usize, root.to_path_buf(), true)];
    while let Some((module, file, owns_dir)) = pending.pop() {
        let Some(text) = files.read(&file) else {
            continue;
        };
        let refs = scan(&tokens(&text));
        for decl in refs.mods.iter().filter(|d| !d.test) {
            let parent = descend(&modules, module, &decl.scope);
            let child_file = if decl.inline {
                file.clone()
            } else {
                let dir = children_dir(&file, owns_dir, &decl.scope);
                match &decl.path_attr {
                    Some(p) => file.parent().unwrap_or(Path::new("")).join(p),
                    None => pick(
                        &dir.join(format!("{}.rs", decl.name)),
                        &dir.join(&decl.name).join("mod.rs"),
                        files,
                    ),
                }
            };
            let id = modules.len();
            modules.push(Module {
                file: child_file.clone(),
                parent: Some(parent),
                children: BTreeMap::new(),
            });
            modules[parent].children.insert(decl.name.clone(), id);
            if !decl.inline {
                let owns = decl.path_attr.is_some() || child_file.ends_with("mod.rs");
                pending.push((id, child_file, owns));
            }
        }
        scanned.push((module, refs));
    }
    let mut out = Vec::new();
    for (module, refs) in &scanned {
        for r in &refs.paths {
            let here = descend(&modules, *module, &r.scope);
            if let Some(target) = resolve(&modules, here, r) {
                let (from, to) = (&modules[here].file, &modules[target].file);
                if from != to {
                    out.push(Edge {
                        from: from.clone(),
                        to: to.clone(),
                        line: r.line,
                        path: r.segments.join("::"),
                    });
                }
            }
        }
    }
    out
}

/// The inline module `scope` beneath `module`.
fn descend(modules: &[Module], mut module: usize, scope: &[String]) -> usize {
    for name in scope {
        match modules[module].children.get(name) {
            Some(&m) => module = m,
            None => break,
        }
    }
    module
}

/// Where the files of modules declared in `file` (inside inline modules
/// `scope`) live: beside a `mod.rs`, `lib.rs` or `main.rs`, else in a
/// folder named after the file.
fn children_dir(file: &Path, owns_dir: bool, scope: &[String]) -> PathBuf {
    let parent = file.parent().unwrap_or(Path::new(""));
    let mut dir = if owns_dir {
        parent.to_path_buf()
    } else {
        parent.join(file.file_stem().unwrap_or_default())
    };
    for s in scope {
        dir.push(s);
    }
    dir
}

/// `name.rs`, or `name/mod.rs` where only that exists.
fn pick(a: &Path, b: &Path, files: &dyn Files) -> PathBuf {
    if files.read(a).is_some() || files.read(b).is_none() {
        a.to_path_buf()
    } else {
        b.to_path_buf()
    }
}

/// The deepest module a path from module `here` names.
fn resolve(modules: &[Module], here: usize, r: &PathRef) -> Option<usize> {
    let mut segs = r.segments.iter().peekable();
    let mut at = match segs.next()?.as_str() {
        "crate" => 0,
        "self" => here,
        "super" => modules[here].parent?,
        _ => return None,
    };
    while segs.peek().is_some_and(|s| *s == "super") {
        segs.next();
        at = modules[at].parent?;
    }
    for s in segs {
        match modules[at].children.get(s) {
            Some(&m) => at = m,
            None => break,
        }
    }
    Some(at)
}

/// The roots of the crates whose sources are in `src`: the library, the
/// main binary and each binary in `src/bin/` (a file, or a folder's `main.rs`).
pub fn roots(src: &Path, files: &dyn Files) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| files.read(p).is_some())
        .collect();
    for p in files.list(&src.join("bin")) {
        if p.extension().is_some_and(|x| x == "rs") {
            roots.push(p);
        } else if files.read(&p.join("main.rs")).is_some() {
            roots.push(p.join("main.rs"));
        }
    }
    roots
}
