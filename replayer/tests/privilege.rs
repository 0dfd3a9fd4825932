//! The replayer needs no privilege: an ordinary user replays into a target
//! it can write. The one exception, `--drop-caches`, fails at once for that
//! user with a message naming the privilege it needs, and works as root.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    let root = iorepro_format::host::is_root();
    if !root {
        iorepro_tests::skip::cannot_run("switching to an unprivileged user needs root");
    }
    root
}

fn chown_tree(dir: &Path, uid: u32) {
    std::os::unix::fs::chown(dir, Some(uid), Some(uid)).unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            chown_tree(&p, uid);
        } else {
            std::os::unix::fs::chown(&p, Some(uid), Some(uid)).unwrap();
        }
    }
}

/// `iorepro-replay TRACE --target TARGET EXTRA...` as user nobody, with no
/// supplementary groups and no capabilities.
fn replay_as_nobody(trace: &Path, target: &Path, extra: &[&str]) -> Output {
    Command::new("setpriv")
        .args([
            format!("--reuid={NOBODY}"),
            format!("--regid={NOBODY}"),
            "--clear-groups".into(),
        ])
        .arg(replay_bin())
        .arg(trace)
        .arg("--target")
        .arg(target)
        .args(extra)
        .output()
        .expect("setpriv (util-linux)")
}

/// A trace and a target owned by nobody, in a directory nobody can enter;
/// `None` (having said why) where this test cannot switch users.
fn nobodys_files() -> Option<(tempfile::TempDir, PathBuf, PathBuf)> {
    if !is_root() {
        return None;
    }
    let (tmp, trace, target) = synth_with_target(TWO_RANKS);
    std::fs::create_dir(&target).unwrap();
    chown_tree(tmp.path(), NOBODY);
    Some((tmp, trace, target))
}

#[test]
fn an_unprivileged_user_replays_into_its_own_target() {
    let Some((_tmp, trace, target)) = nobodys_files() else {
        return;
    };
    let out = replay_as_nobody(&trace, &target, &["--json"]);
    let r = json_ok(&out);
    let root_run = replay_ok(&trace, &target.with_file_name("root-target"), &["--json"]);
    assert_eq!(r["read_bytes"], root_run["read_bytes"]);
    assert_eq!(r["write_bytes"], root_run["write_bytes"]);
    assert!(r["write_bytes"].as_u64().unwrap() > 0);
    // Everything it made is the user's own.
    let made = listing(&target);
    assert!(!made.is_empty());
    for f in made {
        let uid = std::fs::metadata(target.join(&f)).unwrap().uid();
        assert_eq!(uid, NOBODY, "{f}");
    }
}

#[test]
fn drop_caches_names_the_privilege_it_needs() {
    let Some((_tmp, trace, target)) = nobodys_files() else {
        return;
    };
    let out = replay_as_nobody(&trace, &target, &["--drop-caches"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with("Error: --drop-caches needs root (CAP_SYS_ADMIN)"),
        "{err}"
    );
    assert!(
        listing(&target).is_empty(),
        "it fails before preparing anything"
    );
}

#[test]
fn drop_caches_works_as_root() {
    if !is_root() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), TWO_RANKS);
    let plain = replay_ok(&trace, &tmp.path().join("a"), &["--json"]);
    let dropped = replay_ok(&trace, &tmp.path().join("b"), &["--json", "--drop-caches"]);
    assert_eq!(dropped["read_bytes"], plain["read_bytes"]);
    assert_eq!(dropped["errors"], serde_json::json!([]));
}
