//! Per-thread state between a syscall's entry and its exit, and the files a
//! thread recently used.
//!
//! A thread's state lives in an array slot chosen by `tid & SLOT_MASK`: the
//! verifier inlines array lookups, where a hash-map lookup or update costs
//! 30 to 150 ns, and this is done twice for every syscall of interest. The
//! loader sizes the array to cover `pid_max` (up to [`MAX_SLOTS`] entries), so
//! two live threads share a slot only beyond that; then the later one keeps
//! its state in the `SPILL` hash map instead, found by its tid. Whoever takes
//! a free slot owns it until it exits (`release`), and its name is sent when
//! it first takes one, so user space always knows the name of a thread before
//! it sees that thread's I/O.
//!
//! The file cache saves the walk from a descriptor to its file and the
//! file's identity (helper calls of about 30 ns each) when a thread uses the
//! same descriptor again. An entry is trusted only while its process's
//! descriptor-table generation (kept in its `TRACED` value) has not moved.
//! What a descriptor refers to can only change after the file it held left
//! the table: by close, dup2/dup3 or close_range (each moves the generation
//! at its exit, after the descriptor is gone) or exec's close-on-exec (moved
//! at exec). The generation is read before the descriptor table, so an entry
//! made while a close races with it is born stale. Processes that share a
//! table with another process (CLONE_FILES without CLONE_THREAD) keep no
//! cache at all.
//!
//! [`MAX_SLOTS`]: iorepro_common::MAX_SLOTS

use aya_ebpf::helpers::bpf_get_current_comm;
use core::intrinsics::{atomic_xadd, AtomicOrdering};
use iorepro_common::{CachedFile, NameEvent, CACHED_FILES, COMM_LEN, DROPPED_NAME, MAX_SLOTS};
pub use iorepro_common::{Slot, IDLE};

use crate::kernel::{slot_mask, Identity, Traced, GEN_STEP, SHARED_FILES};
use crate::records;
use crate::{SLOTS, SPILL, TRACED};

/// Moves a process's descriptor-table generation: cached files are stale.
#[inline(always)]
pub fn bump_generation(tgid: u32) {
    if let Some(t) = TRACED.get_ptr_mut(tgid) {
        // The bpf target has atomic add but no compare-and-swap, so core's
        // atomic types lack `fetch_add`; the intrinsic is the BPF atomic add.
        // SAFETY: an aligned array value; concurrent bumps are atomic.
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(t, GEN_STEP) };
    }
}

#[inline(always)]
fn slot_index(tid: u32) -> u32 {
    tid & slot_mask() & (MAX_SLOTS - 1)
}

/// The calling thread's slot, taking a free one (and naming the thread) on
/// first use, or its spill entry when another live thread holds the slot.
#[inline(always)]
pub fn claim(pid_tgid: u64) -> Option<*mut Slot> {
    let tid = pid_tgid as u32;
    let slot = SLOTS.get_ptr_mut(slot_index(tid))?;
    // SAFETY: array values are valid memory; a slot is written only by its
    // owner, and taken over only while no syscall is in flight in it.
    let s = unsafe { &mut *slot };
    if s.tid == tid {
        return Some(slot);
    }
    if s.tid != 0 && s.nr != IDLE {
        return spill(pid_tgid);
    }
    s.tid = tid;
    s.nr = IDLE;
    s.run.calls = 0;
    forget_files(s);
    send_name(pid_tgid);
    Some(slot)
}

#[inline(never)]
fn spill(pid_tgid: u64) -> Option<*mut Slot> {
    let tid = pid_tgid as u32;
    if let Some(s) = SPILL.get_ptr_mut(tid) {
        return Some(s);
    }
    // SAFETY: an all-zero Slot is a valid value.
    let mut fresh: Slot = unsafe { core::mem::zeroed() };
    fresh.tid = tid;
    fresh.nr = IDLE;
    SPILL.insert(tid, fresh, 0).ok()?;
    send_name(pid_tgid);
    SPILL.get_ptr_mut(tid)
}

/// The calling thread's state if it has a syscall in flight.
#[inline(always)]
pub fn in_flight(pid_tgid: u64) -> Option<*mut Slot> {
    let tid = pid_tgid as u32;
    let slot = SLOTS.get_ptr_mut(slot_index(tid))?;
    // SAFETY: see `claim`.
    let s = unsafe { &*slot };
    if s.tid == tid {
        return (s.nr != IDLE).then_some(slot);
    }
    if !crate::kernel::is_traced(pid_tgid) {
        return None;
    }
    let spilled = SPILL.get_ptr_mut(tid)?;
    // SAFETY: the entry belongs to this thread.
    (unsafe { (*spilled).nr } != IDLE).then_some(spilled)
}

/// The calling thread's slot (or spill entry) if it has one, in flight or not.
#[inline(always)]
pub fn owned(pid_tgid: u64) -> Option<*mut Slot> {
    let tid = pid_tgid as u32;
    let slot = SLOTS.get_ptr_mut(slot_index(tid))?;
    // SAFETY: see `claim`.
    if unsafe { (*slot).tid } == tid {
        return Some(slot);
    }
    if !crate::kernel::is_traced(pid_tgid) {
        return None;
    }
    SPILL.get_ptr_mut(tid)
}

/// A thread has exited: its open run is sent and its slot is free for the
/// next one.
#[inline(always)]
pub fn release(pid_tgid: u64) {
    let tid = pid_tgid as u32;
    if let Some(slot) = SLOTS.get_ptr_mut(slot_index(tid)) {
        // SAFETY: see `claim`; the exiting thread is the owner.
        let s = unsafe { &mut *slot };
        if s.tid == tid {
            crate::runs::flush(&mut s.run);
            s.tid = 0;
            s.nr = IDLE;
            return;
        }
    }
    if let Some(spilled) = SPILL.get_ptr_mut(tid) {
        // SAFETY: the entry belongs to the exiting thread.
        crate::runs::flush(unsafe { &mut (*spilled).run });
        let _ = SPILL.remove(tid);
    }
}

fn forget_files(s: &mut Slot) {
    for c in s.cache.iter_mut() {
        c.file = 0;
    }
}

/// The file at descriptor `fd` and its identity, if a trustworthy entry
/// has them; `traced` is the process's `TRACED` value read before anything
/// else in this syscall.
#[inline(always)]
pub fn cached(s: &Slot, fd: u64, traced: Traced) -> Option<(u64, Identity)> {
    let c = &s.cache[fd as usize % CACHED_FILES];
    let hit = c.file != 0 && c.fd as u64 == fd && c.gen == traced && traced & SHARED_FILES == 0;
    hit.then_some((
        c.file,
        Identity {
            ino: c.ino,
            dev: c.dev,
            mode: c.mode,
        },
    ))
}

#[inline(always)]
pub fn remember(s: &mut Slot, fd: u64, file: u64, id: &Identity, traced: Traced) {
    s.cache[fd as usize % CACHED_FILES] = CachedFile {
        fd: fd as u32,
        mode: id.mode,
        file,
        gen: traced,
        ino: id.ino,
        dev: id.dev,
        _pad: 0,
    };
}

/// Sends the current thread's name.
#[inline(always)]
pub fn send_name(pid_tgid: u64) {
    let comm = bpf_get_current_comm().unwrap_or([0; COMM_LEN]);
    records::name(pid_tgid, &comm);
}

/// Sends a renamed thread's new name.
#[inline(always)]
pub fn send_rename(pid_tgid: u64, comm: &[u8; COMM_LEN]) {
    records::name(pid_tgid, comm);
}

const _: () = assert!(core::mem::size_of::<NameEvent>() == 24);
const _: () = assert!(CACHED_FILES.is_power_of_two());
const _: () = assert!(DROPPED_NAME < iorepro_common::DROPPED_SLOTS);
