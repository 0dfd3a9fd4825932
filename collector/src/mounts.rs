//! The mount table of the traced job, recorded in the manifest (`mounts`)
//! so the analysis can say which file system each file was on.
//!
//! Read from `/proc/PID/mountinfo` of the job's first process, so a job in
//! its own mount namespace (a container) is described as it saw its files.
//! Read again when the capture ends to add mounts made while it ran: from
//! the same process if it still lives, else from the collector's own table
//! when the job shared the collector's namespace. The table is written at
//! the start too, so a capture that is killed keeps it.

use std::path::PathBuf;

use iorepro_format::keyed_names::Anonymizer;
use iorepro_format::mounts::{parse_mountinfo, union, Mount};
use iorepro_format::TraceWriter;

pub struct MountWatch {
    pid: Option<u32>,
    /// Mount points and sources are hashed as the rows' paths are.
    anonymizer: Option<Anonymizer>,
    /// The job's process shares the collector's mount namespace.
    same_ns: bool,
    table: Vec<Mount>,
}

impl MountWatch {
    /// Reads the table of `pid` (the collector's own without one) and
    /// stores it in the trace's manifest.
    pub fn start(
        pid: Option<u32>,
        writer: &mut TraceWriter,
        anonymizer: Option<Anonymizer>,
    ) -> Self {
        let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/mnt")).ok();
        let same_ns = match pid {
            Some(p) => ns(&p.to_string()).is_some_and(|n| Some(n) == ns("self")),
            None => true,
        };
        let table = read(pid)
            .or_else(|| if same_ns { read(None) } else { None })
            .unwrap_or_default();
        let watch = MountWatch {
            pid,
            anonymizer,
            same_ns,
            table,
        };
        writer.set_mounts(watch.stored());
        watch
    }

    /// The table as the manifest holds it.
    fn stored(&self) -> Vec<Mount> {
        match &self.anonymizer {
            Some(a) => self.table.iter().map(|m| a.mount(m)).collect(),
            None => self.table.clone(),
        }
    }

    /// Adds the mounts made while the job ran and stores the table.
    pub fn finish(mut self, writer: &mut TraceWriter) {
        let now = read(self.pid).or_else(|| if self.same_ns { read(None) } else { None });
        if let Some(now) = now {
            union(&mut self.table, now);
        }
        writer.set_mounts(self.stored());
    }
}

fn read(pid: Option<u32>) -> Option<Vec<Mount>> {
    let path = match pid {
        Some(p) => PathBuf::from(format!("/proc/{p}/mountinfo")),
        None => PathBuf::from("/proc/self/mountinfo"),
    };
    let text = std::fs::read_to_string(path).ok()?;
    let t = parse_mountinfo(&text);
    (!t.is_empty()).then_some(t)
}
