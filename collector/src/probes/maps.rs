//! The maps user space shares with the kernel side: sized for this host
//! before loading, taken out of the object once the programs are attached,
//! and read and written while the capture runs (the traced-process set, the
//! two ring buffers, the per-thread slots holding open runs, the per-CPU
//! drop counters). The layouts are the kernel side's; only here are they
//! named by string.

use std::collections::BTreeSet;

use aya::maps::{Array, CgroupArray, HashMap, Map, MapData, MapError, PerCpuArray};
use aya::Ebpf;
use iorepro_common::{IoEvent, Written, DROPPED_PROC, MAX_SLOTS};

use super::{Capabilities, Probes};
use crate::error::{CollectError, CollectResult};
use crate::ring::Ring;

impl Probes {
    /// Takes the maps user space reads out of the loaded, attached object
    /// `ebpf` (pointing a cgroup capture's array at `cgroup` first).
    pub(super) fn from_maps(
        mut ebpf: Ebpf,
        cgroup: Option<&std::fs::File>,
        capabilities: Capabilities,
    ) -> CollectResult<Probes> {
        if let Some(dir) = cgroup {
            match ebpf.map_mut("CGROUP") {
                Some(map @ Map::CgroupArray(_)) => set_cgroup(map, dir)?,
                _ => {
                    return Err(CollectError::Kernel(
                        "eBPF object has no cgroup array CGROUP".into(),
                    ))
                }
            }
        }
        let events = Ring::new(ring_map(&mut ebpf, "EVENTS")?)?;
        let proc_events = Ring::new(ring_map(&mut ebpf, "PROC_EVENTS")?)?;
        let traced = Array::try_from(take_map(&mut ebpf, "TRACED")?).map_err(map_err("TRACED"))?;
        let dropped =
            PerCpuArray::try_from(take_map(&mut ebpf, "DROPPED")?).map_err(map_err("DROPPED"))?;
        let slots = Array::try_from(take_map(&mut ebpf, "SLOTS")?).map_err(map_err("SLOTS"))?;
        let written =
            HashMap::try_from(take_map(&mut ebpf, "WRITTEN")?).map_err(map_err("WRITTEN"))?;
        Ok(Probes {
            ebpf: Some(ebpf),
            events,
            proc_events,
            traced,
            traced_set: BTreeSet::new(),
            dropped,
            slots,
            written,
            capabilities,
            tls: Default::default(),
        })
    }

    /// The runs that the threads `tids` still had open, as records (after
    /// [`Probes::detach`]). Every thread that took a slot has sent its name,
    /// so the named threads' slots are all there is to look at.
    pub fn open_runs(&self, tids: impl Iterator<Item = u32>) -> Vec<IoEvent> {
        let mask = self.slots.len().saturating_sub(1);
        let mut runs = Vec::new();
        for tid in tids {
            let (a, b) = iorepro_common::slot_indexes(tid, mask);
            for i in [a, b] {
                if let Ok(s) = self.slots.get(&i, 0) {
                    if s.tid == tid && s.run.calls != 0 {
                        runs.push(s.run.event());
                        break;
                    }
                }
            }
        }
        runs
    }

    /// Has the kernel side follow the write-back of the inode `ino` (see
    /// [`crate::write_back`]). A failed update costs that file's
    /// `writeback` rows only: the map is an LRU, so it is never full.
    pub fn follow_write_back(&mut self, ino: u64, written: Written) {
        let _ = self.written.insert(ino, written, 0);
    }

    pub fn trace(&mut self, tgid: u32) -> CollectResult<()> {
        self.traced.set(tgid, 1, 0).map_err(map_err("TRACED"))?;
        self.traced_set.insert(tgid);
        Ok(())
    }

    /// A child the kernel side started tracing when it was forked.
    pub fn forked(&mut self, tgid: u32) {
        self.traced_set.insert(tgid);
    }

    pub fn untrace(&mut self, tgid: u32) {
        let _ = self.traced.set(tgid, 0, 0);
        self.traced_set.remove(&tgid);
    }

    pub fn traced(&self) -> Vec<u32> {
        self.traced_set.iter().copied().collect()
    }

    /// Records lost so far: I/O records (all kinds), process records.
    pub fn dropped_totals(&self) -> (u64, u64) {
        let (io, proc) = self.dropped();
        (io.iter().map(|(_, n)| n).sum(), proc)
    }

    /// Records lost to a full ring buffer so far: I/O records by kind
    /// (thread names among them), and process records.
    pub fn dropped(&self) -> (Vec<(u32, u64)>, u64) {
        let sum = |slot: u32| {
            self.dropped
                .get(&slot, 0)
                .map(|v| v.iter().sum::<u64>())
                .unwrap_or(0)
        };
        let io = (0..DROPPED_PROC)
            .map(|k| (k, sum(k)))
            .filter(|(_, n)| *n > 0)
            .collect();
        (io, sum(DROPPED_PROC))
    }
}

/// Entries of the tgid-indexed traced-process array: `pid_max`, whose pids
/// all fit (a child forked with a larger pid after `pid_max` was raised is
/// counted as a lost process record).
pub(super) fn pid_limit() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(1 << 22)
        .clamp(1024, 1 << 22)
}

/// Entries of the per-thread slot array: enough that live threads never
/// share a slot below `pid_max` (tids are below it), within the map's limit.
pub(super) fn slot_count() -> u32 {
    pid_limit().next_power_of_two().clamp(1024, MAX_SLOTS)
}

/// Puts the cgroup directory `dir` at index 0 of the cgroup array `map`.
fn set_cgroup(map: &mut Map, dir: &std::fs::File) -> CollectResult<()> {
    use std::os::fd::AsFd;
    let following = |why: String| CollectError::Kernel(format!("following the cgroup: {why}"));
    let mut array = CgroupArray::try_from(map).map_err(|e| following(e.to_string()))?;
    array.set(0, dir.as_fd(), 0).map_err(|e| match e {
        // The system's error alone, as the kernel gave it.
        MapError::SyscallError(e) => following(e.io_error.to_string()),
        e => following(e.to_string()),
    })
}

fn ring_map(ebpf: &mut Ebpf, name: &str) -> CollectResult<MapData> {
    match take_map(ebpf, name)? {
        Map::RingBuf(m) => Ok(m),
        _ => Err(CollectError::Kernel(format!(
            "map {name} is not a ring buffer"
        ))),
    }
}

fn take_map(ebpf: &mut Ebpf, name: &str) -> CollectResult<aya::maps::Map> {
    ebpf.take_map(name)
        .ok_or_else(|| CollectError::Kernel(format!("eBPF object has no map {name}")))
}

fn map_err(what: &str) -> impl Fn(aya::maps::MapError) -> CollectError + '_ {
    move |e| CollectError::Kernel(format!("map {what}: {e}"))
}
