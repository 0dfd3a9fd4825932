//! `--evict-reads`: each file a rank read is dropped from the page cache
//! after the rank closes it, so its next read reaches the storage through
//! the kernel's read-ahead, as a buffered job's reads of a dataset larger
//! than memory do. The dropping is done off the ranks' clocks, by one
//! thread per process, as the kernel reclaims pages in the background
//! for such a job: dropping 4 MiB of pages takes about 0.6 ms here, which
//! the job never spent in its own calls.

use std::os::fd::OwnedFd;
use std::sync::mpsc::{channel, Sender};
use std::sync::Mutex;

/// Hands files to the process's evicting thread.
pub struct Evictor {
    to_evict: Mutex<Sender<OwnedFd>>,
}

impl Evictor {
    pub fn start() -> std::io::Result<Evictor> {
        let (tx, rx) = channel::<OwnedFd>();
        std::thread::Builder::new()
            .name("evict-reads".into())
            .spawn(move || {
                for fd in rx {
                    // Clean pages only: the files given are read-only.
                    let _ = rustix::fs::fadvise(&fd, 0, None, rustix::fs::Advice::DontNeed);
                }
            })?;
        Ok(Evictor {
            to_evict: Mutex::new(tx),
        })
    }

    /// Drops the file behind `fd` (a copy of a descriptor opened read-only)
    /// from the page cache, soon, and closes `fd`.
    pub fn evict(&self, fd: OwnedFd) {
        let tx = self.to_evict.lock().unwrap_or_else(|e| e.into_inner());
        // The thread outlives every rank; should it be gone, the file is
        // only left in the cache.
        let _ = tx.send(fd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_handed_over_leaves_the_page_cache() {
        let dir = std::env::temp_dir().join(format!("evict-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        drop(f);
        let cached = |p: &std::path::Path| -> usize {
            let f = std::fs::File::open(p).unwrap();
            let len = 1 << 20;
            let map = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    std::os::fd::AsRawFd::as_raw_fd(&f),
                    0,
                )
            };
            assert_ne!(map, libc::MAP_FAILED);
            let mut vec = vec![0u8; len / 4096];
            assert_eq!(unsafe { libc::mincore(map, len, vec.as_mut_ptr()) }, 0);
            unsafe { libc::munmap(map, len) };
            vec.iter().filter(|b| **b & 1 == 1).count()
        };
        let _ = std::fs::read(&path).unwrap();
        assert_eq!(cached(&path), 256, "read into the cache first");
        let e = Evictor::start().unwrap();
        e.evict(std::fs::File::open(&path).unwrap().into());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while cached(&path) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(cached(&path), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
