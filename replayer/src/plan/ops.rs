//! The trace's rows as the calls the replay makes: each row becomes a
//! compact [`PlannedOp`] tagged with its phase, the one place this is done,
//! for the stream to the ranks ([`crate::plan::stream`]) and for the
//! scaling model's count of what they will do ([`crate::plan::scale`]).

use std::path::Path;

use iorepro_format::columns::PerPath;
use iorepro_format::{Events, Op, Run};

use crate::error::ReplayResult;
use crate::plan::survey::{open_reader, rank_or_zero, Survey};

/// One operation to replay, as small as a row can be made.
#[derive(Debug, Clone, Copy)]
pub struct PlannedOp {
    pub ts: i64,
    pub dur: i64,
    /// File offset of a data op, or -1 to use the descriptor's position.
    pub offset: i64,
    /// Bytes to move (data ops) or the new length (truncate).
    pub bytes: i64,
    pub pid: i32,
    /// Trace descriptor (for open: the one it returned), -1 when absent.
    pub fd: i32,
    pub path: u32,
    /// The second path of a rename, link or symlink
    /// ([`crate::plan::survey::NO_PATH`] if none).
    pub path2: u32,
    pub flags: Option<i32>,
    pub op: Op,
    pub phase: u16,
    /// The traced call failed: the replay makes it again, expecting it to fail.
    pub failed: bool,
    /// How the traced call was made, where the replay makes it differently.
    pub via: Via,
    /// Traced time its source rank spent, since this call's rank last made
    /// a dataset visit's call, on visits dealt to the other ranks sharing
    /// its reads: their I/O, not this rank's compute (see
    /// [`crate::plan::timing::Schedule::start`]). 0 for other calls.
    pub elsewhere_ns: i64,
}

/// How a traced call was made, where that changes how the replay makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Via {
    /// A syscall (or a call the replay makes as one).
    #[default]
    Syscall,
    /// An io_uring request: made through io_uring with `--engine auto`.
    IoUring,
    /// One of the file calls an object-storage request stands for (see
    /// [`crate::plan::requests_as_calls`]): a bucket target makes the request itself.
    Request,
    /// One of the calls a multipart upload stands for: a bucket target
    /// sends its parts as traced.
    Multipart,
    /// A half of a copy the kernel made, a read of its source or a write of
    /// its destination: a directory target makes the two halves as the one
    /// call they were where it can (see `crate::execute`'s copies).
    Sendfile,
    CopyFileRange,
    /// A splice: one end was a pipe, so it is one half alone.
    Splice,
}

impl Via {
    /// From a row's `via`.
    pub fn of(name: Option<&str>) -> Via {
        match name {
            Some(iorepro_format::schema::VIA_IO_URING) => Via::IoUring,
            Some(crate::plan::requests_as_calls::VIA_REQUEST) => Via::Request,
            Some(crate::plan::requests_as_calls::VIA_MULTIPART) => Via::Multipart,
            Some(iorepro_format::schema::VIA_SENDFILE) => Via::Sendfile,
            Some(iorepro_format::schema::VIA_COPY_FILE_RANGE) => Via::CopyFileRange,
            Some(iorepro_format::schema::VIA_SPLICE) => Via::Splice,
            _ => Via::Syscall,
        }
    }

    /// A half of a copy the kernel made.
    pub fn copies(self) -> bool {
        matches!(self, Via::Sendfile | Via::CopyFileRange | Via::Splice)
    }

    /// A call an object-storage request stands for.
    pub fn from_request(self) -> bool {
        matches!(self, Via::Request | Via::Multipart)
    }
}

/// Whether the replay makes a traced call: calls that move data, sync,
/// open or close, and the metadata calls (lseek and mmap do neither; an op
/// this version does not know cannot be made). A call that failed is made
/// too when it named a path, since a probe for a missing file, a mkdir of
/// one that exists or a rmdir of a full directory is load all the same; a
/// failed call on a descriptor is not.
pub fn replayed(op: Op, failed: bool, named: bool) -> bool {
    match op {
        _ if op.always_names_path() => true,
        Op::Stat => named || !failed,
        Op::Lseek | Op::Mmap | Op::Other | Op::Request | Op::Writeback => false,
        // The other calls on a descriptor (`Op::acts_on_descriptor`).
        _ => !failed,
    }
}

/// Every op the replay makes of the trace, in `ts` order, with the source
/// rank whose row it came from: the one place rows become [`PlannedOp`]s,
/// for the replay and for the scaling model's count of what it will do.
pub fn for_each_op(
    trace: &Path,
    survey: &Survey,
    phase_selected: &[bool],
    mut f: impl FnMut(i32, PlannedOp),
) -> ReplayResult<()> {
    let reader = open_reader(trace)?;
    let mut phase = 0usize;
    let phases = &survey.phases;
    let mut ids = PerPath::default();
    for ev in crate::plan::requests_as_calls::replay_events(&reader)? {
        let ev = ev?;
        let ops = ev.ops();
        let (ts, ret, pid) = (ev.ts(), ev.ret(), ev.pid());
        for (row, &op) in ops.iter().enumerate() {
            let t = ts.value(row);
            while phase + 1 < phases.len() && phases[phase + 1].start_unix_ns <= t {
                phase += 1;
            }
            let r = ret.value(row);
            let fd = Events::opt_i32(ev.fd(), row);
            if !replayed(op, r < 0, fd.is_none()) || !phase_selected[phase] {
                continue;
            }
            let source = rank_or_zero(&ev, row);
            // Rows on paths the replay leaves out (crate::plan::scope) are not sent.
            let path = ev.path_at(row).zip(ids.get(&ev, row, |p| survey.known(p)));
            let Some((path, path2)) =
                crate::plan::survey::row_paths(survey, op, fd, path, ev.path2_at(row))
            else {
                continue;
            };
            let via = Via::of(ev.via_at(row));
            // A row that stands for a run of calls is replayed call by call.
            for call in Run::of(&ev, row).calls() {
                let (bytes, fd) = match op {
                    _ if op.moves_data() => (call.ret, fd),
                    Op::Truncate => (call.size.or(call.offset).unwrap_or(0), fd),
                    // A getdents asks for a buffer of `size` bytes.
                    Op::Getdents => (call.size.unwrap_or(0), fd),
                    Op::Open if r >= 0 => (0, Some(call.ret as i32)),
                    _ => (0, fd),
                };
                if op.moves_data() && bytes == 0 {
                    continue;
                }
                f(
                    source,
                    PlannedOp {
                        ts: call.ts_ns,
                        dur: call.dur_ns.max(0),
                        offset: if matches!(op, Op::Truncate) {
                            -1
                        } else {
                            call.offset.unwrap_or(-1)
                        },
                        bytes,
                        pid: pid.value(row),
                        fd: fd.unwrap_or(-1),
                        path,
                        path2,
                        flags: Events::opt_i32(ev.flags(), row),
                        op,
                        phase: phase as u16,
                        failed: r < 0,
                        via,
                        elsewhere_ns: 0,
                    },
                );
            }
        }
    }
    Ok(())
}
