//! Starting the job so that not one of its syscalls escapes: the child is
//! forked, waits on a pipe until its pid is in the traced set, then drops
//! privileges (`--user`) and execs the command.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::{CollectError, CollectResult};

pub struct Job {
    pub pid: u32,
    gate: Option<OwnedFd>,
    exec_errors: OwnedFd,
    status: Option<i32>,
}

struct User {
    name: CString,
    uid: libc::uid_t,
    gid: libc::gid_t,
}

fn lookup_user(name: &str) -> CollectResult<User> {
    let cname =
        CString::new(name).map_err(|_| CollectError::Usage(format!("--user {name}: bad name")))?;
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
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
        name: cname,
        uid: pwd.pw_uid,
        gid: pwd.pw_gid,
    })
}

fn pipe() -> CollectResult<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(CollectError::Job(format!(
            "pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: both descriptors were just opened and are owned here alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Forks the job, held before exec until [`Job::release`].
pub fn spawn_gated(command: &[String], user: Option<&str>) -> CollectResult<Job> {
    let argv: Vec<CString> = command
        .iter()
        .map(|a| CString::new(a.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| CollectError::Usage("COMMAND contains a NUL byte".into()))?;
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let user = user.map(lookup_user).transpose()?;
    let (gate_r, gate_w) = pipe()?;
    let (err_r, err_w) = pipe()?;

    // SAFETY: the collector is single-threaded here; the child only makes
    // async-signal-safe calls before exec.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(CollectError::Job(format!(
            "fork: {}",
            std::io::Error::last_os_error()
        )));
    }
    if pid == 0 {
        // SAFETY: in the child; every call below is async-signal-safe.
        unsafe {
            child(
                gate_r.as_raw_fd(),
                err_w.as_raw_fd(),
                user.as_ref(),
                &argv_ptrs,
            )
        }
    }
    drop(gate_r);
    drop(err_w);
    Ok(Job {
        pid: pid as u32,
        gate: Some(gate_w),
        exec_errors: err_r,
        status: None,
    })
}

/// Reports `step` and errno on the error pipe and exits.
unsafe fn fail(err_fd: i32, step: u8) -> ! {
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    let msg = [step, errno as u8, (errno >> 8) as u8];
    unsafe {
        libc::write(err_fd, msg.as_ptr().cast(), msg.len());
        libc::_exit(127)
    }
}

unsafe fn child(gate: i32, err_fd: i32, user: Option<&User>, argv: &[*const libc::c_char]) -> ! {
    unsafe {
        let mut byte = 0u8;
        // Wait until the parent has put this pid in the traced set.
        while libc::read(gate, (&mut byte as *mut u8).cast(), 1) < 0 {}
        if let Some(u) = user {
            if libc::initgroups(u.name.as_ptr(), u.gid) != 0 || libc::setgid(u.gid) != 0 {
                fail(err_fd, 1);
            }
            if libc::setuid(u.uid) != 0 {
                fail(err_fd, 2);
            }
        }
        libc::execvp(argv[0], argv.as_ptr());
        fail(err_fd, 3)
    }
}

impl Job {
    /// Lets the child exec; fails if it could not.
    pub fn release(&mut self, command: &str) -> CollectResult<()> {
        let gate = self.gate.take().expect("released once");
        // SAFETY: one byte from a valid buffer.
        unsafe { libc::write(gate.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        drop(gate);
        let mut msg = [0u8; 3];
        // EOF (exec succeeded, the CLOEXEC pipe closed) or a failure report.
        // SAFETY: reads into a local buffer.
        let n = unsafe { libc::read(self.exec_errors.as_raw_fd(), msg.as_mut_ptr().cast(), 3) };
        if n == 3 {
            let errno = std::io::Error::from_raw_os_error(msg[1] as i32 | (msg[2] as i32) << 8);
            let step = match msg[0] {
                1 => "cannot switch group",
                2 => "cannot switch user",
                _ => "cannot run",
            };
            let _ = self.wait_blocking();
            return Err(CollectError::Job(format!("{command}: {step}: {errno}")));
        }
        Ok(())
    }

    /// The job's exit status as a shell would report it, once it has exited.
    pub fn try_wait(&mut self) -> Option<i32> {
        if self.status.is_none() {
            let mut status = 0;
            // SAFETY: waits for our own child only.
            let r = unsafe { libc::waitpid(self.pid as i32, &mut status, libc::WNOHANG) };
            if r == self.pid as i32 {
                self.status = Some(shell_status(status));
            }
        }
        self.status
    }

    fn wait_blocking(&mut self) -> i32 {
        let mut status = 0;
        // SAFETY: waits for our own child only.
        unsafe { libc::waitpid(self.pid as i32, &mut status, 0) };
        let s = shell_status(status);
        self.status = Some(s);
        s
    }

    pub fn signal(&self, sig: i32) {
        if self.status.is_none() {
            // SAFETY: signals our own child.
            unsafe { libc::kill(self.pid as i32, sig) };
        }
    }
}

/// Exit code, or 128 + signal number for a job killed by a signal.
fn shell_status(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    }
}
