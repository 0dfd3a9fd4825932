//! A real S3 store for a test: Ceph's RADOS Gateway on a one-node cluster
//! of its own (`tests/servers/rgw.py`: one monitor, one in-memory OSD, the
//! gateway on a free loopback port), which checks every request's SigV4
//! signature and time as a production store does. Two users: the one the
//! replay runs as, and another whose buckets the first may not open. The
//! cluster stops, every daemon with it, when the handle is dropped (or
//! when the test's process dies: the fixture stops at the end of its
//! standard input).

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::bins::{scratch, wait_for, workspace_root};
use crate::http::free_port;

/// The longest the cluster may take to answer (it takes 1 to 2 s here).
const START_LIMIT: Duration = Duration::from_secs(120);

/// The credentials of one of the store's users.
#[derive(Clone, Debug)]
pub struct Keys {
    pub access_key: String,
    pub secret_key: String,
}

pub struct RgwStore {
    child: Child,
    /// Held open: the fixture stops when it closes.
    stdin: Option<ChildStdin>,
    pub endpoint: String,
    pub user: Keys,
    pub other: Keys,
    /// Seconds from the fixture's start to the gateway's first answer.
    pub started_s: f64,
}

impl RgwStore {
    /// Starts a cluster of its own. `Err` (the fixture's words) where this
    /// machine lacks Ceph's packages or the cluster did not come up.
    pub fn start(name: &str) -> Result<RgwStore, String> {
        let dir = scratch(name);
        let log = std::fs::File::create(dir.join("rgw.py.log")).map_err(|e| e.to_string())?;
        let script = workspace_root().join("tests/servers/rgw.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .arg("--dir")
            .arg(dir.join("cluster"))
            .arg("--port")
            .arg(free_port().to_string())
            .arg("--timeout")
            .arg(START_LIMIT.as_secs().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("python3 {}: {e}", script.display()))?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let stdin = child.stdin.take();
        let line = rx
            .recv_timeout(START_LIMIT + Duration::from_secs(10))
            .unwrap_or_default();
        let said = || std::fs::read_to_string(dir.join("rgw.py.log")).unwrap_or_default();
        let v: serde_json::Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(_) => {
                drop(stdin);
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the Ceph RADOS Gateway did not start (`cargo xtask setup` installs \
                     radosgw, ceph-mon and ceph-osd): {}",
                    said().trim()
                ));
            }
        };
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        Ok(RgwStore {
            child,
            stdin,
            endpoint: s("endpoint"),
            user: Keys {
                access_key: s("access_key"),
                secret_key: s("secret_key"),
            },
            other: Keys {
                access_key: s("other_access_key"),
                secret_key: s("other_secret_key"),
            },
            started_s: v["started_s"].as_f64().unwrap_or(f64::NAN),
        })
    }

    /// The environment a client needs to reach the store as `keys`.
    pub fn env_as<'c>(&self, cmd: &'c mut Command, keys: &Keys) -> &'c mut Command {
        cmd.env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("AWS_ACCESS_KEY_ID", &keys.access_key)
            .env("AWS_SECRET_ACCESS_KEY", &keys.secret_key)
            .env("AWS_REGION", "us-east-1")
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_SESSION_TOKEN")
    }

    /// The environment of the replay's user.
    pub fn env<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        self.env_as(cmd, &self.user)
    }

    /// `tests/servers/s3_admin.py` as `keys`: its standard output.
    fn admin(&self, keys: &Keys, args: &[&str]) -> String {
        let out = Command::new("python3")
            .arg(workspace_root().join("tests/servers/s3_admin.py"))
            .args([&self.endpoint, &keys.access_key, &keys.secret_key])
            .args(args)
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "s3_admin.py {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Makes `bucket`, owned by `keys`' user.
    pub fn create_bucket_as(&self, keys: &Keys, bucket: &str) {
        self.admin(keys, &["create-bucket", bucket]);
    }

    pub fn create_bucket(&self, bucket: &str) {
        self.create_bucket_as(&self.user, bucket);
    }

    /// Every key beneath `prefix` with its size, sorted (the store's own
    /// listing, every page).
    pub fn objects(&self, bucket: &str, prefix: &str) -> Vec<(String, u64)> {
        let text = self.admin(&self.user, &["objects", bucket, prefix]);
        serde_json::from_str(&text).expect("a JSON list of [key, size]")
    }

    /// Multipart uploads begun and neither completed nor aborted.
    pub fn open_uploads(&self, bucket: &str) -> usize {
        let text = self.admin(&self.user, &["uploads", bucket]);
        text.trim().parse().expect("a count")
    }
}

impl Drop for RgwStore {
    fn drop(&mut self) {
        // The end of its input stops the fixture, which kills its daemons.
        drop(self.stdin.take());
        let stopped = wait_for(Duration::from_secs(20), || {
            self.child.try_wait().ok().flatten().is_some()
        });
        if !stopped {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
