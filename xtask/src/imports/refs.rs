//! What one file declares and names: its `mod` declarations (which make the
//! module tree, and are not imports) and every path it writes that starts
//! at `crate`, `super` or `self`, in a `use` or `pub use` (each leaf of a
//! `use` tree on its own) or inline in the code (`crate::a::f()`, or
//! `a::f()` after `use crate::a` or `use crate::{self, a}`), each with the
//! inline modules (`mod x { ... }`) it sits in.
//!
//! Test modules (`#[cfg(test)] mod tests`) are left out, inline or in a
//! file of their own: a test may reach anything it checks, and what it
//! names does not make the product's structure.

use std::collections::HashMap;

use super::lex::{Tok, Token};

/// A `mod NAME;` or `mod NAME { ... }`.
#[derive(Debug, Clone, PartialEq)]
pub struct ModDecl {
    /// The inline modules of the file it is declared in.
    pub scope: Vec<String>,
    pub name: String,
    /// Its body is in the same file.
    pub inline: bool,
    /// `#[path = "..."]`, relative to the declaring file's directory.
    pub path_attr: Option<String>,
    /// Under `#[cfg(test)]`.
    pub test: bool,
}

/// A path naming something of this crate.
#[derive(Debug, Clone, PartialEq)]
pub struct PathRef {
    pub scope: Vec<String>,
    /// From `crate`, `super` or `self` on (`super` may repeat).
    pub segments: Vec<String>,
    pub line: u32,
}

#[derive(Debug, Default, PartialEq)]
pub struct FileRefs {
    pub mods: Vec<ModDecl>,
    pub paths: Vec<PathRef>,
}

fn is_start(word: &str) -> bool {
    matches!(word, "crate" | "super" | "self")
}

pub fn scan(tokens: &[Token]) -> FileRefs {
    let mut scan = Scan {
        tokens,
        out: FileRefs::default(),
        braces: Vec::new(),
        path_attr: None,
        cfg_test: false,
        bound: HashMap::new(),
    };
    let mut i = 0;
    while i < tokens.len() {
        i = scan.step(i);
    }
    scan.out
}

/// One pass over a file's tokens, and what it has seen so far.
struct Scan<'t> {
    tokens: &'t [Token],
    out: FileRefs,
    /// One entry per open brace: the inline module it opens, if any, and
    /// whether that is a test module.
    braces: Vec<Option<(String, bool)>>,
    /// A `#[path]` waiting for the `mod` it applies to.
    path_attr: Option<String>,
    /// A `#[cfg(test)]` waiting for the item it applies to.
    cfg_test: bool,
    /// Names a `use` of this crate bound (a module, or an item), by their
    /// last segment: a path written inline from one of them names the crate.
    bound: HashMap<String, Vec<String>>,
}

impl Scan<'_> {
    /// Reads what starts at token `i`; returns the index of the next token
    /// to read (past a whole declaration or path where one was read).
    fn step(&mut self, i: usize) -> usize {
        let tokens = self.tokens;
        let read_to = match &tokens[i].tok {
            Tok::Punct('#') => {
                if let Some(p) = path_attribute(&tokens[i..]) {
                    self.path_attr = Some(p);
                }
                self.cfg_test |= is_cfg_test(&tokens[i..]);
                None
            }
            Tok::Ident(w) if w == "mod" => self.mod_decl(i),
            Tok::Ident(w) if w == "use" => Some(self.use_decl(i)),
            Tok::Ident(w) if is_start(w) => self.path_from_start(i),
            Tok::Ident(w)
                if self.bound.contains_key(w)
                    && tokens.get(i + 1).map(|t| &t.tok) == Some(&Tok::PathSep)
                    && !(i > 0 && matches!(tokens[i - 1].tok, Tok::PathSep | Tok::Punct('$')))
                    && !self.in_test() =>
            {
                self.path_from_bound(i, w)
            }
            Tok::Open => {
                self.braces.push(None);
                self.cfg_test = false;
                None
            }
            Tok::Close => {
                self.braces.pop();
                None
            }
            // An attribute applies to the item after it: a `#[cfg(test)]`
            // on a function (its body opens a brace) or a `use` must not
            // reach the next `mod`.
            Tok::Semi => {
                self.path_attr = None;
                self.cfg_test = false;
                None
            }
            _ => None,
        };
        read_to.unwrap_or(i + 1)
    }

    /// The inline modules open here.
    fn scope(&self) -> Vec<String> {
        self.braces
            .iter()
            .flatten()
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Inside a test module.
    fn in_test(&self) -> bool {
        self.braces.iter().flatten().any(|(_, t)| *t)
    }

    /// A path written inline at token `i`, in the modules open here.
    fn push_path(&mut self, segments: Vec<String>, i: usize) {
        let scope = self.scope();
        self.out.paths.push(PathRef {
            scope,
            segments,
            line: self.tokens[i].line,
        });
    }

    /// `mod NAME;` or `mod NAME {` at `i`, with the attributes before it.
    /// An inline module opens its brace here (the index past it is
    /// returned), so that what it holds is scoped to it.
    fn mod_decl(&mut self, i: usize) -> Option<usize> {
        let Some(Tok::Ident(name)) = self.tokens.get(i + 1).map(|t| &t.tok) else {
            return None;
        };
        let inline = self.tokens.get(i + 2).map(|t| &t.tok) == Some(&Tok::Open);
        let test = std::mem::take(&mut self.cfg_test) || self.in_test();
        self.out.mods.push(ModDecl {
            scope: self.scope(),
            name: name.to_string(),
            inline,
            path_attr: self.path_attr.take(),
            test,
        });
        if !inline {
            return None;
        }
        self.braces.push(Some((name.to_string(), test)));
        Some(i + 3)
    }

    /// A `use` at `i`: each leaf that names this crate (outside tests) is a
    /// path, and binds its last segment for the paths written from it.
    /// Returns the index past the `use`.
    fn use_decl(&mut self, i: usize) -> usize {
        let mut leaves = Vec::new();
        let end = use_tree(self.tokens, i + 1, Vec::new(), &mut leaves);
        let counted = !self.in_test();
        for segments in leaves {
            if counted && segments.first().is_some_and(|s| is_start(s)) {
                if let Some(last) = segments.last().filter(|_| segments.len() > 1) {
                    self.bound.insert(last.clone(), segments.clone());
                }
                self.push_path(segments, i);
            }
        }
        end.max(i + 1)
    }

    /// `crate::…`, `super::…` or `self::…` written inline at `i` (not a
    /// macro's `$crate`, nor the middle of another path).
    fn path_from_start(&mut self, i: usize) -> Option<usize> {
        let after_dollar = i > 0 && self.tokens[i - 1].tok == Tok::Punct('$');
        let after_sep = i > 0 && self.tokens[i - 1].tok == Tok::PathSep;
        if after_dollar || after_sep {
            return None;
        }
        let (segments, end) = inline_path(self.tokens, i);
        if segments.len() < 2 || self.in_test() {
            return None;
        }
        self.push_path(segments, i);
        Some(end)
    }

    /// `a::f` written inline at `i`, `a` being a name a `use` of this crate
    /// bound: the path it names from the crate's root.
    fn path_from_bound(&mut self, i: usize, name: &str) -> Option<usize> {
        let (rest, end) = inline_path(self.tokens, i);
        if rest.len() < 2 {
            return None;
        }
        let mut segments = self.bound[name].clone();
        segments.extend(rest.into_iter().skip(1));
        self.push_path(segments, i);
        Some(end)
    }
}

/// `#[path = "x.rs"]` at the start of `tokens`.
fn path_attribute(tokens: &[Token]) -> Option<String> {
    match tokens.get(..6)?.iter().map(|t| &t.tok).collect::<Vec<_>>()[..] {
        [Tok::Punct('#'), Tok::Punct('['), Tok::Ident(p), Tok::Punct('='), Tok::Str(s), Tok::Punct(']')]
            if p == "path" =>
        {
            Some(s.clone())
        }
        _ => None,
    }
}

/// `#[cfg(test)]` at the start of `tokens`.
fn is_cfg_test(tokens: &[Token]) -> bool {
    let words: Vec<&Tok> = tokens.iter().take(7).map(|t| &t.tok).collect();
    matches!(
        words[..],
        [Tok::Punct('#'), Tok::Punct('['), Tok::Ident(cfg), Tok::Punct('('), Tok::Ident(test), Tok::Punct(')'), Tok::Punct(']')]
            if cfg == "cfg" && test == "test"
    )
}

/// `a::b::c` from `tokens[i]`: its segments and the index after it.
fn inline_path(tokens: &[Token], mut i: usize) -> (Vec<String>, usize) {
    let mut segments = Vec::new();
    while let Some(Tok::Ident(w)) = tokens.get(i).map(|t| &t.tok) {
        segments.push(w.clone());
        i += 1;
        match (
            tokens.get(i).map(|t| &t.tok),
            tokens.get(i + 1).map(|t| &t.tok),
        ) {
            (Some(Tok::PathSep), Some(Tok::Ident(_))) => i += 1,
            _ => break,
        }
    }
    (segments, i)
}

/// Reads one `use` tree from `tokens[i]` under `prefix`, adding each leaf's
/// full path to `leaves`; returns the index after it (after the `;` at the
/// top level). A tree it cannot read is skipped to its end.
fn use_tree(
    tokens: &[Token],
    mut i: usize,
    prefix: Vec<String>,
    leaves: &mut Vec<Vec<String>>,
) -> usize {
    let tok = |k: usize| tokens.get(k).map(|t| &t.tok);
    let mut path = prefix;
    let top = path.is_empty();
    if tok(i) == Some(&Tok::PathSep) {
        i += 1; // `::std::...`: an outside crate
        path.push(String::new());
    }
    loop {
        match tok(i) {
            Some(Tok::Ident(w)) if w == "self" && !path.is_empty() => i += 1,
            Some(Tok::Ident(w)) => {
                path.push(w.clone());
                i += 1;
            }
            Some(Tok::Star) => {
                i += 1;
                leaves.push(path.clone());
                break;
            }
            Some(Tok::Open) => {
                i += 1;
                loop {
                    match tok(i) {
                        Some(Tok::Close) => {
                            i += 1;
                            break;
                        }
                        Some(Tok::Comma) => i += 1,
                        None => return i,
                        _ => i = use_tree(tokens, i, path.clone(), leaves),
                    }
                }
                break;
            }
            _ => return skip_to_end(tokens, i, top),
        }
        match tok(i) {
            Some(Tok::PathSep) => i += 1,
            Some(Tok::Ident(w)) if w == "as" => {
                i += 2;
                leaves.push(path.clone());
                break;
            }
            _ => {
                leaves.push(path.clone());
                break;
            }
        }
    }
    if top {
        skip_to_end(tokens, i, true)
    } else {
        i
    }
}

/// The index after the `;` ending a `use` (at the top of a tree), or of the
/// `,` or `}` ending a branch.
fn skip_to_end(tokens: &[Token], mut i: usize, top: bool) -> usize {
    let mut depth = 0;
    while let Some(t) = tokens.get(i) {
        match t.tok {
            Tok::Open => depth += 1,
            Tok::Close if depth == 0 => return i,
            Tok::Close => depth -= 1,
            Tok::Comma if depth == 0 && !top => return i,
            Tok::Semi if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::super::lex::tokens;
    use super::*;

    fn paths(src: &str) -> Vec<String> {
        scan(&tokens(src))
            .paths
            .iter()
            .map(|p| {
                format!(
                    "{}{}",
                    p.scope.iter().map(|s| format!("{s}>")).collect::<String>(),
                    p.segments.join("::")
                )
            })
            .collect()
    }

    #[test]
    fn use_trees_give_each_leaf() {
        let src =
            "pub use crate::a::{self, b::{c, d as e}, f::*};\nuse super::super::g;\nuse std::fs;\n";
        assert_eq!(
            paths(src),
            [
                "crate::a",
                "crate::a::b::c",
                "crate::a::b::d",
                "crate::a::f",
                "super::super::g"
            ]
        );
    }

    #[test]
    fn inline_paths_count_but_not_macro_crate_or_visibility() {
        let src = "fn f() { crate::a::b::g(); self::h::<u8>(); }\nmacro_rules! m { () => { $crate::x::y() } }\npub(crate) fn z() {}";
        assert_eq!(paths(src), ["crate::a::b::g", "self::h"]);
    }

    #[test]
    fn inline_paths_through_a_name_a_use_bound_count() {
        let src = "use crate::io::{self, objects};\nuse std::fs;\nfn f() { objects::prepare::g(); fs::read(); io::h(); }";
        assert_eq!(
            paths(src),
            [
                "crate::io",
                "crate::io::objects",
                "crate::io::objects::prepare::g",
                "crate::io::h"
            ]
        );
    }

    #[test]
    fn mods_and_their_scopes() {
        let src = "#[path = \"other.rs\"]\nmod a;\nmod b { mod c; fn f() { super::a::g(); } }\n#[cfg(test)]\nmod tests { use super::*; mod more; fn t() { crate::b::f(); } }\n#[cfg(test)]\nmod file_tests;\n#[cfg(test)]\nfn helper() {}\nmod d;";
        let r = scan(&tokens(src));
        let names: Vec<_> = r
            .mods
            .iter()
            .map(|m| {
                (
                    m.scope.join(">"),
                    m.name.as_str(),
                    m.inline,
                    m.path_attr.clone(),
                    m.test,
                )
            })
            .collect();
        let no = || None::<String>;
        assert_eq!(
            names,
            [
                (
                    String::new(),
                    "a",
                    false,
                    Some("other.rs".to_string()),
                    false
                ),
                (String::new(), "b", true, no(), false),
                ("b".to_string(), "c", false, no(), false),
                (String::new(), "tests", true, no(), true),
                ("tests".to_string(), "more", false, no(), true),
                (String::new(), "file_tests", false, no(), true),
                (String::new(), "d", false, no(), false),
            ]
        );
        // What the tests name is left out.
        assert_eq!(paths(src), ["b>super::a::g"]);
    }
}
