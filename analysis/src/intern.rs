//! Distinct names numbered densely in the order first seen. A trace's
//! parts each meet its thousands of paths again (every row group has its
//! own dictionary), so a name costs one hash per look-up, and a new one is
//! copied once, beside the others, rather than into a key and a list of its
//! own.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

#[derive(Debug, Clone, Default)]
pub struct Interner {
    /// Ids, found by their name's hash.
    table: HashTable<u32>,
    /// The names, one after the other; name `i` ends at `ends[i]`.
    text: String,
    ends: Vec<usize>,
}

impl Interner {
    /// The id of `name`, numbered next if it is new.
    pub fn id(&mut self, name: &str) -> u32 {
        let hash = FxBuildHasher.hash_one(name);
        let Interner { table, text, ends } = self;
        let of = |id: u32| spelled(text, ends, id);
        if let Some(&id) = table.find(hash, |&id| of(id) == name) {
            return id;
        }
        let id = ends.len() as u32;
        table.insert_unique(hash, id, |&id| FxBuildHasher.hash_one(of(id)));
        text.push_str(name);
        ends.push(text.len());
        id
    }

    /// The name numbered `id`.
    pub fn name(&self, id: u32) -> &str {
        spelled(&self.text, &self.ends, id)
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// The names in the order of their ids.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        (0..self.len() as u32).map(|id| self.name(id))
    }
}

fn spelled<'a>(text: &'a str, ends: &[usize], id: u32) -> &'a str {
    let i = id as usize;
    let start = if i == 0 { 0 } else { ends[i - 1] };
    &text[start..ends[i]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_numbered_once_in_the_order_first_seen() {
        let mut names = Interner::default();
        let spellings = [
            "/data/a", "", "/data/b", "/data/a", "", "/ckpt/é", "/data/b",
        ];
        let ids: Vec<u32> = spellings.iter().map(|s| names.id(s)).collect();
        assert_eq!(ids, [0, 1, 2, 0, 1, 3, 2]);
        assert_eq!(names.len(), 4);
        assert_eq!(
            names.iter().collect::<Vec<_>>(),
            ["/data/a", "", "/data/b", "/ckpt/é"]
        );
        // Past the table's first growth, every name still finds its id.
        for i in 0..10_000 {
            assert_eq!(names.id(&format!("/d/{i}")), 4 + i);
        }
        for i in (0..10_000).rev() {
            assert_eq!(names.id(&format!("/d/{i}")), 4 + i);
            assert_eq!(names.name(4 + i), format!("/d/{i}"));
        }
        assert_eq!(names.id("/data/b"), 2);
    }
}
