//! What xtask needs of the host and of units: its own few lines, so that
//! xtask builds without the trace format's crates (arrow and parquet take
//! minutes to compile, and a newcomer's `cargo xtask demo` should not wait
//! for them twice).

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Bytes in a MiB and a GiB, as the tools count them.
pub const MIB_BYTES: u64 = 1 << 20;
pub const MIB: f64 = MIB_BYTES as f64;
pub const GIB: f64 = (1u64 << 30) as f64;
