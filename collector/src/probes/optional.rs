//! The hooks a kernel may lack: io_uring requests and page-cache fills under
//! mmap. Where this kernel's tracepoints are not the ones the programs read,
//! the capture goes on without them and the reason is kept in the
//! [`Capabilities`], so a missing hook costs rows, never the capture.

use std::path::Path;

use aya::programs::{BtfTracePoint, TracePoint};
use aya::{Btf as AyaBtf, Ebpf};
use iorepro_common::globals;

use super::programs::{load_btf_programs, program, Program};
use super::{Capabilities, Missing};
use crate::btf::{uring_offsets, Btf};

/// The programs on io_uring's tracepoints (see the kernel side's `uring`):
/// one for submissions and one for completions, picked by the arguments
/// this kernel's tracepoints take.
type Programs = [Program; 2];

/// The io_uring programs for this kernel and the offsets they read, or why
/// io_uring cannot be followed.
pub(super) type Uring = Result<(Programs, Vec<(&'static str, u64)>), String>;

/// Where a tracepoint keeps the fields a program reads (the globals to set),
/// or why it cannot be followed: the page-cache fills ([`fill_offsets`]),
/// the block layer's writes ([`bio_offsets`]).
pub(super) type Fields = Result<Vec<(&'static str, u64)>, String>;

/// The page-cache fill tracepoint (`fault` rows under mmap, and what the
/// storage served of each read).
const FILL_CATEGORY: &str = "filemap";
const FILL_EVENT: &str = "mm_filemap_add_to_page_cache";
/// How [`Capabilities::hooks`] names it when attached.
pub const FILL_HOOK: &str = "tracepoint:filemap:mm_filemap_add_to_page_cache";

/// The block layer's tracepoint for a bio queued (what a call wrote to its
/// file's device).
const BIO_CATEGORY: &str = "block";
const BIO_EVENT: &str = "block_bio_queue";
pub const DEVICE_WRITE_HOOK: &str = "tracepoint:block:block_bio_queue";

/// The write-back tracepoint: pages the kernel's flusher wrote of an inode.
const WRITEBACK_CATEGORY: &str = "writeback";
const WRITEBACK_EVENT: &str = "writeback_single_inode";
pub const WRITEBACK_HOOK: &str = "tracepoint:writeback:writeback_single_inode";

/// What io_uring needs from this kernel's BTF: its programs and offsets.
pub(super) fn uring(btf: &Btf) -> Uring {
    uring_programs(btf).and_then(|programs| Ok((programs, uring_offsets(btf)?)))
}

/// Loads and attaches the io_uring programs where this kernel's tracepoints
/// and structures are the ones they read; otherwise says why not.
pub(super) fn attach_uring(ebpf: &mut Ebpf, btf: &AyaBtf, uring: Uring, caps: &mut Capabilities) {
    let uring = uring.and_then(|(programs, _)| {
        load_btf_programs(ebpf, btf, &programs)
            .map_err(|(name, _, e)| format!("the kernel refused `{name}`: {e:#}"))?;
        for (name, _, _) in programs {
            let p: &mut BtfTracePoint = program(ebpf, name).map_err(|e| e.to_string())?;
            p.attach()
                .map_err(|e| format!("attaching `{name}`: {e:#}"))?;
        }
        Ok(programs)
    });
    match uring {
        Ok(programs) => caps.hooks.extend(programs.iter().map(|(_, h, _)| *h)),
        Err(why) => caps.missing.push(Missing {
            what: "io_uring",
            effect: "io_uring requests not captured",
            why,
        }),
    }
}

/// Loads and attaches the page-cache fill program where this kernel has
/// its tracepoint with the fields it reads; otherwise says why not.
pub(super) fn attach_fill(ebpf: &mut Ebpf, fill: Fields, caps: &mut Capabilities) {
    let fill = fill.and_then(|_| attach_tracepoint(ebpf, "filemap_add", FILL_CATEGORY, FILL_EVENT));
    match fill {
        Ok(_) => caps.hooks.push(FILL_HOOK),
        Err(why) => caps.missing.push(Missing {
            what: "page_faults",
            effect: "pages read in by faults under mmap not captured (no `fault` rows), \
                     and no row says what the storage served (`storage_bytes` null)",
            why,
        }),
    }
}

/// Loads and attaches the program on the block layer's queued bios where
/// this kernel has that tracepoint with the fields it reads; otherwise says
/// why not.
pub(super) fn attach_device_writes(ebpf: &mut Ebpf, bio: Fields, caps: &mut Capabilities) {
    let bio = bio.and_then(|_| attach_tracepoint(ebpf, "bio_queue", BIO_CATEGORY, BIO_EVENT));
    match bio {
        Ok(_) => caps.hooks.push(DEVICE_WRITE_HOOK),
        Err(why) => caps.missing.push(Missing {
            what: "device_writes",
            effect: "no write, fsync or fdatasync row says what it sent to the device \
                     (`storage_bytes` null on them)",
            why,
        }),
    }
}

/// Loads and attaches the program on the flusher's write-back of an inode
/// where this kernel has that tracepoint with the fields it reads;
/// otherwise says why not.
pub(super) fn attach_writeback(ebpf: &mut Ebpf, wb: Fields, caps: &mut Capabilities) {
    let wb = wb.and_then(|_| {
        attach_tracepoint(ebpf, "writeback_inode", WRITEBACK_CATEGORY, WRITEBACK_EVENT)
    });
    match wb {
        Ok(_) => caps.hooks.push(WRITEBACK_HOOK),
        Err(why) => caps.missing.push(Missing {
            what: "writeback",
            effect: "no `writeback` rows: what the kernel wrote back of the job's files \
                     after their calls (a save without fsync) is not seen",
            why,
        }),
    }
}

/// Loads the tracepoint program `name` and attaches it to `category:event`.
fn attach_tracepoint(
    ebpf: &mut Ebpf,
    name: &str,
    category: &str,
    event: &str,
) -> Result<(), String> {
    let p: &mut TracePoint = program(ebpf, name).map_err(|e| e.to_string())?;
    p.load()
        .map_err(|e| format!("the kernel refused `{name}`: {e:#}"))?;
    p.attach(category, event)
        .map_err(|e| format!("attaching `{name}`: {e:#}"))?;
    Ok(())
}

/// The io_uring programs that read this kernel's tracepoints, or why there
/// are none: submissions from `io_uring_submit_req(req)` (6.4 and later) or
/// `io_uring_submit_sqe(req, force_nonblock)` (6.0 to 6.3; before 6.0 its
/// arguments are others), completions from `io_uring_complete(ctx, req,
/// cqe)` or, where it passes the result itself, `io_uring_complete(ctx,
/// req, user_data, res, cflags, extra1, extra2)`. (Each count below
/// includes the tracepoint's leading context argument.)
fn uring_programs(btf: &Btf) -> Result<Programs, String> {
    let submit = match (
        btf.tracepoint_params("io_uring_submit_req"),
        btf.tracepoint_params("io_uring_submit_sqe"),
    ) {
        (Some(2), _) => (
            "io_uring_submit_req",
            "tp_btf:io_uring_submit_req",
            "io_uring submissions",
        ),
        (None, Some(3)) => (
            "io_uring_submit_sqe",
            "tp_btf:io_uring_submit_sqe",
            "io_uring submissions",
        ),
        (None, None) => return Err("this kernel has no io_uring_submit_* tracepoint".into()),
        _ => {
            return Err(
                "this kernel's io_uring_submit_* tracepoint does not pass the request \
                 (kernels before 6.0)"
                    .into(),
            )
        }
    };
    let complete = match btf.tracepoint_params("io_uring_complete") {
        Some(4) => (
            "io_uring_complete",
            "tp_btf:io_uring_complete",
            "io_uring completions",
        ),
        Some(8) => (
            "io_uring_complete_res",
            "tp_btf:io_uring_complete",
            "io_uring completions",
        ),
        Some(_) => {
            return Err("this kernel's io_uring_complete tracepoint has arguments \
                 the collector does not read"
                .into())
        }
        None => return Err("this kernel has no io_uring_complete tracepoint".into()),
    };
    Ok([submit, complete])
}

/// Where the page-cache fill tracepoint keeps its fields on this kernel
/// (from its format file), or why it cannot be followed.
pub(super) fn fill_offsets() -> Fields {
    let format = TracepointFormat::read(FILL_CATEGORY, FILL_EVENT)?;
    let (field, need) = (|n| format.field(n), |n| format.need(n));
    Ok(vec![
        (globals::FILL_INO, need("i_ino")?),
        (globals::FILL_INDEX, need("index")?),
        (globals::FILL_DEV, need("s_dev")?),
        // Kernels before the folio `order` field fill single pages.
        (globals::FILL_ORDER, field("order").unwrap_or(0)),
    ])
}

/// Where the block-layer tracepoint for queued bios keeps its fields on this
/// kernel, or why it cannot be followed.
pub(super) fn bio_offsets() -> Fields {
    let format = TracepointFormat::read(BIO_CATEGORY, BIO_EVENT)?;
    Ok(vec![
        (globals::BIO_DEV, format.need("dev")?),
        (globals::BIO_SECTORS, format.need("nr_sector")?),
        (globals::BIO_RWBS, format.need("rwbs")?),
    ])
}

/// Where the write-back tracepoint keeps its fields on this kernel, or why
/// it cannot be followed (`wrote` is in pages).
pub(super) fn writeback_offsets() -> Fields {
    let format = TracepointFormat::read(WRITEBACK_CATEGORY, WRITEBACK_EVENT)?;
    Ok(vec![
        (globals::WB_NAME, format.need("name")?),
        (globals::WB_INO, format.need("ino")?),
        (globals::WB_WROTE, format.need("wrote")?),
    ])
}

/// A tracepoint's format file (`events/CATEGORY/EVENT/format` under tracefs):
/// where each field of its record is.
struct TracepointFormat {
    name: String,
    text: String,
}

impl TracepointFormat {
    fn read(category: &str, event: &str) -> Result<TracepointFormat, String> {
        let rel = format!("events/{category}/{event}/format");
        let name = format!("{category}:{event}");
        let text = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .iter()
            .find_map(|root| std::fs::read_to_string(Path::new(root).join(&rel)).ok())
            .ok_or_else(|| format!("this kernel has no tracepoint {name}"))?;
        Ok(TracepointFormat { name, text })
    }

    /// The offset of field `name` (an array field by its name alone).
    fn field(&self, name: &str) -> Option<u64> {
        self.text.lines().find_map(|l| {
            let l = l.trim().strip_prefix("field:")?;
            let (decl, rest) = l.split_once(';')?;
            let decl = decl.trim();
            let decl = decl.split_once('[').map_or(decl, |(d, _)| d);
            let ident = decl.rsplit([' ', '*']).next()?;
            if ident != name {
                return None;
            }
            let off = rest.trim().strip_prefix("offset:")?.split(';').next()?;
            off.trim().parse().ok()
        })
    }

    fn need(&self, name: &str) -> Result<u64, String> {
        self.field(name)
            .ok_or_else(|| format!("the tracepoint {} has no field `{name}` here", self.name))
    }
}
