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
    let mut out = FileRefs::default();
    // One entry per open brace: the inline module it opens, if any, and
    // whether that is a test module.
    let mut braces: Vec<Option<(String, bool)>> = Vec::new();
    let mut path_attr: Option<String> = None;
    let mut cfg_test = false;
    // Names a `use` of this crate bound (a module, or an item), by their
    // last segment: a path written inline from one of them names the crate.
    let mut bound: HashMap<String, Vec<String>> = HashMap::new();
    let scope = |braces: &[Option<(String, bool)>]| {
        braces
            .iter()
            .flatten()
            .map(|(name, _)| name.clone())
            .collect::<Vec<_>>()
    };
    let in_test = |braces: &[Option<(String, bool)>]| braces.iter().flatten().any(|(_, t)| *t);
    // A path written inline, at `line`, in the modules `braces` has open.
    let path_ref = |braces: &[Option<(String, bool)>], segments: Vec<String>, line: u32| PathRef {
        scope: scope(braces),
        segments,
        line,
    };
    let mut i = 0;
    while i < tokens.len() {
        let ident = |k: usize| match tokens.get(k).map(|t| &t.tok) {
            Some(Tok::Ident(w)) => Some(w.as_str()),
            _ => None,
        };
        match &tokens[i].tok {
            Tok::Punct('#') => {
                if let Some(p) = path_attribute(&tokens[i..]) {
                    path_attr = Some(p);
                }
                cfg_test |= is_cfg_test(&tokens[i..]);
            }
            Tok::Ident(w) if w == "mod" => {
                if let Some(name) = ident(i + 1) {
                    let inline = tokens.get(i + 2).map(|t| &t.tok) == Some(&Tok::Open);
                    let test = std::mem::take(&mut cfg_test) || in_test(&braces);
                    out.mods.push(ModDecl {
                        scope: scope(&braces),
                        name: name.to_string(),
                        inline,
                        path_attr: path_attr.take(),
                        test,
                    });
                    if inline {
                        braces.push(Some((name.to_string(), test)));
                        i += 3;
                        continue;
                    }
                }
            }
            Tok::Ident(w) if w == "use" => {
                let mut leaves = Vec::new();
                let end = use_tree(tokens, i + 1, Vec::new(), &mut leaves);
                let here = scope(&braces);
                let counted = !in_test(&braces);
                for segments in leaves {
                    if counted && segments.first().is_some_and(|s| is_start(s)) {
                        if let Some(last) = segments.last().filter(|_| segments.len() > 1) {
                            bound.insert(last.clone(), segments.clone());
                        }
                        out.paths.push(PathRef {
                            scope: here.clone(),
                            segments,
                            line: tokens[i].line,
                        });
                    }
                }
                i = end.max(i + 1);
                continue;
            }
            Tok::Ident(w) if is_start(w) => {
                let after_dollar = i > 0 && tokens[i - 1].tok == Tok::Punct('$');
                let after_sep = i > 0 && tokens[i - 1].tok == Tok::PathSep;
                if !after_dollar && !after_sep {
                    let (segments, end) = inline_path(tokens, i);
                    if segments.len() > 1 && !in_test(&braces) {
                        out.paths.push(path_ref(&braces, segments, tokens[i].line));
                        i = end;
                        continue;
                    }
                }
            }
            Tok::Ident(w)
                if bound.contains_key(w)
                    && tokens.get(i + 1).map(|t| &t.tok) == Some(&Tok::PathSep)
                    && !(i > 0 && matches!(tokens[i - 1].tok, Tok::PathSep | Tok::Punct('$')))
                    && !in_test(&braces) =>
            {
                let (rest, end) = inline_path(tokens, i);
                if rest.len() > 1 {
                    let mut segments = bound[w].clone();
                    segments.extend(rest.into_iter().skip(1));
                    out.paths.push(path_ref(&braces, segments, tokens[i].line));
                    i = end;
                    continue;
                }
            }
            Tok::Open => {
                braces.push(None);
                cfg_test = false;
            }
            Tok::Close => {
                braces.pop();
            }
            // An attribute applies to the item after it: a `#[cfg(test)]`
            // on a function (its body opens a brace) or a `use` must not
            // reach the next `mod`.
            Tok::Semi => {
                path_attr = None;
                cfg_test = false;
            }
            _ => {}
        }
        i += 1;
    }
    out
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
