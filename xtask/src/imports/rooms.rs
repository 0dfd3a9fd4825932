//! The rule of which room may import which, as a crate's `lib.rs` states
//! it, and the references that break it. A room is a top-level module of
//! the crate (`src/plan/`, `src/io.rs`); the rule is the list that follows
//! a doc line saying "Which room may import which", in one of two forms.
//! One room an item, the first name in backticks the room and the others
//! the rooms it may import:
//!
//! ```text
//! //! Which room may import which:
//! //! - `plan`: no other room
//! //! - `io`: `plan`
//! //! - `execute`: every room
//! ```
//!
//! Or in layers, one layer an item, each room importing only rooms of the
//! layers above its own:
//!
//! ```text
//! //! Which room may import which: each only those of the lines above its own.
//! //! - `error`, `schema`
//! //! - `reader`, `writer`
//! ```
//!
//! Modules the list does not name (`error`, `cli`) are free to import and
//! to be imported.

use std::collections::BTreeMap;
use std::path::Path;

use super::tree::Edge;

/// The rooms each room may import; `None` for every room.
pub type Rule = BTreeMap<String, Option<Vec<String>>>;

const HEADING: &str = "Which room may import which";

/// The rule stated in `lib_rs`'s opening doc comment, if it states one.
pub fn rule(lib_rs: &str) -> Option<Rule> {
    let doc: Vec<&str> = lib_rs
        .lines()
        .map_while(|l| l.trim_start().strip_prefix("//!"))
        .map(str::trim)
        .collect();
    let start = doc.iter().position(|l| l.contains(HEADING))?;
    let mut rule = Rule::new();
    let mut above: Vec<String> = Vec::new();
    // The heading may run on over a line or two before the list.
    for line in doc[start..]
        .iter()
        .skip_while(|l| !l.starts_with("- "))
        .take_while(|l| l.starts_with("- "))
    {
        let parts: Vec<&str> = line.split('`').collect();
        let names: Vec<String> = parts
            .iter()
            .skip(1)
            .step_by(2)
            .map(|s| s.to_string())
            .collect();
        let Some((room, allowed)) = names.split_first() else {
            continue;
        };
        let one_room = parts.get(2).is_some_and(|after| after.starts_with(':'));
        if one_room {
            let allowed = (!line.contains("every room")).then(|| allowed.to_vec());
            rule.insert(room.clone(), allowed);
        } else {
            for name in &names {
                rule.insert(name.clone(), Some(above.clone()));
            }
            above.extend(names);
        }
    }
    (!rule.is_empty()).then_some(rule)
}

/// The room of a file of the crate whose sources are in `src`.
fn room_of(src: &Path, file: &Path) -> Option<String> {
    let first = file.strip_prefix(src).ok()?.components().next()?;
    let name = first.as_os_str().to_str()?;
    Some(name.strip_suffix(".rs").unwrap_or(name).to_string())
}

/// The edges that go from one room to another the rule does not allow it.
pub fn breaks<'e>(rule: &Rule, src: &Path, edges: &'e [Edge]) -> Vec<&'e Edge> {
    edges
        .iter()
        .filter(|e| {
            let (Some(from), Some(to)) = (room_of(src, &e.from), room_of(src, &e.to)) else {
                return false;
            };
            if from == to || !rule.contains_key(&to) {
                return false;
            }
            match rule.get(&from) {
                Some(Some(allowed)) => !allowed.contains(&to),
                Some(None) | None => false,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const LIB: &str = "//! A crate.\n//!\n//! Which room may import which (a rule\n//! the check reads):\n//! - `plan`: no other room\n//! - `io`: `plan`\n//! - `execute`: every room\n//!\n//! More.\n\npub mod plan;\n";

    fn edge(from: &str, to: &str) -> Edge {
        Edge {
            from: PathBuf::from(from),
            to: PathBuf::from(to),
            line: 1,
            path: String::new(),
        }
    }

    #[test]
    fn the_rule_is_read_from_the_doc() {
        let r = rule(LIB).unwrap();
        assert_eq!(r["plan"], Some(vec![]));
        assert_eq!(r["io"], Some(vec!["plan".to_string()]));
        assert_eq!(r["execute"], None);
        assert!(rule("//! No rule here.\n").is_none());
    }

    #[test]
    fn a_rule_in_layers() {
        let lib = "//! Which room may import which: each only those of the lines\n//! above its own.\n//! - `error`, `schema`\n//! - `reader`, `writer`\n//! - `scan`\n";
        let r = rule(lib).unwrap();
        assert_eq!(r["schema"], Some(vec![]));
        assert_eq!(
            r["writer"],
            Some(vec!["error".to_string(), "schema".to_string()])
        );
        assert_eq!(r["scan"].as_ref().unwrap().len(), 4);
        let src = Path::new("f/src");
        let edges = [
            edge("f/src/writer.rs", "f/src/schema.rs"),
            edge("f/src/writer.rs", "f/src/reader.rs"),
            edge("f/src/schema.rs", "f/src/scan.rs"),
        ];
        assert_eq!(breaks(&r, src, &edges), vec![&edges[1], &edges[2]]);
    }

    #[test]
    fn only_imports_the_rule_leaves_out_break_it() {
        let r = rule(LIB).unwrap();
        let src = Path::new("c/src");
        let edges = [
            edge("c/src/io/a.rs", "c/src/plan.rs"),
            edge("c/src/plan.rs", "c/src/io/a.rs"),
            edge("c/src/plan.rs", "c/src/error.rs"),
            edge("c/src/execute.rs", "c/src/io/a.rs"),
            edge("c/src/io/a.rs", "c/src/io/b.rs"),
            edge("c/src/run.rs", "c/src/execute.rs"),
        ];
        let found = breaks(&r, src, &edges);
        assert_eq!(found, vec![&edges[1]]);
    }
}
