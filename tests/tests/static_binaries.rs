//! The static binaries (`cargo xtask dist`) run on a node whatever its C
//! library: each has no program interpreter, and the whole pipeline
//! (capture, summary, replay) runs in a root that holds nothing but the
//! three binaries and a static busybox: no libc, no loader, no /etc. A node
//! with glibc 2.28 or 2.31 has more than that.

use std::path::{Path, PathBuf};
use std::process::Command;

use iorepro_format::Op;
use iorepro_tests::bins::{run_ok, scratch, static_dir};
use iorepro_tests::rows;

const BINARIES: [&str; 3] = ["iorepro-collect", "iorepro-trace", "iorepro-replay"];

/// The static binaries' folder, if `cargo xtask dist` filled it.
fn dist_dir() -> Option<PathBuf> {
    let dir = static_dir();
    if BINARIES.iter().all(|b| dir.join(b).is_file()) {
        Some(dir)
    } else {
        iorepro_tests::skip::cannot_run(format!(
            "no static binaries in {}: `cargo xtask dist` builds them (`cargo xtask test` does)",
            dir.display()
        ));
        None
    }
}

/// The ELF program header types of the file at `path` (64-bit little-endian
/// x86-64 only: what the static build makes).
fn program_headers(path: &Path) -> Vec<u32> {
    let elf = std::fs::read(path).unwrap();
    assert_eq!(&elf[..4], b"\x7fELF", "{} is not ELF", path.display());
    assert_eq!(elf[4], 2, "{} is not 64-bit", path.display());
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    assert_eq!(u16_at(0x12), 62, "{} is not x86-64", path.display());
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count)
        .map(|i| {
            let at = phoff + i * size;
            u32::from_le_bytes(elf[at..at + 4].try_into().unwrap())
        })
        .collect()
}

#[test]
fn no_binary_needs_a_program_interpreter() {
    const PT_INTERP: u32 = 3;
    let Some(dir) = dist_dir() else { return };
    for b in BINARIES {
        let p = dir.join(b);
        assert!(
            !program_headers(&p).contains(&PT_INTERP),
            "{} asks for a dynamic loader: it needs the node's C library",
            p.display()
        );
        let out = run_ok(Command::new(&p).arg("--version"));
        assert!(String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")));
    }
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    assert_eq!(sums.lines().count(), BINARIES.len(), "{sums}");
}

/// Runs `script` with `sh` in a mount namespace of its own, so the mounts it
/// makes for the root vanish with it, whatever happens.
fn in_own_mounts(script: &str) -> std::process::Output {
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-ec", script])
        .output()
        .expect("unshare (util-linux) runs")
}

#[test]
fn capture_summary_and_replay_run_in_a_root_without_a_c_library() {
    let Some(dir) = dist_dir() else { return };
    if !iorepro_format::host::is_root() {
        iorepro_tests::skip::cannot_run("not root: a chroot and a capture need root");
        return;
    }
    let busybox = Path::new("/bin/busybox");
    if !busybox.is_file() {
        iorepro_tests::skip::cannot_run(
            "no /bin/busybox: `cargo xtask setup` installs busybox-static",
        );
        return;
    }
    let scratch = scratch("static-binaries");
    let root = scratch.join("root");
    for d in ["bin", "proc", "sys", "dev", "data"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for b in BINARIES {
        std::fs::copy(dir.join(b), root.join("bin").join(b)).unwrap();
    }
    std::fs::copy(busybox, root.join("bin/busybox")).unwrap();
    assert!(
        !root.join("lib").exists() && !root.join("usr").exists() && !root.join("etc").exists(),
        "the root must hold no C library"
    );

    let r = root.display();
    let out = in_own_mounts(&format!(
        "mount -t proc proc {r}/proc
         mount --rbind /sys {r}/sys
         mount --rbind /dev {r}/dev
         # md5sum reads with read(2); busybox's cat would use sendfile(2).
         chroot {r} /bin/iorepro-collect --out /trace -- /bin/busybox sh -c \
           'dd if=/dev/zero of=/data/f bs=4096 count=2000 2>/dev/null && md5sum /data/f >/dev/null'
         chroot {r} /bin/iorepro-trace summary /trace --json > {s}/summary.json
         chroot {r} /bin/iorepro-replay /trace --target /replay --ranks 2 --timing afap --json \
           --plan-only > {s}/plan.json
         chroot {r} /bin/iorepro-replay /trace --target /replay --ranks 2 --timing afap --json \
           > {s}/replay.json",
        s = scratch.display()
    ));
    assert!(
        out.status.success(),
        "the static pipeline failed in a root without libc ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // The capture is exact: the job's 2,000 writes and its read-back.
    let trace_rows = rows::load(&root.join("trace"));
    let on_f = |op: Op| -> (usize, u64) {
        let calls: Vec<_> = trace_rows
            .iter()
            .filter(|row| row.op == op && row.path.as_deref() == Some("/data/f"))
            .collect();
        (calls.len(), calls.iter().map(|c| c.moved()).sum())
    };
    assert_eq!(on_f(Op::Write), (2000, 2000 * 4096), "writes to /data/f");
    assert_eq!(
        on_f(Op::Read).1,
        2000 * 4096,
        "bytes read back from /data/f"
    );

    let json = |name: &str| -> serde_json::Value {
        let p = scratch.join(name);
        serde_json::from_slice(&std::fs::read(&p).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    // The whole capture holds only the job's own I/O: busybox needs no
    // library, so /data/f is all it read and wrote.
    let summary = json("summary.json");
    assert_eq!(summary["write_bytes"], 2000 * 4096, "{summary:#}");
    assert_eq!(summary["read_bytes"], 2000 * 4096, "{summary:#}");
    assert_eq!(summary["dropped_events"], 0, "{summary:#}");
    let (plan, replay) = (json("plan.json"), json("replay.json"));
    assert!(
        replay["errors"].as_array().unwrap().is_empty(),
        "{replay:#}"
    );
    // One process wrote the file and read it back: at two ranks it is still
    // written by one writer and read back once.
    for key in ["read_bytes", "write_bytes"] {
        assert_eq!(replay[key], plan[key], "{key}: replay against its plan");
        assert_eq!(replay[key], 2000 * 4096, "{key}: {replay:#}");
    }
}
