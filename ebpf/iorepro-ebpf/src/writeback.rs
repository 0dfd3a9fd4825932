//! Write-back: the pages of a file the traced job wrote that the kernel's
//! flusher later writes to the device, outside any call of the job's (a
//! save without `fsync`, written back seconds later or by a `sync`).
//!
//! The flusher is no traced task, so the file is recognised by its inode:
//! user space puts each file the job writes into `WRITTEN` (its inode
//! number, the writer, the name of its device's write-back queue), and a
//! write-back of a listed inode on that queue is sent as a `WRITEBACK`
//! record. Nothing runs on the job's own calls for it.

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::map, macros::tracepoint, maps::LruHashMap,
    programs::TracePointContext,
};
use iorepro_common::{kind, Written, BDI_NAME};

use crate::kernel::{self, is_traced};

/// The files the job wrote, by inode number (filled by user space).
#[map]
static WRITTEN: LruHashMap<u64, Written> = LruHashMap::with_max_entries(16384, 0);

/// The pages of one inode the flusher wrote in one pass.
#[tracepoint(category = "writeback", name = "writeback_single_inode")]
pub fn writeback_inode(ctx: TracePointContext) -> u32 {
    written_back(&ctx);
    0
}

const PAGE_SHIFT: u32 = 12;

fn written_back(ctx: &TracePointContext) {
    // A traced thread's own sync sends its bios in its call (`bio_queue`).
    if is_traced(bpf_get_current_pid_tgid()) {
        return;
    }
    let at = |g: &'static u64| kernel::global(g) as usize;
    // SAFETY: offsets inside the tracepoint record.
    let (ino, pages) = unsafe {
        (
            ctx.read_at::<u64>(at(&kernel::OFF_WB_INO)).unwrap_or(0),
            ctx.read_at::<u64>(at(&kernel::OFF_WB_WROTE)).unwrap_or(0),
        )
    };
    if pages == 0 || pages > 1 << 40 {
        return;
    }
    // SAFETY: a copy of the value is taken at once.
    let Some(file) = (unsafe { WRITTEN.get(&ino) }).copied() else {
        return;
    };
    if file.bdi != [0; BDI_NAME] {
        // SAFETY: an offset inside the tracepoint record.
        let bdi = unsafe { ctx.read_at::<[u8; BDI_NAME]>(at(&kernel::OFF_WB_NAME)) };
        if bdi.map_or(true, |b| b != file.bdi) {
            return;
        }
    }
    crate::send_moment(
        kind::WRITEBACK,
        file.pid_tgid,
        -1,
        pages << PAGE_SHIFT,
        ino,
        file.dev,
    );
}
