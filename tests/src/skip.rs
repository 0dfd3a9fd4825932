//! What a test does when this machine cannot do what it tests.
//!
//! CI runs every test as root on a machine that `cargo xtask setup` has
//! equipped, so there a test that cannot run has found a broken set-up and
//! fails. Elsewhere (a developer without root, a kernel without BTF) it says
//! why on stderr and returns, so the missing piece is named, not hidden.

use std::fmt::Display;

/// Whether this is a CI run (`CI=true`, as CI services set it).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Reports that the calling test cannot run here: a panic under CI, a
/// `skipped:` line elsewhere. The caller returns right after.
#[track_caller]
pub fn cannot_run(why: impl Display) {
    if under_ci() {
        panic!("this test cannot run, and under CI=true that is a failure: {why}");
    }
    eprintln!("skipped: {why}");
}
