//! Nothing outside --target is created, written, followed or removed: hostile
//! paths in the trace are confined, and symlinks planted in the target that
//! lead out are refused with an error naming the path.

mod common;

use std::os::unix::fs::symlink;

use common::*;
use iorepro_format::Op;

#[test]
fn hostile_paths_stay_under_the_target() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let escape_read = format!("/../../../..{}/victim.bin", outside.display());
    let escape_write = format!("/data/../../..{}/evil.txt", outside.display());
    let trace = write_rows(
        tmp.path(),
        &[
            (0, Op::Open, &escape_read, 5, None, 0, Some(libc::O_RDONLY)),
            (0, Op::Read, &escape_read, 5, Some(0), 8192, None),
            (0, Op::Close, &escape_read, 5, None, 0, None),
            (0, Op::Open, &escape_write, 6, None, 0, Some(O_WRITE_CREATE)),
            (0, Op::Write, &escape_write, 6, Some(0), 4096, None),
            (0, Op::Close, &escape_write, 6, None, 0, None),
            (
                0,
                Op::Unlink,
                "/../../../../../etc/hostname",
                -1,
                None,
                0,
                None,
            ),
        ],
    );
    let target = tmp.path().join("target");
    let r = replay_ok(&trace, &target, &["--json"]);
    assert_eq!(r["read_bytes"], 8192);
    assert_eq!(r["write_bytes"], 4096);
    assert!(
        listing(&outside).is_empty(),
        "nothing appears outside: {:?}",
        listing(&outside)
    );
    assert!(
        std::fs::metadata("/etc/hostname").is_ok(),
        "unlink stayed under the target"
    );
    let inner = outside.strip_prefix("/").unwrap();
    assert_eq!(
        std::fs::metadata(target.join("data/rep-0000").join(inner).join("victim.bin"))
            .unwrap()
            .len(),
        8192
    );
    assert_eq!(
        std::fs::metadata(target.join("ranks/rank-00000").join(inner).join("evil.txt"))
            .unwrap()
            .len(),
        4096
    );
}

#[test]
fn planted_directory_symlink_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let target = tmp.path().join("target");
    std::fs::create_dir_all(target.join("data/rep-0000")).unwrap();
    symlink(&outside, target.join("data/rep-0000/data")).unwrap();
    let trace = write_rows(
        tmp.path(),
        &[
            (0, Op::Open, "/data/f.bin", 5, None, 0, Some(libc::O_RDONLY)),
            (0, Op::Read, "/data/f.bin", 5, Some(0), 4096, None),
        ],
    );
    let out = replay_into(&trace, &target, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused") && err.contains("data/rep-0000/data"),
        "{err}"
    );
    assert!(listing(&outside).is_empty(), "{:?}", listing(&outside));
}

#[test]
fn planted_file_and_relative_symlinks_are_refused_or_cleared() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("victim"), b"precious").unwrap();
    let target = tmp.path().join("target");
    let own = target.join("ranks/rank-00000");
    std::fs::create_dir_all(&own).unwrap();
    symlink(outside.join("victim"), own.join("ck.pt")).unwrap();
    symlink("../../../outside", own.join("ckdir")).unwrap();
    let rows = |path| {
        vec![
            (0, Op::Open, path, 5, None, 0, Some(O_WRITE_CREATE)),
            (0, Op::Write, path, 5, Some(0), 4096, None),
            (0, Op::Close, path, 5, None, 0, None),
        ]
    };
    // The trace creates /ck.pt anew: preparing removes the planted link
    // itself (never what it points at) and the replay writes its own file.
    let dir = tempfile::tempdir().unwrap();
    let out = replay_into(
        &write_rows(dir.path(), &rows("/ck.pt")),
        &target,
        &["--json"],
    );
    assert_eq!(out.status.code(), Some(0));
    let r = json(&out);
    assert_eq!(r["write_bytes"], 4096);
    assert_eq!(r["prepare"]["paths_cleared"], 1);
    let ck = std::fs::symlink_metadata(own.join("ck.pt")).unwrap();
    assert!(ck.is_file() && ck.len() == 4096, "{ck:?}");
    // /ckdir existed for the job: the planted link in its place is refused.
    let dir = tempfile::tempdir().unwrap();
    let out = replay_into(
        &write_rows(dir.path(), &rows("/ckdir/new.pt")),
        &target,
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refused") && err.contains("ckdir"), "{err}");
    assert_eq!(std::fs::read(outside.join("victim")).unwrap(), b"precious");
    assert_eq!(listing(&outside), vec!["victim".to_string()]);
}
