//! Helpers shared by the trace format tests.
#![allow(dead_code)]

use std::process::Command;

/// Runs a Python snippet; `None` (with the reason printed) when python3 or
/// its packages are not installed here, so the caller can say why it skips.
pub fn python(script: &str, needs: &[&str]) -> Option<String> {
    let probe = format!("import {}", needs.join(", "));
    let ok = Command::new("python3")
        .args(["-c", &probe])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!(
            "SKIPPED: python3 with {} is not installed (`cargo xtask setup` installs it)",
            needs.join(", ")
        );
        return None;
    }
    let out = Command::new("python3")
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

/// True when CI asked for the full suite: a missing partner is then a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

pub fn require_python(script: &str, needs: &[&str]) -> Option<String> {
    let r = python(script, needs);
    if r.is_none() && in_ci() {
        panic!("CI must have python3 with {needs:?}; run `cargo xtask setup`");
    }
    r
}
