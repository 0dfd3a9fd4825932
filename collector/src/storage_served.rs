//! What the storage did inside a call, added to the call's row: for a read,
//! the page-cache fills the kernel made while it ran (`FILL` records); for a
//! write, an `fsync` or an `fdatasync`, the bytes it sent to its file's
//! device (`DEVICE_WRITE` records).
//!
//! Such a record is sent while its call is in flight; the call's own record
//! comes at its exit, or later when the call joined a run, and a run may be
//! sent after the records of the thread's next call. A thread makes one call
//! at a time, so a row's records are the thread's pending ones stamped inside
//! the row's time (from its first call's entry to its last call's exit).
//! Those stamped before a row that takes them began belonged to a call that
//! left no row (a file the trace does not record, a lost record) and are
//! dropped with it.
//!
//! An `O_DIRECT` read fills nothing: all its bytes are the storage's. An
//! io_uring request's work happens in the kernel's workers, which are not
//! followed, so its row says nothing (null). A buffered write sends nothing
//! to the device in the call (0): write-back or a later `fsync` does.

use iorepro_common::{kind, IoEvent, VIA_IO_URING};
use iorepro_format::{FromStorage, Op};
use rustc_hash::FxHashMap;

/// Fills and device writes waiting for their rows, by thread.
pub struct StorageServed {
    fills: Pending,
    device_writes: Pending,
    /// Whether this capture watches the page cache and the block layer: where
    /// it does not, the rows' column stays null rather than claim 0.
    watched: Watched,
}

/// Which of the kernel's hooks the capture has.
#[derive(Debug, Clone, Copy, Default)]
pub struct Watched {
    pub fills: bool,
    pub device_writes: bool,
    /// The flusher's write-back of the job's files (`writeback` rows).
    pub write_back: bool,
}

/// Records waiting for their row, by thread.
#[derive(Default)]
struct Pending(FxHashMap<u32, Vec<Fill>>);

/// A fill or a device write: `offset` is -1 for the latter.
#[derive(Debug, Clone, Copy)]
struct Fill {
    ts: u64,
    ino: u64,
    dev: u32,
    offset: i64,
    bytes: u64,
}

/// The most fills one thread may hold while no data row of its comes (a
/// thread whose fills all fall in calls that leave none): the oldest half
/// goes when it is reached.
const PENDING_CAP: usize = 1 << 16;

impl StorageServed {
    pub fn new(watched: Watched) -> Self {
        StorageServed {
            fills: Pending::default(),
            device_writes: Pending::default(),
            watched,
        }
    }

    /// A `FILL` or `DEVICE_WRITE` record: held until the row of its call comes.
    pub fn add(&mut self, ev: &IoEvent) {
        match ev.kind {
            kind::FILL => self.fills.add(ev),
            kind::DEVICE_WRITE => self.device_writes.add(ev),
            _ => {}
        }
    }

    /// What the storage served of the row made of `ev`, whose op is `op`;
    /// takes the row's records (whether or not the row is kept).
    pub fn take(&mut self, ev: &IoEvent, op: Op) -> Option<FromStorage> {
        if ev.via == VIA_IO_URING {
            return None;
        }
        match op {
            // A fill outside any call is its own row, and all storage.
            Op::Fault if self.watched.fills => Some(FromStorage {
                bytes: ev.size as i64,
                read_ahead: 0,
            }),
            Op::Read => {
                let fills = self.fills.take(ev);
                if !self.watched.fills {
                    return None;
                }
                if ev.flags & libc::O_DIRECT as u32 != 0 {
                    return Some(FromStorage {
                        bytes: ev.ret.max(0),
                        read_ahead: 0,
                    });
                }
                Some(served(ev, &fills))
            }
            Op::Write | Op::Fsync | Op::Fdatasync => {
                // (A fill under a write is a partial page read in: no
                // byte of the write's.)
                self.fills.take(ev);
                let sent = self.device_writes.take(ev);
                self.watched.device_writes.then(|| FromStorage {
                    bytes: sent.iter().map(|w| w.bytes as i64).sum(),
                    read_ahead: 0,
                })
            }
            _ => None,
        }
    }
}

impl Pending {
    fn add(&mut self, ev: &IoEvent) {
        let list = self.0.entry(ev.pid_tgid as u32).or_default();
        if list.len() >= PENDING_CAP {
            list.drain(..PENDING_CAP / 2);
        }
        list.push(Fill {
            ts: ev.ts_ns,
            ino: ev.ino,
            dev: ev.dev,
            offset: ev.offset,
            bytes: ev.size,
        });
    }

    /// Removes and returns the thread's records inside the row's time, and
    /// drops those before it.
    fn take(&mut self, ev: &IoEvent) -> Vec<Fill> {
        let Some(list) = self.0.get_mut(&(ev.pid_tgid as u32)) else {
            return Vec::new();
        };
        let end = ev.ts_ns.saturating_add(ev.span_ns.max(ev.dur_ns));
        let mut mine = Vec::new();
        list.retain(|f| {
            if f.ts > end {
                return true;
            }
            if f.ts >= ev.ts_ns {
                mine.push(*f);
            }
            false
        });
        if list.is_empty() {
            self.0.remove(&(ev.pid_tgid as u32));
        }
        mine
    }
}

/// The row's fills: all of them, and the part outside the row's own range
/// on its own file (read-ahead).
fn served(ev: &IoEvent, fills: &[Fill]) -> FromStorage {
    let (lo, hi) = (ev.offset, ev.offset.saturating_add(ev.size as i64));
    let mut out = FromStorage::default();
    for f in fills {
        out.bytes += f.bytes as i64;
        let same_file = f.ino == ev.ino && f.dev == ev.dev;
        let inside = if same_file && ev.offset >= 0 {
            let (a, b) = (f.offset, f.offset.saturating_add(f.bytes as i64));
            (b.min(hi) - a.max(lo)).max(0)
        } else {
            0
        };
        out.read_ahead += f.bytes as i64 - inside;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use iorepro_common::VIA_SYSCALL;

    const ALL: Watched = Watched {
        fills: true,
        device_writes: true,
        write_back: true,
    };

    fn event(kind: u32, ts: u64, span: u64, offset: i64, size: u64) -> IoEvent {
        IoEvent {
            ts_ns: ts,
            dur_ns: span,
            span_ns: span,
            pid_tgid: (7 << 32) | 8,
            ret: size as i64,
            offset,
            size,
            ino: 42,
            dev: 3,
            fd: 5,
            kind,
            flags: 0,
            calls: 1,
            via: VIA_SYSCALL,
        }
    }

    #[test]
    fn a_read_takes_the_fills_of_its_time_and_splits_off_read_ahead() {
        let mut served = StorageServed::new(ALL);
        // A fill of an earlier call that left no row, then the read's own
        // 64 KiB and 192 KiB of read-ahead, then the next call's fill.
        served.add(&event(kind::FILL, 50, 0, 0, 4096));
        served.add(&event(kind::FILL, 110, 0, 0, 65536));
        served.add(&event(kind::FILL, 120, 0, 65536, 196608));
        served.add(&event(kind::FILL, 300, 0, 262144, 4096));
        let read = event(kind::READ, 100, 100, 0, 65536);
        let got = served.take(&read, Op::Read).unwrap();
        assert_eq!(
            got,
            FromStorage {
                bytes: 262144,
                read_ahead: 196608
            }
        );
        // The next read (a cache hit but for its one fill) gets only that.
        let next = event(kind::READ, 250, 100, 65536, 65536);
        assert_eq!(served.take(&next, Op::Read).unwrap().bytes, 4096);
        // A read with no fill was served by the page cache.
        let warm = event(kind::READ, 400, 10, 0, 65536);
        assert_eq!(served.take(&warm, Op::Read), Some(FromStorage::default()));
    }

    #[test]
    fn an_fsync_takes_what_it_sent_to_the_device_and_a_buffered_write_nothing() {
        let mut served = StorageServed::new(ALL);
        let write = event(kind::WRITE, 100, 10, 0, 1 << 20);
        served.add(&event(kind::DEVICE_WRITE, 210, 0, -1, 1 << 19));
        served.add(&event(kind::DEVICE_WRITE, 220, 0, -1, 1 << 19));
        let fsync = event(kind::FSYNC, 200, 50, -1, 0);
        assert_eq!(served.take(&write, Op::Write).unwrap().bytes, 0);
        assert_eq!(served.take(&fsync, Op::Fsync).unwrap().bytes, 1 << 20);
    }

    #[test]
    fn direct_reads_are_all_storage_and_unwatched_captures_say_nothing() {
        let mut served = StorageServed::new(ALL);
        let mut direct = event(kind::READ, 100, 10, 0, 8192);
        direct.flags = libc::O_DIRECT as u32;
        assert_eq!(served.take(&direct, Op::Read).unwrap().bytes, 8192);
        let mut blind = StorageServed::new(Watched::default());
        assert_eq!(blind.take(&event(kind::READ, 1, 1, 0, 1), Op::Read), None);
        assert_eq!(blind.take(&event(kind::FSYNC, 1, 1, 0, 1), Op::Fsync), None);
    }
}
