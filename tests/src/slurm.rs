//! A single-node Slurm cluster for one test: munged (when none answers),
//! slurmctld and slurmd from Debian's slurm-wlm, run in the foreground from a
//! configuration in the test's scratch directory, and stopped when dropped.
//! `cargo xtask setup` installs the packages and munge's key.
//!
//! Tests that use it hold [`Cluster::lock`]: one cluster at a time.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::bins::{wait_for, workspace_root};
use crate::http::free_port;

pub struct Cluster {
    pub dir: PathBuf,
    pub conf: PathBuf,
    /// Daemons this cluster started, stopped in reverse order.
    daemons: Vec<(&'static str, Child)>,
}

/// Why a Slurm test cannot run here, or `None`.
fn missing() -> Option<String> {
    if !iorepro_format::host::is_root() {
        return Some("not root: slurmd runs jobs as their users only as root".into());
    }
    for tool in ["slurmctld", "slurmd", "srun", "sbatch", "munged", "munge"] {
        let found = ["/usr/sbin", "/usr/bin"]
            .iter()
            .any(|d| Path::new(d).join(tool).exists());
        if !found {
            return Some(format!(
                "{tool} is not installed (apt packages slurm-wlm and munge; `cargo xtask setup`)"
            ));
        }
    }
    if !Path::new("/etc/munge/munge.key").exists() {
        return Some("/etc/munge/munge.key is missing (`cargo xtask setup` makes it)".into());
    }
    None
}

fn munge_answers() -> bool {
    Command::new("sh")
        .args(["-c", "munge -n | unmunge"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn short_hostname() -> String {
    let out = Command::new("hostname")
        .arg("-s")
        .output()
        .expect("hostname");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Cluster {
    /// Serialises the tests that start a cluster.
    pub fn lock() -> MutexGuard<'static, ()> {
        static LOCK: Mutex<()> = Mutex::new(());
        LOCK.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a cluster in `dir` with `extra` lines added to slurm.conf
    /// (a Prolog, say); `Err` says why Slurm cannot run here.
    pub fn start(dir: &Path, extra: &str) -> Result<Cluster, String> {
        if let Some(why) = missing() {
            return Err(why);
        }
        let host = short_hostname();
        for d in ["state", "spool", "log"] {
            std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
        }
        let mut cluster = Cluster {
            dir: dir.to_path_buf(),
            conf: dir.join("slurm.conf"),
            daemons: Vec::new(),
        };
        if !munge_answers() {
            // munged keeps its socket here, owned by its own user.
            let _ = Command::new("install")
                .args([
                    "-d",
                    "-o",
                    "munge",
                    "-g",
                    "munge",
                    "-m",
                    "0755",
                    "/run/munge",
                ])
                .status();
            let munged = Command::new("setpriv")
                .args(["--reuid", "munge", "--regid", "munge", "--clear-groups"])
                .args(["/usr/sbin/munged", "--foreground"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("starting munged: {e}"))?;
            cluster.daemons.push(("munged", munged));
            if !wait_for(Duration::from_secs(10), munge_answers) {
                return Err("munged did not answer within 10 s".into());
            }
        }
        let d = dir.display();
        let (ctld_port, slurmd_port) = (free_port(), free_port());
        let conf = format!(
            "ClusterName=iorepro\n\
             SlurmctldHost={host}(127.0.0.1)\n\
             SlurmctldPort={ctld_port}\n\
             SlurmdPort={slurmd_port}\n\
             AuthType=auth/munge\n\
             CredType=cred/munge\n\
             SlurmUser=root\n\
             SlurmdUser=root\n\
             StateSaveLocation={d}/state\n\
             SlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/slurmd.pid\n\
             SlurmctldLogFile={d}/log/slurmctld.log\n\
             SlurmdLogFile={d}/log/slurmd.log\n\
             # No cgroup plugins: this recipe must also work on hosts whose\n\
             # cgroup controllers are not Slurm's to use (containers, v1).\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\n\
             SchedulerType=sched/builtin\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_CPU\n\
             MpiDefault=none\n\
             ReturnToService=2\n\
             # 8 CPUs whatever the machine has, so 4-task steps fit anywhere.\n\
             SlurmdParameters=config_overrides\n\
             {extra}\n\
             NodeName={host} NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN\n\
             PartitionName=main Nodes={host} Default=YES MaxTime=INFINITE State=UP\n"
        );
        std::fs::write(&cluster.conf, conf).map_err(|e| e.to_string())?;
        for daemon in ["slurmctld", "slurmd"] {
            let child = Command::new(format!("/usr/sbin/{daemon}"))
                .arg("-D")
                .arg("-f")
                .arg(&cluster.conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("starting {daemon}: {e}"))?;
            cluster.daemons.push((daemon, child));
        }
        let idle = || {
            cluster
                .command("sinfo")
                .args(["-h", "-o", "%T"])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
        };
        if !wait_for(Duration::from_secs(30), idle) {
            return Err(format!(
                "the node did not come up within 30 s; slurmd's log:\n{}",
                std::fs::read_to_string(dir.join("log/slurmd.log")).unwrap_or_default()
            ));
        }
        Ok(cluster)
    }

    /// A Slurm client command (`srun`, `sbatch`...) for this cluster.
    pub fn command(&self, tool: &str) -> Command {
        let mut c = Command::new(tool);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    pub fn log(&self, daemon: &str) -> String {
        std::fs::read_to_string(self.dir.join("log").join(format!("{daemon}.log")))
            .unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        while let Some((_, mut child)) = self.daemons.pop() {
            // SAFETY: a signal to a child this cluster started and has not reaped.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Installs the prolog recipe of `deploy/slurm/` for a cluster in `root`:
/// its scripts, called through wrappers that point them at the settings
/// `env` (an `iorepro.env`; Slurm runs prologs with an environment of its
/// own). Returns the lines slurm.conf needs for them (the `extra` of
/// [`Cluster::start`]).
pub fn install_recipe(root: &Path, env: &str) -> String {
    let deploy = workspace_root().join("deploy/slurm");
    let conf = root.join("iorepro.env");
    std::fs::write(&conf, env).unwrap();
    let mut lines = String::new();
    for (key, script) in [
        ("Prolog", "prolog.sh"),
        ("Epilog", "epilog.sh"),
        ("TaskProlog", "task-prolog.sh"),
    ] {
        let wrapper = root.join(script);
        let text = format!(
            "#!/bin/bash\nexport IOREPRO_CONF={}\nexec {} \"$@\"\n",
            conf.display(),
            deploy.join(script).display()
        );
        std::fs::write(&wrapper, text).unwrap();
        let made = Command::new("chmod").arg("+x").arg(&wrapper).status();
        assert!(
            made.is_ok_and(|s| s.success()),
            "chmod {}",
            wrapper.display()
        );
        lines.push_str(&format!("{key}={}\n", wrapper.display()));
    }
    lines
}
