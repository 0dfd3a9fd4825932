//! The collector on the kernels of the field: each kernel of the matrix
//! (Debian's 5.10, 6.1 and 6.12, fetched by `cargo xtask setup` into
//! `target/kernels/`) is booted once in a VM (virtme-ng over QEMU, the
//! host's root read-only), where the ground-truth tests of this package run
//! again as they run on the host: fio's `write_iolog`, strace, forked and
//! spawned Python workers, descriptor cases, the copy calls; and `guest_checks` below, which
//! times the start-up, checks a `dd` exactly and records what the kernel
//! lets the collector capture. The host's own kernel is the rest of the
//! suite's.
//!
//! Under `CI=true` a matrix that cannot run (no QEMU, no virtme-ng, a
//! kernel missing, not root) fails; elsewhere it says why and returns.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use iorepro_format::{Manifest, Op};

/// The kernels, by Debian suite (see xtask's `kernels`).
const SUITES: &[&str] = &["bullseye", "bookworm", "bookworm-backports"];

/// The tests of this package that run again inside each VM.
const GROUND_TRUTH: &[&str] = &[
    "fio_ground_truth",
    "metadata",
    "fd_cases",
    "python_workers",
    "copy_calls",
];

/// The longest one VM may take, boot to power-off (without KVM; 5.10 took
/// 702 s on a machine shared with two other builds).
const VM_TIMEOUT: Duration = Duration::from_secs(1800);

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory holds tmp/")
        .to_path_buf()
}

/// Not runnable here: under CI that is a failure, elsewhere a skip.
fn unavailable(why: &str) {
    iorepro_tests::skip::cannot_run(format!(
        "the kernel matrix cannot run: {why} (`cargo xtask setup` installs it)"
    ));
}

fn on_path(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn vmlinuz(suite: &str) -> Option<PathBuf> {
    std::fs::read_dir(target_dir().join("kernels").join(suite).join("boot"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
}

/// The test binaries of `names`, built beside this one: the newest of each
/// name, built by cargo first if there is none.
fn test_binaries(names: &[&str]) -> Vec<(String, PathBuf)> {
    let me = std::env::current_exe().unwrap();
    let deps = me.parent().unwrap();
    let newest = |name: &str| -> Option<PathBuf> {
        std::fs::read_dir(deps)
            .ok()?
            .filter_map(|e| e.ok())
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                n.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(|hash| !hash.contains('.'))
            })
            .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
            .map(|e| e.path())
    };
    if names.iter().any(|n| newest(n).is_none()) {
        let mut cargo = Command::new(env!("CARGO"));
        cargo.args(["test", "--no-run", "-p", "iorepro-collector"]);
        for n in names {
            cargo.args(["--test", n]);
        }
        if deps.parent().is_some_and(|p| p.ends_with("release")) {
            cargo.arg("--release");
        }
        assert!(cargo.status().unwrap().success(), "building the tests");
    }
    names
        .iter()
        .map(|n| (n.to_string(), newest(n).expect("built")))
        .collect()
}

/// What one VM reported.
struct Report {
    suite: String,
    kernel: String,
    guest: serde_json::Value,
    results: Vec<(String, i32)>,
    boot_to_end_s: f64,
}

#[test]
fn every_kernel_of_the_matrix_loads_and_captures_exactly() {
    if std::env::var_os(KERNEL_MATRIX_GUEST).is_some() {
        return; // inside a VM: `guest_checks` is this run's work
    }
    if !iorepro_format::host::is_root() {
        return unavailable("not root");
    }
    for tool in ["vng", "qemu-system-x86_64", "busybox"] {
        if !on_path(tool) {
            return unavailable(&format!("{tool} is not installed"));
        }
    }
    let mut kernels = Vec::new();
    for suite in SUITES {
        match vmlinuz(suite) {
            Some(k) => kernels.push((*suite, k)),
            None => {
                return unavailable(&format!(
                    "Debian {suite}'s kernel is not in {}",
                    target_dir().join("kernels").display()
                ))
            }
        }
    }
    let mut names = vec!["kernel_matrix"];
    names.extend(GROUND_TRUTH);
    let bins = test_binaries(&names);
    let started = Instant::now();
    // Each VM emulates its two vCPUs on one host thread, so the VMs boot side
    // by side, as many at a time as the host has cores: on two cores the
    // matrix takes two VMs' time instead of three.
    let side_by_side = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..side_by_side.min(kernels.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((suite, k)) = kernels.get(i) else {
                    return;
                };
                let report = boot_until_the_script_ends(suite, k, &bins, names.len());
                done.lock().unwrap().push((i, report));
            });
        }
    });
    let mut done = done.into_inner().unwrap();
    done.sort_by_key(|(i, _)| *i);
    let reports: Vec<Report> = done.into_iter().map(|(_, r)| r).collect();
    eprintln!(
        "\nkernel matrix, {} kernels in {:.0} s:",
        reports.len(),
        started.elapsed().as_secs_f64()
    );
    // The static build captures in every VM (guest_checks): under CI it
    // must be there to be checked.
    if static_collector().is_none() {
        unavailable("no static collector in target/dist/ (`cargo xtask dist` builds it)");
    }
    eprintln!("| kernel | loads | load time | dd writes | static build's dd writes | storage_bytes (reads, writes) | tests | not captured |");
    let mut failures = Vec::new();
    for r in &reports {
        let g = &r.guest;
        let missing: Vec<String> = g["missing"]
            .as_array()
            .map(|m| {
                m.iter()
                    .map(|x| x["what"].as_str().unwrap_or("?").to_string())
                    .collect()
            })
            .unwrap_or_default();
        let passed = r.results.iter().filter(|(_, rc)| *rc == 0).count();
        eprintln!(
            "| {} | {} | {:.2} s | {} | {} | {}, {} | {passed}/{} passed | {} | ({:.0} s in the VM)",
            r.kernel,
            if g["loads"] == true { "yes" } else { "no" },
            g["load_s"].as_f64().unwrap_or(f64::NAN),
            g["dd_write_calls"],
            g["static_dd_write_calls"],
            g["storage_bytes"]["reads"],
            g["storage_bytes"]["writes"],
            r.results.len(),
            if missing.is_empty() {
                "—".to_string()
            } else {
                missing.join(", ")
            },
            r.boot_to_end_s,
        );
        if static_collector().is_some() && g["static_dd_write_calls"].is_null() {
            failures.push(format!(
                "{} ({}): the static collector did not capture in the VM; see {}",
                r.suite,
                r.kernel,
                results_dir(&r.suite).join("kernel_matrix.log").display()
            ));
        }
        for (name, rc) in &r.results {
            if *rc != 0 {
                failures.push(format!(
                    "{} ({}): {name} exited {rc}; see {}",
                    r.suite,
                    r.kernel,
                    results_dir(&r.suite).join(format!("{name}.log")).display()
                ));
            }
        }
        let want: Vec<&str> = names.to_vec();
        for name in want {
            if !r.results.iter().any(|(n, _)| n == name) {
                failures.push(format!("{} ({}): {name} did not run", r.suite, r.kernel));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Boots `kernel` and runs every check in it; an emulated VM that ended
/// before its script did is booted once more (said here, with where its
/// console is kept), a check that failed is not.
fn boot_until_the_script_ends(
    suite: &str,
    kernel: &Path,
    bins: &[(String, PathBuf)],
    checks: usize,
) -> Report {
    let first = boot(suite, kernel, bins);
    if first.results.len() == checks {
        return first;
    }
    eprintln!(
        "{suite}: the VM ended after {} of {checks} checks ({:.0} s); booting it again",
        first.results.len(),
        first.boot_to_end_s
    );
    let kept = results_dir(suite).with_extension("first-boot");
    let _ = std::fs::remove_dir_all(&kept);
    let _ = std::fs::rename(results_dir(suite), &kept);
    boot(suite, kernel, bins)
}

fn results_dir(suite: &str) -> PathBuf {
    target_dir().join("kernel-matrix").join(suite)
}

/// Boots `kernel` once and runs every check in it.
fn boot(suite: &str, kernel: &Path, bins: &[(String, PathBuf)]) -> Report {
    let out = results_dir(suite);
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(tmp).unwrap();
    // The guest sees the host's root read-only: the tests' scratch space
    // (CARGO_TARGET_TMPDIR) becomes a tmpfs of the guest, and the results
    // directory is the one place it writes to the host.
    let mut script = format!(
        "#!/bin/sh\nexec >{out}/guest.log 2>&1\nexport PATH='{path}'\nexport {KERNEL_MATRIX_GUEST}='{out}'\n\
         export CARGO_TARGET_DIR='{target}'\n\
         mount -t tmpfs -o size=1200m tmpfs '{tmp}'\nuname -r >{out}/kernel\n",
        out = out.display(),
        path = std::env::var("PATH").unwrap_or_default(),
        // Where the host found the static build, the guest looks too.
        target = target_dir().display(),
        tmp = tmp.display(),
    );
    for (name, bin) in bins {
        let filter = if name == "kernel_matrix" {
            " guest_checks --exact"
        } else {
            ""
        };
        script += &format!(
            "'{bin}'{filter} --test-threads=1 >{out}/{name}.log 2>&1; echo \"{name} $?\" >>{out}/results\n",
            bin = bin.display(),
            out = out.display(),
        );
    }
    let script_path = out.join("guest.sh");
    std::fs::write(&script_path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script_path, std::fs::Permissions::from_mode(0o755)).unwrap();

    let started = Instant::now();
    let mut vm = Command::new("timeout");
    vm.arg(VM_TIMEOUT.as_secs().to_string())
        .arg("vng")
        .arg("--run")
        .arg(kernel)
        // This machine's KVM may not boot a distribution kernel; QEMU's
        // emulation does, more slowly.
        .arg("--disable-kvm")
        // Two vCPUs, so the collector sees events from more than one CPU,
        // emulated by one host thread (`thread=single`). QEMU's default
        // multi-threaded emulation livelocks a 5.10 guest within a few dozen
        // captures: both vCPUs spin at tracepoint sites the kernel rewrites
        // as probes attach and detach (`syscall_trace_enter`, `do_exit`,
        // `syscall_exit_to_user_mode`), code patched on one host thread
        // while another runs it. The same guest, kernel and collector with
        // one host thread passed 40 captures of 40.
        // 4G: the tests' 1.2 GB tmpfs and a 2G guest left too little (a
        // 6.12 guest once ended in the middle of a test).
        .args(["--cpus", "2", "--memory", "4G"])
        .arg("--qemu-opts=-accel tcg,thread=single")
        // The guest's console goes to vng.log: why a VM ended early is there.
        .arg("--verbose")
        .arg(format!("--rwdir={}", out.display()))
        .arg("--exec")
        .arg(&script_path)
        .stdin(std::process::Stdio::null());
    let o = vm.output().expect("run vng");
    let boot_to_end_s = started.elapsed().as_secs_f64();
    std::fs::write(out.join("vng.log"), [&o.stdout[..], &o.stderr[..]].concat()).unwrap();
    let results: Vec<(String, i32)> = std::fs::read_to_string(out.join("results"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (n, rc) = l.rsplit_once(' ')?;
            Some((n.to_string(), rc.parse().ok()?))
        })
        .collect();
    let guest = std::fs::read_to_string(out.join("guest.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    let kernel_release = std::fs::read_to_string(out.join("kernel"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| format!("{suite} (did not boot: see {}/vng.log)", out.display()));
    Report {
        suite: suite.to_string(),
        kernel: kernel_release,
        guest,
        results,
        boot_to_end_s,
    }
}

/// Inside a VM of the matrix (and only there): the collector starts (timed),
/// a `dd` of 2,000 4-KiB writes is captured exactly, and what this kernel
/// lets the collector capture is recorded; the results go to `guest.json`.
#[test]
fn guest_checks() {
    let Some(out) = std::env::var_os(KERNEL_MATRIX_GUEST).map(PathBuf::from) else {
        return; // on the host: the matrix boots the VMs that run this
    };
    let dir = scratch();
    // Start-up: a capture of a job that does nothing, three times.
    let mut load_s = Vec::new();
    for i in 0..3 {
        let t = dir.path().join(format!("true-{i}"));
        let o = collect(&t, &[], &["true"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let (m, _) = read_rows(&t);
        load_s.push(m.extra["collector"]["load_s"].as_f64().unwrap());
    }
    load_s.sort_by(f64::total_cmp);
    let (manifest, offsets, stderr) = capture_dd(
        Path::new(env!("CARGO_BIN_EXE_iorepro-collect")),
        dir.path(),
        "dd",
    );
    // The static build (`cargo xtask dist`), the binary a node without Rust
    // gets, captures the same `dd` exactly on this kernel too.
    let static_collector = static_collector();
    let static_dd = static_collector.as_ref().map(|exe| {
        let (m, offsets, _) = capture_dd(exe, dir.path(), "static-dd");
        assert_eq!(m.dropped_events, 0);
        offsets
    });
    // What the storage served: the dd's writes and a read of its file fill
    // `storage_bytes`, or the capture declares the hook missing.
    let dd_file = dir.path().join("dd.dat");
    let storage_writes = storage_column(&dir.path().join("dd"), &dd_file, Op::Write, &manifest);
    let read_trace = dir.path().join("cat");
    let o = collect(&read_trace, &[], &["cat", dd_file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (read_manifest, _) = read_rows(&read_trace);
    let storage_reads = storage_column(&read_trace, &dd_file, Op::Read, &read_manifest);
    let caps = manifest.extra["capabilities"].clone();
    let missing = caps["missing"].as_array().cloned().unwrap_or_default();
    for m in &missing {
        assert!(
            stderr.contains(m["effect"].as_str().unwrap()),
            "what is not captured is said on stderr: {m} / {stderr}"
        );
    }
    let report = serde_json::json!({
        "kernel": caps["kernel"],
        "loads": true,
        "load_s": load_s[1],
        "load_s_all": load_s,
        "hooks": caps["hooks"],
        "missing": missing,
        "dd_write_calls": offsets.len(),
        "storage_bytes": { "reads": storage_reads, "writes": storage_writes },
        "static_dd_write_calls": static_dd.as_ref().map(Vec::len),
        "dropped_events": manifest.dropped_events,
    });
    std::fs::write(
        out.join("guest.json"),
        serde_json::to_string_pretty(&report).unwrap(),
    )
    .unwrap();
    let dd_offsets: Vec<i64> = (0..2000).map(|i| i * 4096).collect();
    assert_eq!(
        offsets, dd_offsets,
        "every write of dd, at the offsets dd wrote"
    );
    assert_eq!(manifest.dropped_events, 0);
    if let Some(static_offsets) = static_dd {
        assert_eq!(
            static_offsets, dd_offsets,
            "the static collector: every write of dd"
        );
    }
}

/// The static collector `cargo xtask dist` leaves (`cargo xtask test` builds
/// it), if it is there.
fn static_collector() -> Option<PathBuf> {
    let exe = iorepro_tests::bins::static_dir().join("iorepro-collect");
    exe.is_file().then_some(exe)
}

/// Captures `dd` writing 2,000 blocks of 4 KiB into `dir/NAME.dat` with
/// the collector `exe`, into `dir/NAME`: the manifest, the offsets of the
/// writes (each checked to be of 4 KiB), and the collector's stderr.
/// Whether the rows of `op` on `file` in `trace` say what the storage
/// served (`filled`), or the capture declared the hook that would say
/// missing (`declared missing`); a trace that does neither fails.
fn storage_column(trace: &Path, file: &Path, op: Op, manifest: &Manifest) -> &'static str {
    let what = if op == Op::Read {
        "page_faults"
    } else {
        "device_writes"
    };
    let declared = missing_capability(manifest, what).is_some();
    let want = file.to_str().unwrap();
    let (mut filled, mut null) = (0, 0);
    let reader = iorepro_format::TraceReader::open(trace).unwrap();
    for batch in reader.events().unwrap() {
        let ev = batch.unwrap();
        for i in 0..ev.len() {
            if ev.op(i) == op && ev.path_at(i) == Some(want) {
                match ev.from_storage_at(i) {
                    Some(_) => filled += 1,
                    None => null += 1,
                }
            }
        }
    }
    assert!(filled + null > 0, "no {op:?} row of {want}");
    if declared {
        assert_eq!(filled, 0, "{what} declared missing, yet {op:?} rows say");
        "declared missing"
    } else {
        assert_eq!(null, 0, "{op:?} rows of {want} without `storage_bytes`");
        "filled"
    }
}

fn capture_dd(exe: &Path, dir: &Path, name: &str) -> (Manifest, Vec<i64>, String) {
    let file = dir.join(format!("{name}.dat"));
    let trace = dir.join(name);
    let o = Command::new(exe)
        .arg("--out")
        .arg(&trace)
        .args(["--", "dd", "if=/dev/zero", "bs=4k", "count=2000"])
        .arg(format!("of={}", file.display()))
        .output()
        .expect("run the collector");
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{}: {stderr}", exe.display());
    let (manifest, rows) = read_rows(&trace);
    let writes: Vec<&Row> = rows_for(&rows, &file)
        .into_iter()
        .filter(|r| r.op == Op::Write)
        .collect();
    assert!(writes.iter().all(|r| r.size == Some(4096) && r.ret == 4096));
    let offsets = writes.iter().map(|r| r.offset.unwrap()).collect();
    (manifest, offsets, stderr)
}
