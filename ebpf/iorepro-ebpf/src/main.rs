//! iorepro's kernel-side programs: they watch the syscalls and page faults of
//! the traced process tree and hand one small record per operation to the
//! collector through a ring buffer.
//!
//! Hooks (all available without kprobes or fentry):
//! - BTF tracepoints on the raw `sys_enter` / `sys_exit`: every syscall of
//!   the host passes here, so the first test is a bitmap of the syscall
//!   numbers of interest, the second a tgid-indexed array of traced
//!   processes; only then does any work start. The entry of a call on a
//!   descriptor finds the file and drops calls on files the trace does not
//!   record (see `syscalls`); per-thread state lives in an array (`slots`).
//! - BTF tracepoints `sched_process_fork` / `exec` / `exit`: the tree is
//!   followed in the kernel, so a child is traced from its first instruction;
//!   `task_rename` keeps thread names current.
//! - tracepoint `filemap:mm_filemap_add_to_page_cache`: page-cache fills
//!   (reads from storage) caused by faults under a file mapping, or made
//!   inside a recorded call.
//! - tracepoint `block:block_bio_queue`: bytes a recorded call sent to its
//!   file's device for writing.
//! - tracepoint `writeback:writeback_single_inode`: pages of a file the job
//!   wrote that the kernel's flusher wrote back later (see `writeback`).
//!
//! The BTF tracepoints give typed pointers (the saved registers, `current`),
//! which the verifier lets the programs read with plain loads; member offsets
//! come from user space (computed from the kernel's BTF) as frozen read-only
//! globals, which the verifier treats as the constants they are.
//!
//! `empty_enter` / `empty_exit` do nothing: loaded alone, they measure what
//! the hooks themselves cost, the floor under any tracer on these hooks.
#![no_std]
#![no_main]
#![feature(core_intrinsics)]
#![allow(internal_features)]

mod kernel;
mod paths;
mod records;
mod runs;
mod slots;
mod sockets;
mod syscalls;
mod tls;
mod uring;
mod work;
mod writeback;

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel_str_bytes},
    macros::{btf_tracepoint, tracepoint},
    programs::{BtfTracePointContext, TracePointContext},
};
use iorepro_common::{kind, proc_kind, IoEvent, COMM_LEN};

use crate::kernel::{is_traced, task_ids, tgid_traced, TRACED};

#[btf_tracepoint(function = "sys_enter")]
pub fn sys_enter(ctx: BtfTracePointContext) -> u32 {
    let nr: u64 = ctx.arg(1);
    let pid_tgid = bpf_get_current_pid_tgid();
    if !syscalls::interesting(nr) {
        // The thread is about to do something else (and may wait in it):
        // its run, if it has one, is complete.
        if let Some(slot) = slots::owned(pid_tgid) {
            // SAFETY: the slot belongs to this thread.
            runs::flush(unsafe { &mut (*slot).run });
        }
        return 0;
    }
    let traced = kernel::traced(pid_tgid);
    if traced == 0 {
        return 0;
    }
    syscalls::on_enter(ctx.arg(0), nr, pid_tgid, traced);
    0
}

#[btf_tracepoint(function = "sys_exit")]
pub fn sys_exit(ctx: BtfTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(slot) = slots::in_flight(pid_tgid) else {
        return 0;
    };
    syscalls::on_exit(ctx.arg(0), ctx.arg(1), pid_tgid, slot);
    0
}

#[btf_tracepoint(function = "sys_enter")]
pub fn empty_enter(_ctx: BtfTracePointContext) -> u32 {
    0
}

#[btf_tracepoint(function = "sys_exit")]
pub fn empty_exit(_ctx: BtfTracePointContext) -> u32 {
    0
}

#[btf_tracepoint(function = "sched_process_fork")]
pub fn sched_process_fork(ctx: BtfTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced(pid_tgid) {
        return 0;
    }
    let parent: *const u8 = ctx.arg(0);
    let child: *const u8 = ctx.arg(1);
    // SAFETY: the tracepoint's arguments are the BTF-typed parent and child.
    let (child_tgid, child_pid) = unsafe { task_ids(child) };
    if child_tgid != child_pid {
        return 0; // a new thread: its tgid is already traced
    }
    // A child sharing its parent's descriptor table (CLONE_FILES without
    // CLONE_THREAD) could close a file under the other's cached pointer
    // without moving the other's generation: neither caches files then.
    // SAFETY: both are BTF-typed tasks.
    let shared = if unsafe { kernel::files_of(parent) == kernel::files_of(child) } {
        kernel::SHARED_FILES
    } else {
        0
    };
    if shared != 0 {
        if let Some(t) = TRACED.get_ptr_mut((pid_tgid >> 32) as u32) {
            // SAFETY: array values are valid memory.
            unsafe { *t |= shared };
        }
    }
    if TRACED
        .set(child_tgid, kernel::TRACED_BIT | shared, 0)
        .is_err()
    {
        // A pid beyond the array (pid_max raised after loading): the child
        // goes untraced, counted with the lost process records.
        records::count_drop(iorepro_common::DROPPED_PROC);
        return 0;
    }
    records::process(proc_kind::FORK, child_tgid, (pid_tgid >> 32) as u32);
    0
}

#[btf_tracepoint(function = "sched_process_exec")]
pub fn sched_process_exec(_ctx: BtfTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if is_traced(pid_tgid) {
        // Close-on-exec descriptors are gone: cached file pointers are stale.
        slots::bump_generation((pid_tgid >> 32) as u32);
        records::process(proc_kind::EXEC, (pid_tgid >> 32) as u32, 0);
    }
    0
}

#[btf_tracepoint(function = "sched_process_exit")]
pub fn sched_process_exit(_ctx: BtfTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced(pid_tgid) {
        return 0;
    }
    slots::release(pid_tgid);
    let tgid = (pid_tgid >> 32) as u32;
    if tgid == pid_tgid as u32 {
        records::process(proc_kind::EXIT, tgid, 0);
        if kernel::tracing_cgroup() {
            // A later process with this pid is new to the capture.
            let _ = TRACED.set(tgid, 0, 0);
        }
    }
    0
}

/// A thread was renamed (`prctl(PR_SET_NAME)`, a write to `comm`, exec).
#[btf_tracepoint(function = "task_rename")]
pub fn task_rename(ctx: BtfTracePointContext) -> u32 {
    let task: *const u8 = ctx.arg(0);
    // SAFETY: the first argument is the BTF-typed renamed task.
    let (tgid, pid) = unsafe { task_ids(task) };
    let traced = if kernel::tracing_cgroup() {
        // Whether a task is in the cgroup can only be asked of `current`.
        let current = bpf_get_current_pid_tgid();
        current as u32 == pid && kernel::is_traced(current)
    } else {
        tgid_traced(tgid) != 0
    };
    if !traced {
        // A name not sent now is read when the thread next takes a slot.
        return 0;
    }
    let new: *const u8 = ctx.arg(1);
    let mut comm = [0u8; COMM_LEN];
    // SAFETY: the second argument is the new name, a kernel string.
    if unsafe { bpf_probe_read_kernel_str_bytes(new, &mut comm) }.is_ok() {
        slots::send_rename((tgid as u64) << 32 | pid as u64, &comm);
    }
    0
}

/// An io_uring request submitted (see `uring`).
#[btf_tracepoint(function = "io_uring_submit_req")]
pub fn io_uring_submit_req(ctx: BtfTracePointContext) -> u32 {
    let req: u64 = ctx.arg(0);
    uring::submitted(req);
    0
}

/// An io_uring request submitted, on kernels before 6.4, where the
/// tracepoint was `io_uring_submit_sqe(req, force_nonblock)`.
#[btf_tracepoint(function = "io_uring_submit_sqe")]
pub fn io_uring_submit_sqe(ctx: BtfTracePointContext) -> u32 {
    let req: u64 = ctx.arg(0);
    uring::submitted(req);
    0
}

/// An io_uring request completed, on kernels whose tracepoint passes the
/// result itself: `io_uring_complete(ctx, req, user_data, res, cflags,
/// extra1, extra2)` (6.12 and before; later kernels pass the CQE).
#[btf_tracepoint(function = "io_uring_complete")]
pub fn io_uring_complete_res(ctx: BtfTracePointContext) -> u32 {
    let req: u64 = ctx.arg(1);
    let res: i64 = ctx.arg(3);
    uring::completed(req, res as i32);
    0
}

/// An io_uring request completed.
#[btf_tracepoint(function = "io_uring_complete")]
pub fn io_uring_complete(ctx: BtfTracePointContext) -> u32 {
    let req: u64 = ctx.arg(1);
    let cqe: u64 = ctx.arg(2);
    let res: i32 = unsafe {
        aya_ebpf::helpers::bpf_probe_read_kernel(
            cqe.wrapping_add(kernel::global(&kernel::OFF_CQE_RES)) as *const i32,
        )
    }
    .unwrap_or(0);
    uring::completed(req, res);
    0
}

/// A folio added to the page cache: a read from storage. Fills made inside a
/// recorded syscall are sent as `FILL` records, which user space adds to that
/// call's row; the others were caused by a fault under a mapping (including
/// the readahead it triggered) and are rows of their own.
#[tracepoint(category = "filemap", name = "mm_filemap_add_to_page_cache")]
pub fn filemap_add(ctx: TracePointContext) -> u32 {
    page_cache_fill(&ctx);
    0
}

const PAGE_SHIFT: u32 = 12;

fn page_cache_fill(ctx: &TracePointContext) {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced(pid_tgid) || kernel::io_worker() {
        return;
    }
    let what = if slots::in_flight(pid_tgid).is_some() {
        kind::FILL
    } else if slots::claim(pid_tgid).is_some() {
        // (Claimed first: the thread must be named before its first record.)
        kind::FAULT
    } else {
        return;
    };
    // Field offsets from the tracepoint's format file (set by the loader);
    // kernels before 6.x have no `order` field (single pages).
    let at = |g: &'static u64| kernel::global(g) as usize;
    let order_at = at(&kernel::OFF_FILL_ORDER);
    // SAFETY: offsets inside the tracepoint record.
    let (ino, dev, index, order) = unsafe {
        (
            ctx.read_at::<u64>(at(&kernel::OFF_FILL_INO)).unwrap_or(0),
            ctx.read_at::<u32>(at(&kernel::OFF_FILL_DEV)).unwrap_or(0),
            ctx.read_at::<u64>(at(&kernel::OFF_FILL_INDEX)).unwrap_or(0),
            if order_at == 0 {
                0
            } else {
                ctx.read_at::<u8>(order_at).unwrap_or(0) & 31
            },
        )
    };
    let bytes = 1u64 << (PAGE_SHIFT + order as u32);
    send_moment(what, pid_tgid, (index << PAGE_SHIFT) as i64, bytes, ino, dev);
}

/// Sends a record of something that happened at one moment (no call of its
/// own): `bytes` at `offset` of the file `ino` on `dev`.
#[inline(always)]
pub(crate) fn send_moment(what: u32, pid_tgid: u64, offset: i64, bytes: u64, ino: u64, dev: u32) {
    let Some(mut entry) = records::reserve::<IoEvent>(what) else {
        return;
    };
    entry.write(IoEvent {
        // SAFETY: helper without arguments.
        ts_ns: unsafe { bpf_ktime_get_ns() },
        dur_ns: 0,
        span_ns: 0,
        pid_tgid,
        ret: 0,
        offset,
        size: bytes,
        ino,
        dev,
        fd: -1,
        kind: what,
        flags: 0,
        calls: 1,
        via: iorepro_common::VIA_SYSCALL,
    });
    records::submit(entry);
}

/// A bio queued for a block device: where a recorded call of a traced
/// thread queued it to write, its bytes reached the storage in that call.
#[tracepoint(category = "block", name = "block_bio_queue")]
pub fn bio_queue(ctx: TracePointContext) -> u32 {
    device_write(&ctx);
    0
}

const SECTOR_SHIFT: u32 = 9;

fn device_write(ctx: &TracePointContext) {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced(pid_tgid) {
        return;
    }
    let Some(slot) = slots::in_flight(pid_tgid) else {
        return;
    };
    let at = |g: &'static u64| kernel::global(g) as usize;
    // SAFETY: offsets inside the tracepoint record.
    let (dev, sectors, rwbs) = unsafe {
        (
            ctx.read_at::<u32>(at(&kernel::OFF_BIO_DEV)).unwrap_or(0),
            ctx.read_at::<u32>(at(&kernel::OFF_BIO_SECTORS)).unwrap_or(0),
            ctx.read_at::<[u8; 2]>(at(&kernel::OFF_BIO_RWBS))
                .unwrap_or([0; 2]),
        )
    };
    // A write, or a write behind a cache flush ("FW..."); nothing else.
    let write = rwbs[0] == b'W' || (rwbs[0] == b'F' && rwbs[1] == b'W');
    if !write || sectors == 0 {
        return;
    }
    // SAFETY: the slot belongs to this thread.
    let (file_dev, ino) = unsafe { ((*slot).dev, (*slot).ino) };
    // A stacked device (dm, md) queues each bio again on the devices below
    // it: counted on the file system's own device only, unless that is no
    // block device (major 0: btrfs, overlay), where every write counts.
    if file_dev >> 20 != 0 && dev != file_dev {
        return;
    }
    let bytes = (sectors as u64) << SECTOR_SHIFT;
    send_moment(kind::DEVICE_WRITE, pid_tgid, -1, bytes, ino, dev);
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
