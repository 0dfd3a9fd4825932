//! The per-CPU work areas of the global functions.
//!
//! A global function is verified once, on its own, rather than at every
//! place it is called, which keeps the programs quick to verify. Kernels
//! before 5.12 let a global function take scalars only, no pointers, and
//! until 6.13 a call chain shares one 512-byte stack: so the global
//! functions take their larger arguments, give their results and read
//! windows of kernel structures here, in map memory, named by the area's
//! index. The syscall programs use one area and io_uring's another: an
//! io_uring completion may run in an interrupt on a CPU whose syscall
//! program it interrupted. Nothing else on a CPU runs while a program uses
//! its area (programs do not migrate, and each area has one kind of user).

use aya_ebpf::macros::map;
use aya_ebpf::maps::PerCpuArray;
use iorepro_common::{IoEvent, Scratch};

/// Where the global functions take their arguments, give their results and
/// read windows of kernel structures: one area for the syscall programs,
/// one for io_uring's, whose completions may interrupt them.
#[map]
static WORK: PerCpuArray<Work> = PerCpuArray::with_max_entries(AREAS, 0);

/// The area of the syscall and process-tree programs.
pub const SYSCALLS: u64 = 0;
/// The area of the io_uring programs.
pub const URING: u64 = 1;
pub const AREAS: u32 = 2;

#[repr(C)]
pub struct Work {
    /// Windows of kernel structures, or a batch of iovecs.
    pub scratch: Scratch,
    /// `look_up_file`'s result.
    pub looked: Looked,
    /// `dir_identity`'s device.
    pub dir_dev: u64,
    /// `path_record`'s arguments.
    pub path: PathArgs,
    /// `read_name`'s result.
    pub read: ReadOut,
}

/// The work area `which` of this CPU.
#[inline(always)]
pub fn area(which: u64) -> Option<*mut Work> {
    WORK.get_ptr_mut(which as u32 & (AREAS - 1))
}

/// `kernel::look_up_file`'s result: a file's identity (and whether it is one).
#[repr(C)]
pub struct Looked {
    pub ino: u64,
    pub dev: u32,
    pub mode: u32,
}

/// The arguments of `paths::path_record`, left in the caller's work area.
#[repr(C)]
pub struct PathArgs {
    pub io: IoEvent,
    /// (dirfd or VERBATIM, user pointer; 0 for none).
    pub first: (i64, u64),
    pub second: (i64, u64),
    pub mode: u64,
    /// Bit 0: `first` is a kernel string; bit 1: `second` is.
    pub kernel: u64,
}

/// What `paths::read_name` leaves in the work area.
#[repr(C)]
pub struct ReadOut {
    pub len: u64,
    pub flags: u64,
    pub dir_ino: u64,
    pub dir_dev: u32,
    pub _pad: u32,
}
