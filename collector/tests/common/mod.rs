//! Shared by the collector's integration tests: running `iorepro-collect` on
//! a real job and reading back what it wrote.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use iorepro_format::Manifest;

/// The tests load eBPF programs: root and a kernel with BTF are required. On
/// a machine without them a test says so and returns (under CI, it fails).
pub fn can_trace() -> bool {
    if !iorepro_format::host::is_root() {
        iorepro_tests::skip::cannot_run("the collector tests need root (CAP_BPF + CAP_PERFMON)");
        return false;
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        iorepro_tests::skip::cannot_run("this kernel has no BTF (/sys/kernel/btf/vmlinux)");
        return false;
    }
    true
}

pub fn have(tool: &str) -> bool {
    let ok = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        iorepro_tests::skip::cannot_run(format!(
            "{tool} is not installed (cargo xtask setup installs the test partners)"
        ));
    }
    ok
}

pub fn collector() -> Command {
    Command::new(env!("CARGO_BIN_EXE_iorepro-collect"))
}

/// Runs `iorepro-collect --out OUT [extra...] -- job...` to completion.
pub fn collect(out: &Path, extra: &[&str], job: &[&str]) -> Output {
    let mut c = collector();
    c.arg("--out").arg(out).args(extra).arg("--").args(job);
    let o = c.output().expect("run iorepro-collect");
    if !o.status.success() {
        eprintln!("collector stderr: {}", String::from_utf8_lossy(&o.stderr));
    }
    o
}

/// One trace row, owned, for assertions.
pub use iorepro_tests::rows::Row;

/// The manifest of `trace` and every row of it, in time order.
pub fn read_rows(trace: &Path) -> (Manifest, Vec<Row>) {
    iorepro_tests::rows::load_with_manifest(trace)
}

/// The rows of an `strace -f -ttt -T -y` log, imported as
/// `iorepro-trace import --strace` does (the ground truth of tests whose
/// partner is strace).
pub fn strace_rows(log: &Path, scratch: &Path) -> Vec<Row> {
    use iorepro_interchange::import_strace::{import, StraceOptions};
    let imported = scratch.join("imported");
    let options = StraceOptions {
        host: "strace".into(),
        rank: None,
        date_days: None,
        segment_rows: 1 << 20,
    };
    import(log, &imported, &options).unwrap();
    read_rows(&imported).1
}

/// Set inside a kernel-matrix VM (`kernel_matrix.rs`) to the directory the
/// guest's results go to.
pub const KERNEL_MATRIX_GUEST: &str = "IOREPRO_KERNEL_MATRIX_GUEST";

/// A capture left io_uring out (`why`, its manifest's reason), so a test
/// could not check io_uring requests. In a kernel-matrix VM that is what the
/// kernel allows (an old kernel, recorded by the matrix); on the host it is
/// [`iorepro_tests::skip::cannot_run`]: a failure under CI.
pub fn io_uring_not_captured(why: &str) {
    if std::env::var_os(KERNEL_MATRIX_GUEST).is_some() {
        eprintln!("io_uring requests not checked: this kernel's capture leaves them out: {why}");
    } else {
        iorepro_tests::skip::cannot_run(format!(
            "io_uring requests not checked: this capture leaves them out: {why}"
        ));
    }
}

/// Why the capture that wrote `manifest` left `what` out (`io_uring`,
/// `page_faults`: see the manifest's `capabilities`), or `None` if it
/// captured it.
pub fn missing_capability(manifest: &Manifest, what: &str) -> Option<String> {
    manifest.extra["capabilities"]["missing"]
        .as_array()?
        .iter()
        .find(|m| m["what"] == what)
        .map(|m| m["why"].as_str().unwrap_or("").to_string())
}

pub fn rows_for<'a>(rows: &'a [Row], path: &Path) -> Vec<&'a Row> {
    let p = path.to_str().unwrap();
    rows.iter()
        .filter(|r| r.path.as_deref() == Some(p))
        .collect()
}

/// A scratch directory on a real disk file system (not tmpfs: page-cache
/// behaviour and inode numbers should be those of a data directory).
pub fn scratch() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&base).unwrap();
    tempfile::Builder::new()
        .prefix("collect-")
        .tempdir_in(base)
        .unwrap()
}

pub fn write_file(path: &Path, bytes: usize) {
    let data: Vec<u8> = (0..bytes).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(path, data).unwrap();
}

/// A job that reads `f` in a loop until killed, writing its pid to `pidfile`
/// first (for tests that stop or kill the collector mid-capture).
pub fn reader_loop(f: &Path, pidfile: &Path) -> Vec<String> {
    let py = format!(
        "import os,time\nopen('{}','w').write(str(os.getpid()))\nfd=os.open('{}',os.O_RDONLY)\n\
         while True:\n    [os.pread(fd,512,i*512) for i in range(200)]\n    time.sleep(0.01)\n",
        pidfile.display(),
        f.display()
    );
    vec!["python3".into(), "-c".into(), py]
}

/// The pid a [`reader_loop`] job wrote, once it is running.
pub fn wait_for_pid(pidfile: &Path) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "job did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A collector capturing a [`reader_loop`] job over `data` (200 blocks of 512
/// bytes), for tests that stop or kill one of the two mid-capture.
pub struct ReaderCapture {
    /// Holds `data` and `out`; removed when the capture is dropped.
    pub dir: tempfile::TempDir,
    /// The file the job reads.
    pub data: PathBuf,
    /// The trace directory.
    pub out: PathBuf,
    pub collector: Child,
    /// The job's pid, which the collector does not reap once it is killed.
    pub job: i32,
}

impl ReaderCapture {
    /// Starts `iorepro-collect --out OUT [extra...] -- <reader_loop>` with the
    /// collector's stderr sent to `stderr`, and returns once the job runs.
    /// `None` (having said why) where tracing or python3 is unavailable.
    pub fn start(extra: &[&str], stderr: Stdio) -> Option<ReaderCapture> {
        if !can_trace() || !have("python3") {
            return None;
        }
        let dir = scratch();
        let (data, pidfile, out) = (
            dir.path().join("d.dat"),
            dir.path().join("pid"),
            dir.path().join("trace"),
        );
        write_file(&data, 200 * 512);
        let collector = collector()
            .arg("--out")
            .arg(&out)
            .args(extra)
            .arg("--")
            .args(reader_loop(&data, &pidfile))
            .stderr(stderr)
            .spawn()
            .unwrap();
        let job = wait_for_pid(&pidfile);
        Some(ReaderCapture {
            dir,
            data,
            out,
            collector,
            job,
        })
    }

    /// SIGKILLs the collector and reaps it, then kills the job it orphaned.
    pub fn kill_collector_then_job(&mut self) {
        self.collector.kill().unwrap();
        self.collector.wait().unwrap();
        // SAFETY: the orphaned job this capture started.
        unsafe { libc::kill(self.job, libc::SIGKILL) };
    }
}

/// Compiles the C program `source` into `dir/name` with `cc -O2`.
pub fn compile_c(dir: &Path, name: &str, source: &str) -> PathBuf {
    compile_c_with(dir, name, source, &[])
}

/// [`compile_c`] with extra compiler arguments (`-static`: a program whose
/// only file I/O is its own, with no dynamic loader reading libraries).
pub fn compile_c_with(dir: &Path, name: &str, source: &str, extra: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    let bin = dir.join(name);
    std::fs::write(&src, source).unwrap();
    // Extra arguments after the source: libraries (-l) must follow it.
    let cc = Command::new("cc")
        .arg("-O2")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .args(extra)
        .status()
        .unwrap();
    assert!(cc.success());
    bin
}
