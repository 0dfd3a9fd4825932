//! Helpers shared by the trace format tests.
#![allow(dead_code)]

use std::process::Command;

/// Runs a Python snippet; `None` when python3 or its packages are not
/// installed here, after [`iorepro_tests::skip::cannot_run`] (a failure
/// under CI, which must have them; a `skipped:` line elsewhere), so the
/// caller returns.
pub fn require_python(script: &str, needs: &[&str]) -> Option<String> {
    let probe = format!("import {}", needs.join(", "));
    let ok = Command::new("python3")
        .args(["-c", &probe])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        iorepro_tests::skip::cannot_run(format!(
            "python3 with {} is not installed (`cargo xtask setup` installs it)",
            needs.join(", ")
        ));
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
