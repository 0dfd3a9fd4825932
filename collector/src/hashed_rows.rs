//! `--anonymize-key-file`: no name the job used reaches the disk. Rows are
//! hashed as the reorder window hands them to the writer, the only way to
//! the trace, so segments (finished or cut short by a crash) and the
//! manifest hold keyed hashes alone (see [`iorepro_format::keyed_names`]).
//! What a name says about its file is read from it first and written
//! beside it (`path_traits`, by the name rules the analysis judges roles
//! by, [`iorepro_format::path_traits`]), so roles are judged on the
//! hashed trace as on the names. The originals stay in this process's
//! memory while it runs.

use std::rc::Rc;

use iorepro_format::keyed_names::Anonymizer;
use iorepro_format::path_traits;
use iorepro_format::{EventRow, RowTraits};
use rustc_hash::FxHashMap;

/// Hashes the names of rows, each distinct name once.
pub struct Masker {
    a: Anonymizer,
    host: String,
    paths: FxHashMap<Rc<str>, (Rc<str>, i32)>,
    threads: FxHashMap<String, String>,
}

impl Masker {
    pub fn new(a: Anonymizer, host: &str) -> Self {
        Masker {
            host: a.host(host),
            a,
            paths: FxHashMap::default(),
            threads: FxHashMap::default(),
        }
    }

    fn learn_path(&mut self, p: Option<&str>) {
        if let Some(p) = p {
            if !self.paths.contains_key(p) {
                let hashed = (Rc::from(self.a.path(p)), path_traits::of(p));
                self.paths.insert(Rc::from(p), hashed);
            }
        }
    }

    /// `row` with its names hashed, and what they said.
    pub fn mask<'a>(&'a mut self, row: &EventRow<'a>) -> (EventRow<'a>, RowTraits) {
        self.learn_path(row.path);
        self.learn_path(row.path2);
        if !self.threads.contains_key(row.comm) {
            self.threads
                .insert(row.comm.to_string(), self.a.thread(row.comm));
        }
        let look = |p: Option<&str>| p.map(|p| &self.paths[p]);
        let (path, path2) = (look(row.path), look(row.path2));
        let masked = EventRow {
            host: &self.host,
            comm: &self.threads[row.comm],
            path: path.map(|(h, _)| &**h),
            path2: path2.map(|(h, _)| &**h),
            ..*row
        };
        let traits = RowTraits {
            path: path.map(|(_, t)| *t),
            path2: path2.map(|(_, t)| *t),
        };
        (masked, traits)
    }

    pub fn anonymizer(&self) -> &Anonymizer {
        &self.a
    }
}
