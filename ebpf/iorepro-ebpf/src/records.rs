//! Handing records to user space: reserved in place in the ring buffers (no
//! copy through the stack), never waking the reader for I/O records (it polls),
//! and counting every record that found a ring full.

use aya_ebpf::helpers::bpf_ktime_get_ns;
use aya_ebpf::macros::map;
use aya_ebpf::maps::ring_buf::RingBufEntry;
use aya_ebpf::maps::{PerCpuArray, RingBuf};
use iorepro_common::{
    IoEvent, NameEvent, ProcEvent, COMM_LEN, DROPPED_NAME, DROPPED_PROC, DROPPED_SLOTS,
};

/// I/O records; user space polls it, so submissions never wake it up.
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(16 << 20, 0);

/// Process-tree records, apart so an I/O flood cannot starve them.
#[map]
static PROC_EVENTS: RingBuf = RingBuf::with_byte_size(256 << 10, 0);

/// Records that found the ring buffer full, per CPU, by record kind.
#[map]
static DROPPED: PerCpuArray<u64> = PerCpuArray::with_max_entries(DROPPED_SLOTS, 0);

/// `BPF_RB_NO_WAKEUP`: the collector polls on a short interval instead.
const NO_WAKEUP: u64 = 1;

/// Room for a `T` in the I/O ring; a full ring counts a drop under `kind`.
#[inline(always)]
pub fn reserve<T: 'static>(kind: u32) -> Option<RingBufEntry<T>> {
    let entry = EVENTS.reserve::<T>(0);
    if entry.is_none() {
        count_drop(kind);
    }
    entry
}

#[inline(always)]
pub fn submit<T: 'static>(entry: RingBufEntry<T>) {
    entry.submit(NO_WAKEUP);
}

/// Sends an I/O record; a full ring counts every call it stands for as lost.
#[inline(always)]
pub fn io(io: &IoEvent) {
    match EVENTS.reserve::<IoEvent>(0) {
        Some(mut entry) => {
            entry.write(*io);
            submit(entry);
        }
        None => count_drops(io.kind, io.calls as u64),
    }
}

/// Sends a record already put together as bytes (a path record); a full
/// ring counts `calls` lost under `kind`.
#[inline(always)]
pub fn bytes(record: &[u8], kind: u32, calls: u64) {
    if EVENTS.output::<[u8]>(record, NO_WAKEUP).is_err() {
        count_drops(kind, calls);
    }
}

#[inline(always)]
pub fn name(pid_tgid: u64, comm: &[u8; COMM_LEN]) {
    let Some(mut entry) = reserve::<NameEvent>(DROPPED_NAME) else {
        return;
    };
    entry.write(NameEvent {
        pid_tgid,
        comm: *comm,
    });
    submit(entry);
}

pub fn count_drop(slot: u32) {
    count_drops(slot, 1);
}

fn count_drops(slot: u32, calls: u64) {
    if let Some(n) = DROPPED.get_ptr_mut(slot) {
        // SAFETY: per-CPU slot; programs do not migrate while running.
        unsafe { *n += calls };
    }
}

pub fn process(kind: u32, tgid: u32, parent_tgid: u32) {
    let ev = ProcEvent {
        // SAFETY: helper without arguments.
        ts_ns: unsafe { bpf_ktime_get_ns() },
        kind,
        tgid,
        parent_tgid,
        _pad: 0,
    };
    // Process records are rare and drive the tree: wake the reader for them.
    if PROC_EVENTS.output::<ProcEvent>(&ev, 0).is_err() {
        count_drop(DROPPED_PROC);
    }
}
