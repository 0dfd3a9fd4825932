//! What the replay caused the storage to read and write, as the kernel
//! counts it for each task (its I/O accounting, `/proc/<pid>/task/<tid>/io`):
//! `read_bytes` are the bytes a task had fetched from the storage layer,
//! counted as its block requests were submitted (read-ahead included), and
//! `write_bytes` those it had sent there, counted as it dirtied the pages
//! (at submission for O_DIRECT). A read the page cache served counts
//! nothing, which is what tells the storage's bytes from memory's.
//!
//! A rank's thread keeps its own counter open for its whole life and reads
//! it at its phases' ends: a `pread` at offset 0 into a buffer on the stack,
//! so a sample allocates nothing and costs one small syscall.

use std::fs::File;
use std::os::unix::fs::FileExt;

use serde::{Deserialize, Serialize};

/// Bytes a task, or a process, caused the storage to read and write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageBytes {
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl StorageBytes {
    /// What was counted between `earlier` and `self`.
    pub fn since(self, earlier: StorageBytes) -> StorageBytes {
        StorageBytes {
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
        }
    }

    /// The two fields of an I/O accounting file's text; `None` where
    /// either is missing.
    fn parse(text: &[u8]) -> Option<StorageBytes> {
        let (mut read, mut write) = (None, None);
        for line in text.split(|&b| b == b'\n') {
            // Whole field names only: `cancelled_write_bytes` is another.
            if let Some(v) = line.strip_prefix(b"read_bytes: ") {
                read = parse_u64(v);
            } else if let Some(v) = line.strip_prefix(b"write_bytes: ") {
                write = parse_u64(v);
            }
        }
        Some(StorageBytes {
            read_bytes: read?,
            write_bytes: write?,
        })
    }
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
    std::str::from_utf8(digits).ok()?.trim().parse().ok()
}

/// A task's or a process's I/O accounting, held open.
#[derive(Debug)]
pub struct TaskIo {
    file: File,
}

/// The file's seven short lines fit in this, whatever their figures.
const TEXT_BYTES: usize = 512;

impl TaskIo {
    /// The calling thread's own count. `None` where the kernel keeps no
    /// per-task I/O accounting (built without `CONFIG_TASK_IO_ACCOUNTING`)
    /// or `/proc` is not there to read it.
    pub fn this_thread() -> Option<TaskIo> {
        Self::open("/proc/thread-self/io")
    }

    /// The whole process's: every thread's, living or ended, io_uring's
    /// workers included (they are threads of the process).
    pub fn this_process() -> Option<TaskIo> {
        Self::open("/proc/self/io")
    }

    fn open(path: &str) -> Option<TaskIo> {
        let io = TaskIo {
            file: File::open(path).ok()?,
        };
        // A file that opens but does not read as expected counts nothing.
        io.read().map(|_| io)
    }

    /// The count so far.
    pub fn read(&self) -> Option<StorageBytes> {
        let mut text = [0u8; TEXT_BYTES];
        let n = self.file.read_at(&mut text, 0).ok()?;
        StorageBytes::parse(&text[..n])
    }
}

/// A process's count over a stretch, less the calling thread's own: what
/// the process's other threads caused the storage to do meanwhile.
#[derive(Debug)]
pub struct OtherThreads {
    process: TaskIo,
    this_thread: TaskIo,
    at_start: (StorageBytes, StorageBytes),
}

impl OtherThreads {
    /// Starts the stretch now; `None` where either count cannot be read.
    pub fn start() -> Option<OtherThreads> {
        let (process, this_thread) = (TaskIo::this_process()?, TaskIo::this_thread()?);
        let at_start = (process.read()?, this_thread.read()?);
        Some(OtherThreads {
            process,
            this_thread,
            at_start,
        })
    }

    /// What the other threads caused since the start. Read on the thread
    /// that started it, which its own count is of.
    pub fn so_far(&self) -> Option<StorageBytes> {
        let all = self.process.read()?.since(self.at_start.0);
        let mine = self.this_thread.read()?.since(self.at_start.1);
        Some(all.since(mine))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_two_fields_are_read_and_the_cancelled_writes_left_alone() {
        let text = b"rchar: 1412692\nwchar: 237\nsyscr: 228\nsyscw: 1\nread_bytes: 188416\n\
                     write_bytes: 8192\ncancelled_write_bytes: 4096\n";
        assert_eq!(
            StorageBytes::parse(text),
            Some(StorageBytes {
                read_bytes: 188_416,
                write_bytes: 8192
            })
        );
        assert_eq!(StorageBytes::parse(b"rchar: 1\nread_bytes: 2\n"), None);
        let later = StorageBytes {
            read_bytes: 10,
            write_bytes: 3,
        };
        let earlier = StorageBytes {
            read_bytes: 4,
            write_bytes: 5,
        };
        assert_eq!(
            later.since(earlier),
            StorageBytes {
                read_bytes: 6,
                write_bytes: 0
            }
        );
    }

    #[test]
    fn a_thread_counts_the_pages_it_dirties() {
        let Some(io) = TaskIo::this_thread() else {
            iorepro_tests::skip::cannot_run("this kernel keeps no per-task I/O accounting");
            return;
        };
        let before = io.read().unwrap();
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&[7u8; 64 << 10]).unwrap();
        let written = io.read().unwrap().since(before).write_bytes;
        // Every page dirtied is counted once, when it is dirtied; a
        // tmpfs counts nothing (it has no storage behind it).
        assert!(written == 0 || written >= 64 << 10, "{written}");
        assert!(TaskIo::this_process().is_some());
    }
}
