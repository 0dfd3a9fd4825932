//! Telling a rank that is slow from one that is dead, for the files
//! mechanism: each process announces who it is (host, pid, start time, pid
//! namespace), and a rank waiting for another on the same node and in the
//! same pid namespace can see at once that its process is gone, instead of
//! waiting for the timeout (when the launcher does not end the run itself).

/// A process's identity that survives pid reuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub host: String,
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/PID/stat`, field 22).
    pub start: u64,
    /// Where a pid means the same process: see [`pid_space`].
    pub space: String,
}

/// Start time and state of a process, `None` when there is no such process.
pub fn process_state(pid: u32) -> Option<(u64, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command: state is the 1st, start time the 20th.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((start, state))
}

fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// This boot of this machine and this pid namespace (host names can repeat
/// across containers and machines).
pub fn pid_space() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let ns = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    format!("{} {ns}", boot.trim())
}

impl Identity {
    pub fn of_process(pid: u32) -> Identity {
        Identity {
            host: this_host(),
            pid,
            start: process_state(pid).map_or(0, |(s, _)| s),
            space: pid_space(),
        }
    }

    pub fn to_text(&self) -> String {
        format!(
            "{}\n{}\n{}\n{}\n",
            self.host, self.pid, self.start, self.space
        )
    }

    pub fn parse(text: &str) -> Option<Identity> {
        let mut lines = text.lines();
        Some(Identity {
            host: lines.next()?.to_string(),
            pid: lines.next()?.parse().ok()?,
            start: lines.next()?.parse().ok()?,
            space: lines.next()?.to_string(),
        })
    }

    /// `Some(description)` if this is a process of the pid space `here` that
    /// no longer runs (exited, killed, or a zombie waiting for its launcher).
    /// Processes of another node or namespace cannot be checked: `None`.
    pub fn lost(&self, here: &str) -> Option<String> {
        if self.space != here {
            return None;
        }
        match process_state(self.pid) {
            Some((s, state)) if s == self.start && state != 'Z' && state != 'X' => None,
            _ => Some(format!("pid {} on {}", self.pid, self.host)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_process_is_not_lost_and_an_exited_one_is() {
        let me = Identity::of_process(std::process::id());
        let back = Identity::parse(&me.to_text()).unwrap();
        assert_eq!(back, me);
        assert_eq!(me.lost(&pid_space()), None);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = Identity::of_process(child.id());
        child.wait().unwrap();
        assert!(gone.lost(&pid_space()).unwrap().starts_with("pid "));
        assert_eq!(gone.lost("another node"), None);
    }
}
