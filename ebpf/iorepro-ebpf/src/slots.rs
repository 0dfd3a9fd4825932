//! Per-thread state between a syscall's entry and its exit, and the files a
//! thread recently used.
//!
//! A thread's state lives in a slot of an array: the verifier inlines array
//! lookups, where a hash-map lookup or update costs 30 to 150 ns, and this is
//! done twice for every syscall of interest. A thread may use one of two
//! slots, `tid & SLOT_MASK` or a hash of its tid; the loader sizes the array
//! to cover `pid_max` (up to [`MAX_SLOTS`] entries), so below that the first
//! is always the thread's own. Beyond it, a thread takes whichever of its two
//! slots has no syscall in flight, sending the run of a previous owner first;
//! only when both are in flight at once is its call lost, and counted. A
//! thread's name is sent when it takes a slot, so user space always knows the
//! name of a thread before it sees that thread's I/O. (One map for all slots
//! also keeps the verifier's work small: states with pointers into two
//! different maps could not be merged.)
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
use aya_ebpf::macros::map;
use aya_ebpf::maps::Array;
use core::intrinsics::{atomic_xadd, AtomicOrdering};
use iorepro_common::{CachedFile, NameEvent, CACHED_FILES, COMM_LEN, DROPPED_NAME, MAX_SLOTS};
pub use iorepro_common::{Slot, IDLE};

use crate::kernel::{slot_mask, Identity, Traced, GEN_STEP, SHARED_FILES, TRACED};
use crate::records;

/// Per-thread state (the loader sets the size).
#[map]
static SLOTS: Array<Slot> = Array::with_max_entries(MAX_SLOTS, 0);

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

/// The two slots a thread may use.
#[inline(always)]
fn slot_indexes(tid: u32) -> (u32, u32) {
    iorepro_common::slot_indexes(tid, slot_mask())
}

#[inline(always)]
fn slot_at(index: u32) -> Option<*mut Slot> {
    SLOTS.get_ptr_mut(index)
}

/// The calling thread's slot, taken (and the thread named) on first use.
/// `None` when both of its slots are held by threads with a call in flight:
/// the caller counts the call as lost.
#[inline(always)]
pub fn claim(pid_tgid: u64) -> Option<*mut Slot> {
    let tid = pid_tgid as u32;
    let (first, second) = slot_indexes(tid);
    let a = slot_at(first)?;
    let b = slot_at(second)?;
    // SAFETY: array values are valid memory; a slot is written only by its
    // owner, and taken over only while no syscall is in flight in it.
    let (sa, sb) = unsafe { (&mut *a, &mut *b) };
    if sa.tid == tid {
        return Some(a);
    }
    if sb.tid == tid {
        return Some(b);
    }
    let (slot, s) = if sa.tid == 0 || sa.nr == IDLE {
        (a, sa)
    } else if sb.tid == 0 || sb.nr == IDLE {
        (b, sb)
    } else {
        return None;
    };
    crate::runs::flush(&mut s.run);
    s.tid = tid;
    s.nr = IDLE;
    forget_files(s);
    send_name(pid_tgid);
    Some(slot)
}

/// The calling thread's slot if it holds one, in flight or not.
#[inline(always)]
pub fn owned(pid_tgid: u64) -> Option<*mut Slot> {
    let tid = pid_tgid as u32;
    let (first, second) = slot_indexes(tid);
    let a = slot_at(first)?;
    // SAFETY: see `claim`.
    if unsafe { (*a).tid } == tid {
        return Some(a);
    }
    let b = slot_at(second)?;
    // SAFETY: see `claim`.
    (unsafe { (*b).tid } == tid).then_some(b)
}

/// The calling thread's slot if it has a syscall in flight.
#[inline(always)]
pub fn in_flight(pid_tgid: u64) -> Option<*mut Slot> {
    let slot = owned(pid_tgid)?;
    // SAFETY: see `claim`.
    (unsafe { (*slot).nr } != IDLE).then_some(slot)
}

/// A thread has exited: its open run is sent and its slot is free for the
/// next one.
#[inline(always)]
pub fn release(pid_tgid: u64) {
    if let Some(slot) = owned(pid_tgid) {
        // SAFETY: see `claim`; the exiting thread is the owner.
        let s = unsafe { &mut *slot };
        crate::runs::flush(&mut s.run);
        s.tid = 0;
        s.nr = IDLE;
    }
}

fn forget_files(s: &mut Slot) {
    for c in s.cache.iter_mut() {
        c.file = 0;
    }
}

/// The file at descriptor `fd`, its identity and its flags, if a
/// trustworthy entry has them; `traced` is the process's `TRACED` value read
/// before anything else in this syscall.
#[inline(always)]
pub fn cached(s: &Slot, fd: u64, traced: Traced) -> Option<(u64, Identity, u32)> {
    let c = &s.cache[fd as usize % CACHED_FILES];
    let hit = c.file != 0 && c.fd as u64 == fd && c.gen == traced && traced & SHARED_FILES == 0;
    hit.then_some((
        c.file,
        Identity {
            ino: c.ino,
            dev: c.dev,
            mode: c.mode,
        },
        c.flags,
    ))
}

#[inline(always)]
pub fn remember(s: &mut Slot, fd: u64, file: u64, id: &Identity, flags: u32, traced: Traced) {
    s.cache[fd as usize % CACHED_FILES] = CachedFile {
        fd: fd as u32,
        mode: id.mode,
        file,
        gen: traced,
        ino: id.ino,
        dev: id.dev,
        flags,
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
