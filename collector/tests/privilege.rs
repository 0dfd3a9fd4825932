//! Privilege: the collector refuses to start without the capabilities it
//! needs and names the missing ones; under sudo the job runs as the user who
//! asked (SUDO_USER), or as `--user`; trace files are 0640 whatever the umask.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use common::*;
use iorepro_format::Op;

const NOBODY: u32 = 65534;

/// `setpriv ARGS iorepro-collect --out OUT -- true`: the collector started
/// with some privilege taken away.
fn collect_with_setpriv(setpriv: &[&str], out: &Path, extra: &[&str]) -> std::process::Output {
    Command::new("setpriv")
        .args(setpriv)
        .arg(env!("CARGO_BIN_EXE_iorepro-collect"))
        .arg("--out")
        .arg(out)
        .args(extra)
        .args(["--", "true"])
        .output()
        .expect("setpriv (util-linux)")
}

fn refused(o: &std::process::Output, lacks: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains("needs root or CAP_BPF + CAP_PERFMON"), "{err}");
    assert!(err.contains(&format!("lacks {lacks}")), "{err}");
}

#[test]
fn missing_capabilities_are_named() {
    if !can_trace() || !have("setpriv") {
        return;
    }
    let dir = scratch();
    let out = dir.path().join("trace");
    // Root without the capabilities (taken out of the bounding set).
    let o = collect_with_setpriv(
        &["--inh-caps=-all", "--bounding-set=-bpf,-perfmon,-sys_admin"],
        &out,
        &[],
    );
    refused(&o, "CAP_BPF, CAP_PERFMON");
    // An ordinary user.
    let o = collect_with_setpriv(
        &[
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
        ],
        &out,
        &[],
    );
    refused(&o, "CAP_BPF, CAP_PERFMON");
    // --user also needs to switch user.
    let o = collect_with_setpriv(
        &["--inh-caps=-all", "--bounding-set=-setuid"],
        &out,
        &["--user", "nobody"],
    );
    refused(&o, "CAP_SETUID");
    assert!(!out.exists(), "nothing is created before the check");
}

/// Runs `id -u; id -g; touch MARK` under the collector with `env` and
/// `extra` options; returns (the ids it printed, MARK's owner, whether the
/// trace holds the job's open of MARK).
fn job_identity(env: &[(&str, &str)], extra: &[&str]) -> (String, u32, bool) {
    let dir = scratch();
    // The job may be an ordinary user: it must be able to write here.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let mark = dir.path().join("mark");
    let out = dir.path().join("trace");
    let mut c = collector();
    c.arg("--out").arg(&out).args(extra).args([
        "--",
        "sh",
        "-c",
        &format!("id -u; id -g; touch {}", mark.display()),
    ]);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let owner = std::fs::metadata(&mark).unwrap().uid();
    let (_, rows) = read_rows(&out);
    let traced = rows_for(&rows, &mark).iter().any(|r| r.op == Op::Open);
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        owner,
        traced,
    )
}

#[test]
fn under_sudo_the_job_runs_as_the_user_who_asked() {
    if !can_trace() {
        return;
    }
    let (ids, owner, traced) = job_identity(&[("SUDO_USER", "nobody")], &[]);
    assert_eq!(ids, format!("{NOBODY}\n{NOBODY}\n"));
    assert_eq!(owner, NOBODY);
    assert!(traced, "the job's own I/O is traced as that user");
    // --user names someone else explicitly, and wins.
    let (ids, owner, _) = job_identity(&[("SUDO_USER", "nobody")], &["--user", "root"]);
    assert_eq!(ids, "0\n0\n");
    assert_eq!(owner, 0);
    let (ids, _, traced) = job_identity(&[], &["--user", "nobody"]);
    assert_eq!(ids, format!("{NOBODY}\n{NOBODY}\n"));
    assert!(traced);
}

#[test]
fn trace_files_are_0640_whatever_the_umask() {
    if !can_trace() {
        return;
    }
    let dir = scratch();
    let f = dir.path().join("in.dat");
    write_file(&f, 4096);
    let out = dir.path().join("trace");
    let o = Command::new("sh")
        .args(["-c", "umask 000 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_iorepro-collect"))
        .arg("--out")
        .arg(&out)
        .args(["--segment-events", "1", "--", "cat"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let files: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        files.len() >= 3,
        "a manifest and several segments: {files:?}"
    );
    for p in files {
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "{}: {mode:o}", p.display());
    }
}
