//! The files a launcher or runtime makes rather than the job: what a
//! replay leaves out, since the launcher, not the job, makes them.

use super::names::looks_like_code;
use crate::paths::spelled;

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
