//! How a trace spells a path, and what kind of name it is. The kernel
//! accepts many spellings of one file (`d/./f`, `d/x/../f`, `d/`, `d/.`),
//! names that are no file at all (pipes, sockets, anonymous inodes), and
//! files that stand for the kernel rather than storage (/proc, /sys, /dev),
//! and names an interpreter makes up that were never files
//! (`<frozen importlib._bootstrap>`). Analysis and replay agree on one
//! spelling through the format's [`spelled`], on what a name is through [`form_of`],
//! on which files an `--include` or `--exclude` prefix selects through
//! [`beneath`], and on which files belong to a launcher or runtime rather
//! than to the job through [`is_launcher_file`].

use std::path::Path;

use super::names::looks_like_code;
use iorepro_format::paths::{spelled, spelling};
use serde::Serialize;

/// Whether `path` (in its one spelling, see [`spelled`]) lies at or beneath
/// `prefix`, component by component: `/data/val` holds `/data/val/1.jpg`
/// but not `/data/validation`. The prefix is taken in its canonical
/// spelling too, so `/data/val/` and `/data/./val` select the same files.
pub fn beneath(path: &str, prefix: &str) -> bool {
    let prefix = spelling(prefix);
    prefix == "/" || Path::new(path).starts_with(&prefix)
}

/// What a name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// A file or directory on a file system.
    File,
    /// The root directory `/`.
    Root,
    /// The empty path: the call acted on a descriptor.
    Empty,
    /// A name relative to a working directory the trace does not know.
    Relative,
    /// /proc and /sys: the kernel's own files.
    Kernel,
    /// /dev (not /dev/shm, which is memory the job writes as files).
    Device,
    /// A pipe, socket, anonymous inode (eventfd, epoll...) or memfd.
    Special,
    /// A name that was never a file: Python's `<frozen ...>`, `<string>`,
    /// `<stdin>` (a path component of the form `<...>`), which the
    /// interpreter stats, often as if relative to its working directory.
    Pseudo,
    /// An object-storage request's URL (`http://...`, `https://...`).
    Url,
}

impl Form {
    pub fn as_str(self) -> &'static str {
        match self {
            Form::File => "file",
            Form::Root => "root",
            Form::Empty => "empty",
            Form::Relative => "relative",
            Form::Kernel => "kernel",
            Form::Device => "device",
            Form::Special => "special",
            Form::Pseudo => "not_a_file",
            Form::Url => "object_request",
        }
    }
}

fn under(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// What kind of name `path` (as the trace spells it) is.
pub fn form_of(path: &str) -> Form {
    if path.is_empty() {
        return Form::Empty;
    }
    if iorepro_format::paths::is_url(path) {
        return Form::Url;
    }
    if is_pseudo(path) {
        return Form::Pseudo;
    }
    if !path.starts_with('/') {
        let special = ["pipe:", "socket:", "anon_inode:", "memfd:"];
        return if path.contains(":[") || special.iter().any(|s| path.starts_with(s)) {
            Form::Special
        } else {
            Form::Relative
        };
    }
    let Some(p) = spelled(path) else {
        return Form::Special;
    };
    let p = &*p;
    if p == "/" {
        Form::Root
    } else if p.starts_with("/memfd:") {
        Form::Special
    } else if under(p, "/proc") || under(p, "/sys") {
        Form::Kernel
    } else if under(p, "/dev") && !under(p, "/dev/shm") {
        Form::Device
    } else {
        Form::File
    }
}

/// Whether a component of `path` is a made-up name of the form `<...>`.
fn is_pseudo(path: &str) -> bool {
    path.contains('<')
        && path
            .split('/')
            .any(|c| c.len() >= 2 && c.starts_with('<') && c.ends_with('>'))
}

/// Whether `path` (any spelling) is a file of a launcher or runtime rather
/// than of the job: what a replay must leave out because the launcher, not
/// the job, makes it.
/// - Open MPI and PMIx session files: a directory `ompi.*` or
///   `openmpi-sessions-*` (and what lies beneath), any component starting
///   `pmix`, and shared-memory segments in /dev/shm (`vader_segment.*`,
///   `sm_segment.*`, `ompi*`, `psm2_shm.*`);
/// - Slurm's spool and step files (`/var/spool/slurm*`, `/var/lib/slurm*`,
///   `/run/slurm*`, `/var/run/slurm*`; a job's `slurm-*.out` is its log);
/// - torchrun's and the c10d store's files (a component starting
///   `torchelastic`);
/// - Python multiprocessing's `pymp-*` directories and their sockets;
/// - NCCL, Gloo and PyTorch shared memory (`/dev/shm/nccl-*`, `gloo*`,
///   `torch_*`) and POSIX semaphores (`/dev/shm/sem.*`);
/// - a user's Open MPI and PMIx settings (`~/.openmpi`, `~/.pmix`).
///
/// A launcher's installed code (`pmix_mca_*.so`, a framework's
/// `torchelastic.py`) is code, not one of these.
pub fn is_launcher_file(path: &str) -> bool {
    let Some(p) = spelled(path) else {
        return false;
    };
    let p = &*p;
    if looks_like_code(p) && !dot_settings_of_a_launcher(p) {
        return false;
    }
    let comps: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).collect();
    let Some((&name, dirs)) = comps.split_last() else {
        return false;
    };
    let session = |c: &str| c.starts_with("ompi.") || c.starts_with("openmpi-sessions");
    let runtime =
        |c: &str| c.starts_with("pmix") || c.starts_with("torchelastic") || c.starts_with("pymp-");
    if dot_settings_of_a_launcher(p) {
        return true;
    }
    if dirs.iter().any(|c| session(c)) || comps.iter().any(|c| runtime(c)) {
        return true;
    }
    let in_tmp = matches!(dirs, ["tmp"] | ["var", "tmp"] | ["dev", "shm"]);
    if in_tmp && session(name) {
        return true;
    }
    if let Some(shm) = p.strip_prefix("/dev/shm/") {
        const SEGMENTS: [&str; 9] = [
            "vader_segment.",
            "sm_segment.",
            "ompi",
            "psm2_shm.",
            "nccl-",
            "gloo",
            "torch_",
            "sem.",
            "pmix",
        ];
        return SEGMENTS.iter().any(|s| shm.starts_with(s));
    }
    // Slurm's own files wherever its configuration puts them: the
    // configuration the client and the daemons read, and the batch script
    // slurmd spools for a job (`.../job00042/slurm_script`).
    const SLURM_CONFIGS: [&str; 10] = [
        "slurm.conf",
        "plugstack.conf",
        "cgroup.conf",
        "gres.conf",
        "topology.conf",
        "acct_gather.conf",
        "job_container.conf",
        "oci.conf",
        "helpers.conf",
        "slurm_script",
    ];
    if SLURM_CONFIGS.contains(&name) {
        return true;
    }
    const SLURM_TREES: [&str; 4] = ["/var/spool", "/var/lib", "/run", "/var/run"];
    SLURM_TREES.iter().any(|t| {
        p.strip_prefix(t)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|rest| rest.starts_with("slurm"))
    })
}

/// `~/.openmpi` and `~/.pmix`: the settings Open MPI and PMIx read from a
/// home directory.
fn dot_settings_of_a_launcher(p: &str) -> bool {
    p.split('/').any(|c| matches!(c, ".openmpi" | ".pmix"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beneath_goes_by_components_and_spelling() {
        assert!(beneath("/data/val/1.jpg", "/data/val"));
        assert!(beneath("/data/val/1.jpg", "/data/./val/"));
        assert!(beneath("/data/val", "/data/val"));
        assert!(!beneath("/data/validation/1.jpg", "/data/val"));
        assert!(beneath("/anything", "/"));
        assert!(beneath("/anything", "/x/.."));
    }

    #[test]
    fn forms() {
        assert_eq!(form_of("/"), Form::Root);
        assert_eq!(form_of("/x/.."), Form::Root);
        assert_eq!(form_of(""), Form::Empty);
        assert_eq!(form_of("rel/f"), Form::Relative);
        assert_eq!(form_of("pipe:[77]"), Form::Special);
        assert_eq!(form_of("socket:[9]"), Form::Special);
        assert_eq!(form_of("anon_inode:[eventfd]"), Form::Special);
        assert_eq!(form_of("/memfd:buf (deleted)"), Form::Special);
        assert_eq!(form_of("/proc/self/status"), Form::Kernel);
        assert_eq!(form_of("/sys/fs/cgroup/cpu.max"), Form::Kernel);
        assert_eq!(form_of("/dev/null"), Form::Device);
        assert_eq!(form_of("/dev/shm/torch_1"), Form::File);
        assert_eq!(form_of("/processed/x"), Form::File);
        assert_eq!(form_of("/data/f"), Form::File);
        assert_eq!(form_of("<frozen importlib._bootstrap>"), Form::Pseudo);
        assert_eq!(form_of("<string>"), Form::Pseudo);
        assert_eq!(
            form_of("/home/x/<frozen importlib._bootstrap_external>"),
            Form::Pseudo
        );
        assert_eq!(form_of("/data/<a>/f"), Form::Pseudo);
        assert_eq!(form_of("/data/a<b>"), Form::File);
        assert_eq!(Form::Pseudo.as_str(), "not_a_file");
    }

    #[test]
    fn launcher_files() {
        for p in [
            "/tmp/ompi.vm.0/pid.22978/pmix_dstor_ds12_22978/dstore_sm.lock",
            "/tmp/ompi.vm.0",
            "/scratch/tmp/ompi.host.1000/jf.0/0/sm_segment.host.0",
            "/tmp/openmpi-sessions-1000@host_0/x",
            "/tmp/pmix-12345",
            "/run/user/0/pmix.sock",
            "/dev/shm/vader_segment.host.1.0",
            "/dev/shm/sm_segment.host.0.1",
            "/dev/shm/ompi.host.1000",
            "/dev/shm/nccl-Ab12Cd",
            "/dev/shm/gloo_x",
            "/dev/shm/torch_123_456",
            "/dev/shm/sem.mp-abc",
            "/var/spool/slurmd/job00042/slurm_script",
            "/var/lib/slurm/slurmd/cred_state",
            "/run/slurm/conf/slurm.conf",
            "/var/run/slurmd.pid",
            "/tmp/torchelastic_abc/none_x/attempt_0/0/error.json",
            "/tmp/pymp-k2l3/listener-9x8y",
            "/tmp/pymp-k2l3",
            "/tmp//pymp-k2l3/./listener-1",
            // A cluster configured in a directory of its own.
            "/scratch/cluster/slurm.conf",
            "/scratch/cluster/spool/job00001/slurm_script",
            "/root/.openmpi/mca-params.conf",
            "/home/u/.pmix/components",
        ] {
            assert!(is_launcher_file(p), "{p}");
        }
        for p in [
            "/home/u/slurm-42.out",
            "/home/u/job/ompi.conf",
            "/home/u/job/slurm.conf.bak",
            "/dev/shm/x",
            "/dev/shm/data.bin",
            "/data/train/0001.npz",
            "/tmp/job/lock",
            "/var/lib/apt/lists/x",
            "/run/user/0/bus",
            "/venv/lib/python3.12/site-packages/lightning/fabric/plugins/environments/torchelastic.py",
            "/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix/pmix_mca_prm_slurm.so",
            "",
            "pipe:[3]",
        ] {
            assert!(!is_launcher_file(p), "{p}");
        }
    }
}
