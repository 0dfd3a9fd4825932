//! Python as an independent judge of a trace (pyarrow, DuckDB): a snippet
//! runs only where python3 has the packages it needs.

use std::process::Command;

use crate::skip::cannot_run;

/// Runs a Python snippet and returns what it printed; `None` when python3
/// or one of `needs` is not installed here, after [`cannot_run`] (a
/// failure under CI, which must have them; a `skipped:` line elsewhere), so
/// the caller returns. A snippet that fails fails the test.
pub fn require_python(script: &str, needs: &[&str]) -> Option<String> {
    let probe = format!("import {}", needs.join(", "));
    let ok = Command::new("python3")
        .args(["-c", &probe])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        cannot_run(format!(
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
