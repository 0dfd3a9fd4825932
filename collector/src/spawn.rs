//! Starting the job so that not one of its syscalls escapes: std's
//! `Command` forks the child, which sends its pid back, waits on a pipe
//! until that pid is in the traced set, then drops privileges (`--user`)
//! before `Command` execs the command. `Command::spawn` returns only once
//! the child has exec'd, so it runs on a thread of its own until
//! [`Job::release`].

use std::ffi::{CStr, CString};
use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::thread::JoinHandle;

use rustix::io::Errno;
use rustix::process::{Gid, Pid, Signal, Uid};

use crate::error::{CollectError, CollectResult};

pub struct Job {
    pub pid: u32,
    gate: Option<PipeWriter>,
    /// The thread in `Command::spawn`, until the child has exec'd or failed.
    starting: Option<JoinHandle<std::io::Result<Child>>>,
    child: Option<Child>,
    /// The step the child failed at before exec ([`Step`]), if one did.
    failed_step: PipeReader,
    status: Option<i32>,
}

struct User {
    uid: Uid,
    gid: Gid,
    /// The supplementary groups `initgroups` would set.
    groups: Vec<Gid>,
}

/// What the child was doing when it failed, reported on its step pipe.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Step {
    SwitchGroup = 1,
    SwitchUser = 2,
}

fn lookup_user(name: &str) -> CollectResult<User> {
    let cname =
        CString::new(name).map_err(|_| CollectError::Usage(format!("--user {name}: bad name")))?;
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // The user database (NSS: files, LDAP, SSSD) is the C library's: neither
    // rustix nor std reads it.
    // SAFETY: buffers sized as passed; result points into them or is null.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() {
        return Err(CollectError::Usage(format!("--user {name}: no such user")));
    }
    Ok(User {
        uid: Uid::from_raw(pwd.pw_uid),
        gid: Gid::from_raw(pwd.pw_gid),
        groups: groups_of(&cname, pwd.pw_gid),
    })
}

/// The groups of user `name` with primary group `gid`, as `initgroups`
/// sets them: read here, before the fork, as the child makes
/// async-signal-safe calls only (a group lookup may not be one).
fn groups_of(name: &CStr, gid: libc::gid_t) -> Vec<Gid> {
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut n = groups.len() as libc::c_int;
        // The group database (NSS) is the C library's, as for getpwnam_r.
        // SAFETY: `groups` has room for `n` ids; `n` comes back as the count.
        let found = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        if found >= 0 {
            groups.truncate(n as usize);
            return groups.into_iter().map(Gid::from_raw).collect();
        }
        // Too few places: `n` is how many there are.
        let more = (n as usize).max(groups.len() * 2);
        groups.resize(more, 0);
    }
}

fn pipe() -> CollectResult<(PipeReader, PipeWriter)> {
    // Both ends close on exec: the job inherits neither.
    std::io::pipe().map_err(|e| CollectError::Job(format!("pipe: {e}")))
}

/// Forks the job, held before exec until [`Job::release`].
pub fn spawn_gated(command: &[String], user: Option<&str>) -> CollectResult<Job> {
    if command.iter().any(|a| a.as_bytes().contains(&0)) {
        return Err(CollectError::Usage("COMMAND contains a NUL byte".into()));
    }
    let (program, args) = command
        .split_first()
        .ok_or_else(|| CollectError::Usage("no COMMAND".into()))?;
    let user = user.map(lookup_user).transpose()?;
    let (pid_r, pid_w) = pipe()?;
    let (gate_r, gate_w) = pipe()?;
    let (step_r, step_w) = pipe()?;

    let mut cmd = Command::new(program);
    cmd.args(args);
    // SAFETY: the closure runs in the child between fork and exec; it makes
    // raw system calls only (no allocation, no lock), async-signal-safe.
    unsafe {
        cmd.pre_exec(move || before_exec(&pid_w, &gate_r, &step_w, user.as_ref()));
    }
    let starting = std::thread::Builder::new()
        .name("job-start".into())
        .spawn(move || cmd.spawn())
        .map_err(|e| CollectError::Job(format!("fork: {e}")))?;
    let mut pid = [0u8; 4];
    if (&pid_r).read_exact(&mut pid).is_err() {
        // No child to report its pid (the spawn's end of the pipe closed):
        // the spawn's error says why.
        let e = match joined(starting) {
            Err(e) => e,
            Ok(_) => std::io::Error::other("the job did not report its pid"),
        };
        return Err(CollectError::Job(format!("fork: {e}")));
    }
    Ok(Job {
        pid: u32::from_ne_bytes(pid),
        gate: Some(gate_w),
        starting: Some(starting),
        child: None,
        failed_step: step_r,
        status: None,
    })
}

/// The child, before exec: sends its pid, waits until the parent has put
/// it in the traced set (a byte, or the parent's end closed), then switches
/// user. A failure is reported on `step_w`, and as errno through `Command`.
fn before_exec(
    pid_w: &PipeWriter,
    gate: &PipeReader,
    step_w: &PipeWriter,
    user: Option<&User>,
) -> std::io::Result<()> {
    let pid = rustix::process::getpid().as_raw_pid() as u32;
    rustix::io::write(pid_w, &pid.to_ne_bytes())?;
    let mut byte = [0u8];
    while rustix::io::read(gate, &mut byte).is_err() {}
    if let Some(u) = user {
        rustix::thread::set_thread_groups(&u.groups)
            .and_then(|()| rustix::thread::set_thread_gid(u.gid))
            .map_err(|e| failed(step_w, Step::SwitchGroup, e))?;
        rustix::thread::set_thread_uid(u.uid).map_err(|e| failed(step_w, Step::SwitchUser, e))?;
    }
    Ok(())
}

/// Reports `step` on the step pipe; `errno` goes back through `Command`.
fn failed(step_w: &PipeWriter, step: Step, errno: Errno) -> std::io::Error {
    let _ = rustix::io::write(step_w, &[step as u8]);
    errno.into()
}

/// The spawn's result; a panic in it goes on here.
fn joined(starting: JoinHandle<std::io::Result<Child>>) -> std::io::Result<Child> {
    starting
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

impl Job {
    /// Lets the child exec; fails if it could not.
    pub fn release(&mut self, command: &str) -> CollectResult<()> {
        let gate = self.gate.take().expect("released once");
        let _ = (&gate).write(&[1u8]);
        drop(gate);
        // Ok once exec succeeded; else the errno of the step that failed.
        match joined(self.starting.take().expect("released once")) {
            Ok(child) => {
                self.child = Some(child);
                Ok(())
            }
            Err(errno) => {
                let mut step = [0u8];
                let step = match (&self.failed_step).read(&mut step) {
                    Ok(1) if step[0] == Step::SwitchGroup as u8 => "cannot switch group",
                    Ok(1) if step[0] == Step::SwitchUser as u8 => "cannot switch user",
                    _ => "cannot run",
                };
                // As a shell reports a command it could not run.
                self.status = Some(127);
                Err(CollectError::Job(format!("{command}: {step}: {errno}")))
            }
        }
    }

    /// The job's exit status as a shell would report it, once it has exited.
    pub fn try_wait(&mut self) -> Option<i32> {
        if self.status.is_none() {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.status = Some(shell_status(status));
            }
        }
        self.status
    }

    pub fn signal(&self, sig: i32) {
        if self.status.is_none() {
            if let (Some(pid), Some(sig)) =
                (Pid::from_raw(self.pid as i32), Signal::from_named_raw(sig))
            {
                let _ = rustix::process::kill_process(pid, sig);
            }
        }
    }
}

/// Exit code, or 128 + signal number for a job killed by a signal.
fn shell_status(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    fn waited(job: &mut Job) -> i32 {
        loop {
            if let Some(status) = job.try_wait() {
                return status;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[test]
    fn the_job_waits_at_the_gate_then_runs_and_its_status_is_a_shells() {
        let mut job = spawn_gated(&command(&["sh", "-c", "exit 3"]), None).unwrap();
        // Held before exec: still this test's program, not the shell.
        let exe = std::fs::read_link(format!("/proc/{}/exe", job.pid)).unwrap();
        assert_eq!(exe, std::env::current_exe().unwrap());
        assert_eq!(job.try_wait(), None);
        job.release("sh").unwrap();
        assert_eq!(waited(&mut job), 3);

        let mut job = spawn_gated(&command(&["sleep", "30"]), None).unwrap();
        job.release("sleep").unwrap();
        job.signal(libc::SIGTERM);
        assert_eq!(waited(&mut job), 128 + libc::SIGTERM);
    }

    #[test]
    fn a_command_that_cannot_run_says_so() {
        let cmd = command(&["/nonexistent/iorepro-job"]);
        let mut job = spawn_gated(&cmd, None).unwrap();
        let err = job.release(&cmd[0]).unwrap_err().to_string();
        let enoent = "No such file or directory (os error 2)";
        assert_eq!(err, format!("{}: cannot run: {enoent}", cmd[0]));
        assert_eq!(job.try_wait(), Some(127));
        let nul = spawn_gated(&command(&["a\0b"]), None).err().unwrap();
        assert_eq!(nul.to_string(), "COMMAND contains a NUL byte");
    }

    #[test]
    fn the_job_runs_as_the_user_named() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: switching user needs root");
            return;
        }
        let Ok(user) = lookup_user("nobody") else {
            eprintln!("skipped: no user nobody here");
            return;
        };
        let check = format!(
            "test \"$(id -u) $(id -g)\" = \"{} {}\"",
            user.uid.as_raw(),
            user.gid.as_raw()
        );
        let mut job = spawn_gated(&command(&["sh", "-c", &check]), Some("nobody")).unwrap();
        job.release("sh").unwrap();
        assert_eq!(waited(&mut job), 0);
    }
}
