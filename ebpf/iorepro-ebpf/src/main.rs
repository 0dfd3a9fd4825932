//! iorepro's kernel-side programs: they watch the syscalls and page faults of
//! the traced process tree and hand one small record per operation to the
//! collector through a ring buffer.
//!
//! Hooks (all available without kprobes or fentry):
//! - raw tracepoints `sys_enter` / `sys_exit`: one program each for every
//!   syscall of interest. Entry only stamps the time (and, for `close`, notes
//!   the file before it goes away); the exit reads the arguments back from the
//!   saved user registers, so nothing but a timestamp is kept per thread.
//! - BTF tracepoints `sched_process_fork` / `exec` / `exit`: the tree is
//!   followed in the kernel, so a child is traced from its first instruction.
//! - tracepoint `filemap:mm_filemap_add_to_page_cache`: page-cache fills
//!   (reads from storage) caused by faults under a file mapping.
//!
//! Each data op carries the file's (dev, inode) and, for plain `read`/`write`,
//! the exact offset, read from the open file at syscall exit
//! (`task->files->fdt->fd[fd]->f_pos - ret`). Structure member offsets come
//! from user space (computed from the kernel's BTF) as read-only globals,
//! because this program is not relocated (no CO-RE).
#![no_std]
#![no_main]

mod kernel;
mod syscalls;

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{btf_tracepoint, map, raw_tracepoint, tracepoint},
    maps::{HashMap, PerCpuArray, RingBuf},
    programs::{BtfTracePointContext, RawTracePointContext, TracePointContext},
};
use iorepro_common::{kind, proc_kind, IoEvent, ProcEvent, DROPPED_PROC, DROPPED_SLOTS};

use crate::kernel::{current_comm, is_traced, task_ids};

/// Tgids of the traced processes (when not tracing a cgroup).
#[map]
static TRACED: HashMap<u32, u8> = HashMap::with_max_entries(65536, 0);

/// Per-thread state between syscall entry and exit.
#[map]
static INFLIGHT: HashMap<u32, Inflight> = HashMap::with_max_entries(65536, 0);

/// I/O records; user space polls it, so submissions never wake it up.
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(16 << 20, 0);

/// Process-tree records, apart so an I/O flood cannot starve them.
#[map]
static PROC_EVENTS: RingBuf = RingBuf::with_byte_size(256 << 10, 0);

/// Records that found the ring buffer full, per CPU, by record kind.
#[map]
static DROPPED: PerCpuArray<u64> = PerCpuArray::with_max_entries(DROPPED_SLOTS, 0);

/// `nr` once the exit has been handled: a stale entry is never reused.
const CONSUMED: u32 = u32::MAX;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Inflight {
    ts: u64,
    ino: u64,
    nr: u32,
    dev: u32,
}

/// `BPF_RB_NO_WAKEUP`: the collector polls on a short interval instead.
const NO_WAKEUP: u64 = 1;

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn sys_enter(ctx: RawTracePointContext) -> u32 {
    let nr: u64 = ctx.arg(1);
    if !syscalls::interesting(nr) {
        return 0;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced(pid_tgid) {
        return 0;
    }
    let mut state = Inflight {
        ts: unsafe { bpf_ktime_get_ns() },
        ino: 0,
        nr: nr as u32,
        dev: 0,
    };
    if nr == syscalls::CLOSE {
        let regs: *const u8 = ctx.arg(0);
        match syscalls::close_target(regs) {
            Some((ino, dev)) => {
                state.ino = ino;
                state.dev = dev;
            }
            None => return 0,
        }
    }
    let _ = INFLIGHT.insert(pid_tgid as u32, state, 0);
    0
}

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn sys_exit(ctx: RawTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(state) = INFLIGHT.get_ptr_mut(pid_tgid as u32) else {
        return 0;
    };
    // SAFETY: the entry belongs to this thread; only this thread writes it.
    let (nr, ts, ino, dev) = unsafe {
        let s = &mut *state;
        if s.nr == CONSUMED {
            return 0;
        }
        let taken = (s.nr, s.ts, s.ino, s.dev);
        s.nr = CONSUMED;
        taken
    };
    let regs: *const u8 = ctx.arg(0);
    let ret: i64 = ctx.arg(1);
    let io = IoEvent {
        ts_ns: ts,
        dur_ns: unsafe { bpf_ktime_get_ns() }.wrapping_sub(ts),
        pid_tgid,
        ret,
        offset: -1,
        size: 0,
        ino,
        dev,
        fd: -1,
        kind: 0,
        flags: 0,
        comm: current_comm(),
    };
    syscalls::on_exit(regs, nr as u64, io);
    0
}

/// Reserves room for `T` in the I/O ring buffer, counting a failure as a drop.
pub fn reserve_io<T: 'static>(kind: u32) -> Option<aya_ebpf::maps::ring_buf::RingBufEntry<T>> {
    let entry = EVENTS.reserve::<T>(0);
    if entry.is_none() {
        count_drop(kind);
    }
    entry
}

pub fn submit_io<T: 'static>(entry: aya_ebpf::maps::ring_buf::RingBufEntry<T>) {
    entry.submit(NO_WAKEUP);
}

/// Sends a fixed-size record, counting a full buffer as a drop.
pub fn output_io(event: &IoEvent) {
    if EVENTS.output::<IoEvent>(event, NO_WAKEUP).is_err() {
        count_drop(event.kind);
    }
}

fn count_drop(slot: u32) {
    if let Some(n) = DROPPED.get_ptr_mut(slot) {
        // SAFETY: per-CPU slot; programs do not migrate while running.
        unsafe { *n += 1 };
    }
}

fn output_proc(kind: u32, tgid: u32, parent_tgid: u32) {
    let ev = ProcEvent {
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

#[btf_tracepoint(function = "sched_process_fork")]
pub fn sched_process_fork(ctx: BtfTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced(pid_tgid) {
        return 0;
    }
    let child: *const u8 = ctx.arg(1);
    let Some((child_tgid, child_pid)) = task_ids(child) else {
        return 0;
    };
    if child_tgid != child_pid {
        return 0; // a new thread: its tgid is already traced
    }
    if !kernel::tracing_cgroup() {
        let _ = TRACED.insert(child_tgid, 1u8, 0);
    }
    output_proc(proc_kind::FORK, child_tgid, (pid_tgid >> 32) as u32);
    0
}

#[btf_tracepoint(function = "sched_process_exec")]
pub fn sched_process_exec(_ctx: BtfTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if is_traced(pid_tgid) {
        output_proc(proc_kind::EXEC, (pid_tgid >> 32) as u32, 0);
    }
    0
}

#[btf_tracepoint(function = "sched_process_exit")]
pub fn sched_process_exit(_ctx: BtfTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced(pid_tgid) {
        return 0;
    }
    let _ = INFLIGHT.remove(pid_tgid as u32);
    let tgid = (pid_tgid >> 32) as u32;
    if tgid == pid_tgid as u32 {
        output_proc(proc_kind::EXIT, tgid, 0);
    }
    0
}

/// A folio added to the page cache: a read from storage. Fills made inside a
/// recorded syscall belong to that call's row; the others were caused by a
/// fault under a mapping (including the readahead it triggered).
#[tracepoint(category = "filemap", name = "mm_filemap_add_to_page_cache")]
pub fn filemap_add(ctx: TracePointContext) -> u32 {
    page_cache_fill(&ctx);
    0
}

const PAGE_SHIFT: u32 = 12;

/// Field offsets of `mm_filemap_add_to_page_cache` (see its format file).
const TP_INO: usize = 16;
const TP_INDEX: usize = 24;
const TP_DEV: usize = 32;
const TP_ORDER: usize = 36;

fn page_cache_fill(ctx: &TracePointContext) {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced(pid_tgid) {
        return;
    }
    if let Some(state) = INFLIGHT.get_ptr(pid_tgid as u32) {
        // SAFETY: the entry belongs to this thread.
        if unsafe { (*state).nr } != CONSUMED {
            return;
        }
    }
    // SAFETY: offsets inside the tracepoint record.
    let (ino, dev, index, order) = unsafe {
        (
            ctx.read_at::<u64>(TP_INO).unwrap_or(0),
            ctx.read_at::<u32>(TP_DEV).unwrap_or(0),
            ctx.read_at::<u64>(TP_INDEX).unwrap_or(0),
            ctx.read_at::<u8>(TP_ORDER).unwrap_or(0) & 31,
        )
    };
    let ev = IoEvent {
        ts_ns: unsafe { bpf_ktime_get_ns() },
        dur_ns: 0,
        pid_tgid,
        ret: 0,
        offset: (index << PAGE_SHIFT) as i64,
        size: 1u64 << (PAGE_SHIFT + order as u32),
        ino,
        dev,
        fd: -1,
        kind: kind::FAULT,
        flags: 0,
        comm: current_comm(),
    };
    output_io(&ev);
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
