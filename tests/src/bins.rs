//! The workspace and the binaries the tests drive.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// The workspace root (the parent of this package).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives inside the workspace")
        .to_path_buf()
}

/// A built binary of the workspace; panics with the command that builds it
/// when it is missing, because a test without it would prove nothing.
pub fn bin(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let p = target.join("debug").join(name);
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build --workspace --bins` first",
        p.display()
    );
    p
}

/// Where `cargo xtask dist` leaves the static binaries (xtask/src/dist.rs:
/// `target/dist/` + its `STATIC_DIR`); `cargo xtask test` builds them.
pub fn static_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
        .join("dist")
        .join("iorepro-x86_64-linux-static")
}

/// A driver of `tests/jobs` (`script`) that runs a job, captures it and
/// replays its trace, told where the collector and the replayer are.
pub fn job_driver(script: &str) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg(workspace_root().join("tests/jobs").join(script))
        .arg("--collect")
        .arg(bin("iorepro-collect"))
        .arg("--replay")
        .arg(bin("iorepro-replay"));
    cmd
}

/// Runs a command to completion; panics with its output when it fails.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs a command that prints JSON on stdout and parses it.
pub fn run_json(cmd: &mut Command) -> serde_json::Value {
    let out = run_ok(cmd);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{cmd:?} printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// A clean scratch directory for one test under the system temp dir:
/// `iorepro-tests/NAME.PID`, this test process's own, so two runs of a test
/// on one machine (two checkouts, two users) never share or clear each
/// other's. Removed when the test process exits with no test failed, since
/// a whole run leaves gigabytes of datasets and traces that fill the disk of
/// the next run; kept after a failure, so it can be inspected, and cleared by
/// the next run of the test, with those of other runs whose process is gone.
pub fn scratch(name: &str) -> PathBuf {
    let base = std::env::temp_dir().join("iorepro-tests");
    clear_finished(&base, name);
    let d = base.join(format!("{name}.{}", std::process::id()));
    if d.exists() {
        std::fs::remove_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    }
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    remove_at_exit_unless_failed(&d);
    d
}

/// The scratch directories this process made, for [`remove_scratch_at_exit`].
static MADE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Set by the panic hook: a test failed (or cannot run), so its files stay.
static A_TEST_FAILED: AtomicBool = AtomicBool::new(false);
/// The test process's id: a forked child that exits does not remove them.
static OWNER: AtomicU32 = AtomicU32::new(0);

/// Records `dir` for removal at exit. The first call chains a panic hook
/// (a failed assertion anywhere marks the run failed) and registers the
/// exit handler; libtest reaches `exit` after the last test, failed or not.
fn remove_at_exit_unless_failed(dir: &Path) {
    static SETUP: Once = Once::new();
    SETUP.call_once(|| {
        OWNER.store(std::process::id(), Ordering::SeqCst);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            A_TEST_FAILED.store(true, Ordering::SeqCst);
            previous(info)
        }));
        // SAFETY: registers a plain `extern "C" fn` without arguments,
        // which is what atexit takes.
        unsafe { libc::atexit(remove_scratch_at_exit) };
    });
    MADE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(dir.to_path_buf());
}

extern "C" fn remove_scratch_at_exit() {
    if A_TEST_FAILED.load(Ordering::SeqCst) || std::process::id() != OWNER.load(Ordering::SeqCst) {
        return;
    }
    let made = std::mem::take(&mut *MADE.lock().unwrap_or_else(|e| e.into_inner()));
    for d in made {
        // Best effort: what a leftover mount or daemon holds stays, and the
        // next run's `clear_finished` tries again.
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Removes `base/NAME.PID` of every process that has ended: what earlier
/// runs of the test kept. A directory of a live process is another run's
/// at work, and stays. Best effort: one that cannot be removed is left.
fn clear_finished(base: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let file_name = e.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(name))
            .and_then(|n| n.strip_prefix('.'))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Polls `ready` every 100 ms until it holds (true) or `limit` passes (false).
pub fn wait_for(limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_is_this_process_own_and_clears_only_ended_runs() {
        let name = "scratch-self-check";
        let base = std::env::temp_dir().join("iorepro-tests");
        // An ended run's (no process has this id) and a live one's (init).
        let ended = base.join(format!("{name}.4000000000"));
        let live = base.join(format!("{name}.1"));
        for d in [&ended, &live] {
            std::fs::create_dir_all(d).unwrap();
        }
        let d = scratch(name);
        assert_eq!(d, base.join(format!("{name}.{}", std::process::id())));
        assert!(d.is_dir());
        assert!(!ended.exists(), "an ended run's directory is cleared");
        assert!(live.exists(), "a live run's directory stays");
        for d in [&d, &live] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }
}
