//! What iorepro asks of the machine it runs on, asked in one place.

/// Whether this process runs with an effective user id of 0. Capturing,
/// dropping caches and a test's chroot need it; every part of iorepro that
/// decides on privilege asks here, so they agree on what "root" means (the
/// effective id, as the kernel checks it, not the real one under sudo or a
/// setuid binary).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
