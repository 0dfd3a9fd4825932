//! What a path's name says about its file: code, a checkpoint, a log, a run
//! record, a launcher's file. These are the name rules the analysis judges
//! roles by (`iorepro_analysis::roles`), kept here, beside the bits that
//! record them ([`crate::schema::traits`]), because the collector needs them
//! too and links the format alone: an anonymizer reads them from each name
//! before it hashes it ([`of`]), and writes the bits beside the hash
//! (`path_traits`). A rule then asks an [`Evidence`], the name itself or
//! those bits, and never cares which of the two it is.
//!
//! [`names`] holds the rules on a name's words, [`launcher_files`] the one
//! on the files a launcher or runtime makes.

pub mod launcher_files;
pub mod names;

use crate::paths::canonical;
use crate::schema::traits as bit;

pub use launcher_files::is_launcher_file;
use names::{
    log_name, looks_like_checkpoint, looks_like_code, record_format, record_name, text_name, under,
    written_like_checkpoint,
};

/// The bits of every name rule that holds on `path` (any spelling; the
/// rules read its canonical one): what an anonymizer records before it
/// hashes the name.
pub fn of(path: &str) -> i32 {
    let key = canonical(path).map_or_else(|| path.to_string(), |c| c.path);
    let e = Evidence::Name(&key);
    [
        (e.etc(), bit::ETC),
        (e.launcher(), bit::LAUNCHER),
        (e.code(), bit::CODE),
        (e.checkpoint(), bit::CHECKPOINT),
        (e.written_checkpoint(), bit::WRITTEN_CHECKPOINT),
        (e.log(), bit::LOG),
        (e.text(), bit::TEXT),
        (e.record_format(), bit::RECORD_FORMAT),
        (e.record_name(), bit::RECORD_NAME),
    ]
    .into_iter()
    .filter(|(holds, _)| *holds)
    .fold(0, |bits, (_, b)| bits | b)
}

/// Where the rules find what a path's name says.
#[derive(Debug, Clone, Copy)]
pub enum Evidence<'a> {
    /// The name as captured (canonical): its words are read when asked.
    Name(&'a str),
    /// The bits recorded before the name was hashed.
    Bits(i32),
}

impl Evidence<'_> {
    fn holds(self, b: i32, rule: impl FnOnce(&str) -> bool) -> bool {
        match self {
            Evidence::Name(p) => rule(p),
            Evidence::Bits(bits) => bits & b != 0,
        }
    }

    pub fn etc(self) -> bool {
        self.holds(bit::ETC, |p| under(p, "/etc"))
    }

    pub fn launcher(self) -> bool {
        self.holds(bit::LAUNCHER, is_launcher_file)
    }

    pub fn code(self) -> bool {
        self.holds(bit::CODE, looks_like_code)
    }

    pub fn checkpoint(self) -> bool {
        self.holds(bit::CHECKPOINT, looks_like_checkpoint)
    }

    pub fn written_checkpoint(self) -> bool {
        self.holds(bit::WRITTEN_CHECKPOINT, written_like_checkpoint)
    }

    pub fn log(self) -> bool {
        self.holds(bit::LOG, log_name)
    }

    pub fn text(self) -> bool {
        self.holds(bit::TEXT, text_name)
    }

    pub fn record_format(self) -> bool {
        self.holds(bit::RECORD_FORMAT, record_format)
    }

    pub fn record_name(self) -> bool {
        self.holds(bit::RECORD_NAME, record_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_say_what_the_name_said() {
        for p in [
            "/usr/lib/python3.11/site-packages/torch/__init__.py",
            "/tmp/ompi.vm.0/pid.1/x",
            "/w/out/.hydra/config.yaml",
            "/w/train.log.3",
            "/c/./step_1/../step_2/zero_pp_rank_0_mp_rank_00_optim_states.pt",
            "/etc/passwd",
            "/data/x.npz",
            "/w/notes.txt",
            "/data/train/0001.tar",
        ] {
            let key = canonical(p).unwrap().path;
            let (name, bits) = (Evidence::Name(&key), Evidence::Bits(of(p)));
            let both = |f: &dyn Fn(Evidence) -> bool| f(name) == f(bits);
            assert!(both(&|e| e.etc()), "{p}");
            assert!(both(&|e| e.launcher()), "{p}");
            assert!(both(&|e| e.code()), "{p}");
            assert!(both(&|e| e.checkpoint()), "{p}");
            assert!(both(&|e| e.written_checkpoint()), "{p}");
            assert!(both(&|e| e.log()), "{p}");
            assert!(both(&|e| e.text()), "{p}");
            assert!(both(&|e| e.record_format()), "{p}");
            assert!(both(&|e| e.record_name()), "{p}");
        }
        assert_eq!(of("/data/train/0001.tar"), 0);
        assert_ne!(of("/w/out/.hydra/config.yaml") & bit::RECORD_NAME, 0);
    }
}
