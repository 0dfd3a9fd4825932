//! The job's written files that the kernel may write back later, outside
//! any call of the job's: each file a traced thread writes through the
//! page cache is listed once (per writing process) in the kernel side's
//! `WRITTEN` map, with the name of its device's write-back queue, so the
//! flusher's write-back of it comes back as a `WRITEBACK` record and
//! becomes a `writeback` row. The job's own calls pay nothing for it: the
//! listing is made here, from the rows, and a file's write-back comes
//! seconds after its writes.

use iorepro_common::{IoEvent, Written, BDI_NAME, VIA_SYSCALL};
use rustc_hash::{FxHashMap, FxHashSet};

/// Files to list, and those listed.
#[derive(Default)]
pub struct WriteBack {
    /// Whether this capture follows write-back at all.
    watching: bool,
    /// (device, inode, writing process) already listed.
    listed: FxHashSet<(u32, u64, u32)>,
    /// Entries not yet handed to the kernel side.
    queue: Vec<(u64, Written)>,
    /// Write-back queue names, by device.
    queues: FxHashMap<u32, [u8; BDI_NAME]>,
}

impl WriteBack {
    pub fn new(watching: bool) -> Self {
        WriteBack {
            watching,
            ..WriteBack::default()
        }
    }

    /// A write row's record: its file is listed the first time its process
    /// writes it through the page cache (an `O_DIRECT` write leaves nothing
    /// to write back).
    pub fn note_write(&mut self, ev: &IoEvent) {
        let direct = ev.flags & libc::O_DIRECT as u32 != 0;
        if !self.watching || ev.ret <= 0 || direct || ev.via != VIA_SYSCALL {
            return;
        }
        let tgid = (ev.pid_tgid >> 32) as u32;
        if !self.listed.insert((ev.dev, ev.ino, tgid)) {
            return;
        }
        let bdi = *self
            .queues
            .entry(ev.dev)
            .or_insert_with(|| queue_name(ev.dev));
        self.queue.push((
            ev.ino,
            Written {
                pid_tgid: ev.pid_tgid,
                dev: ev.dev,
                _pad: 0,
                bdi,
            },
        ));
    }

    /// The entries to hand to the kernel side now.
    pub fn take(&mut self) -> Vec<(u64, Written)> {
        std::mem::take(&mut self.queue)
    }
}

/// The name the write-back tracepoint gives the queue of the block device
/// `kernel_dev` (the kernel's encoding, major << 20 | minor): `MAJ:MIN` of
/// the whole disk, for a partition its disk's. All zero (any queue) where
/// the file system has no block device of its own (major 0: NFS, FUSE,
/// btrfs, overlay), whose queues are named otherwise.
pub fn queue_name(kernel_dev: u32) -> [u8; BDI_NAME] {
    let (major, minor) = (kernel_dev >> 20, kernel_dev & 0xfffff);
    let mut name = [0u8; BDI_NAME];
    if major == 0 {
        return name;
    }
    let dir = format!("/sys/dev/block/{major}:{minor}");
    let whole = if std::path::Path::new(&dir).join("partition").exists() {
        std::fs::read_to_string(format!("{dir}/../dev")).ok()
    } else {
        Some(format!("{major}:{minor}"))
    };
    let whole = whole.unwrap_or_default();
    let whole = whole.trim().as_bytes();
    let n = whole.len().min(BDI_NAME - 1);
    name[..n].copy_from_slice(&whole[..n]);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dev: u32, ino: u64, pid_tgid: u64, flags: u32) -> IoEvent {
        IoEvent {
            ts_ns: 1,
            dur_ns: 1,
            span_ns: 0,
            pid_tgid,
            ret: 4096,
            offset: 0,
            size: 4096,
            ino,
            dev,
            fd: 3,
            kind: iorepro_common::kind::WRITE,
            flags,
            calls: 1,
            via: VIA_SYSCALL,
        }
    }

    #[test]
    fn a_file_is_listed_once_per_writing_process_and_not_when_direct() {
        let mut wb = WriteBack::new(true);
        let (p1, p2) = ((10u64 << 32) | 11, (20u64 << 32) | 20);
        wb.note_write(&write(0, 5, p1, 0));
        wb.note_write(&write(0, 5, p1 + 1, 0)); // another thread, same process
        wb.note_write(&write(0, 5, p2, 0));
        wb.note_write(&write(0, 6, p1, libc::O_DIRECT as u32));
        let listed = wb.take();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].0, 5);
        assert_eq!(listed[0].1.pid_tgid, p1);
        assert_eq!(listed[1].1.pid_tgid, p2);
        // Major 0 (no block device): any queue.
        assert_eq!(listed[0].1.bdi, [0; BDI_NAME]);
        assert!(wb.take().is_empty());
        let mut off = WriteBack::new(false);
        off.note_write(&write(0, 5, p1, 0));
        assert!(off.take().is_empty());
    }

    #[test]
    fn a_partition_is_named_by_its_disk() {
        // Whatever the machine's disks are: a partition's queue is its
        // disk's, a whole disk's its own.
        let Ok(entries) = std::fs::read_dir("/sys/dev/block") else {
            return;
        };
        for e in entries.flatten() {
            let id = e.file_name().to_string_lossy().to_string();
            let Some((ma, mi)) = id.split_once(':') else {
                continue;
            };
            let (ma, mi): (u32, u32) = (ma.parse().unwrap(), mi.parse().unwrap());
            let name = queue_name((ma << 20) | mi);
            let name = String::from_utf8_lossy(&name)
                .trim_end_matches('\0')
                .to_string();
            if e.path().join("partition").exists() {
                let disk = std::fs::read_to_string(e.path().join("../dev")).unwrap();
                assert_eq!(name, disk.trim(), "{id}");
            } else {
                assert_eq!(name, id);
            }
        }
    }
}
