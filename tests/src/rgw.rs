//! A real S3 store for a test: Ceph's RADOS Gateway on a one-node cluster
//! of its own (`tests/servers/rgw.py`: one monitor, one in-memory OSD, the
//! gateway on a free loopback port), which checks every request's SigV4
//! signature and time as a production store does. Two users: the one the
//! replay runs as, and another whose buckets the first may not open. The
//! cluster stops, every daemon with it, when the handle is dropped (or
//! when the test's process dies: the fixture stops at the end of its
//! standard input). What the gateway served, it says itself, in its log of
//! operations ([`RgwStore::served`]).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use crate::bins::{scratch, wait_for, workspace_root};
use crate::http::{free_port, get};

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
    /// The same gateway over TLS (`https://`), its certificate its own.
    pub tls_endpoint: String,
    /// The certificate that verifies [`RgwStore::tls_endpoint`].
    pub ca_bundle: PathBuf,
    pub user: Keys,
    pub other: Keys,
    /// Seconds from the fixture's start to the gateway's first answer.
    pub started_s: f64,
    /// The gateway's log of operations: a JSON line per request served.
    ops_log: PathBuf,
    /// How many times `served` has asked; each asks with a name of its own.
    asked: AtomicU64,
}

/// What the gateway served for one kind of request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub count: u64,
    /// Answered with a status of 400 or above.
    pub failed: u64,
    /// Body bytes sent: an object's data, a listing, an error document.
    pub sent: u64,
    /// Body bytes taken: an object's data or a part's.
    pub received: u64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.count += other.count;
        self.failed += other.failed;
        self.sent += other.sent;
        self.received += other.received;
    }
}

/// What the gateway served, by request: its HTTP method and the gateway's
/// own name for the operation, as `GET get_obj` (an object's data, whole
/// or a range), `HEAD get_obj`, `PUT put_obj` (an object, or a part of a
/// multipart upload), `POST init_multipart`, `POST complete_multipart`,
/// `GET list_bucket`, `HEAD stat_bucket`, `DELETE delete_obj`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Served(pub BTreeMap<String, Tally>);

impl Served {
    /// The tally of one request, as `"GET get_obj"`; zero if none was served.
    pub fn of(&self, request: &str) -> Tally {
        self.0.get(request).copied().unwrap_or_default()
    }

    /// What was served after `before` was.
    pub fn since(&self, before: &Served) -> Served {
        let mut out = BTreeMap::new();
        for (request, now) in &self.0 {
            let was = before.of(request);
            let grew = Tally {
                count: now.count - was.count,
                failed: now.failed - was.failed,
                sent: now.sent - was.sent,
                received: now.received - was.received,
            };
            if grew != Tally::default() {
                out.insert(request.clone(), grew);
            }
        }
        Served(out)
    }

    /// Every request together.
    pub fn total(&self) -> Tally {
        let mut all = Tally::default();
        for t in self.0.values() {
            all.add(t);
        }
        all
    }
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
            tls_endpoint: s("tls_endpoint"),
            ca_bundle: PathBuf::from(s("ca_bundle")),
            user: Keys {
                access_key: s("access_key"),
                secret_key: s("secret_key"),
            },
            other: Keys {
                access_key: s("other_access_key"),
                secret_key: s("other_secret_key"),
            },
            started_s: v["started_s"].as_f64().unwrap_or(f64::NAN),
            ops_log: PathBuf::from(s("ops_log")),
            asked: AtomicU64::new(0),
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

    /// The environment of the replay's user, over TLS.
    pub fn env_tls<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        self.env(cmd)
            .env("AWS_ENDPOINT_URL", &self.tls_endpoint)
            .env("AWS_CA_BUNDLE", &self.ca_bundle)
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

    /// Puts an object of `size` bytes (one that is not the replay's).
    pub fn put(&self, bucket: &str, key: &str, size: usize) {
        self.admin(&self.user, &["put", bucket, key, &size.to_string()]);
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

    /// Everything the gateway has served since it started, from its log of
    /// operations (the requests that made the store's buckets and listed
    /// them for a test included: compare two with [`Served::since`]).
    ///
    /// The gateway logs each request as it ends, from the thread that
    /// served it, after the answer has gone: a request answered before
    /// another was sent may be logged after it. So this asks the gateway
    /// for a bucket no one has (the marker), then for another (the fence),
    /// and, once the fence is logged, tallies every request the log holds
    /// that began before the marker. Call it when nothing else is asking.
    pub fn served(&self) -> Served {
        let n = self.asked.fetch_add(1, Ordering::Relaxed);
        let marker = format!("iorepro-served-{n}");
        let fence = format!("iorepro-fence-{n}");
        let addr = self.endpoint.trim_start_matches("http://");
        // Each is answered 404 NoSuchBucket, which is all it is for.
        let _ = get(addr, &format!("/{marker}"));
        // Logged a few milliseconds after the answer at most: the fence,
        // sent a tenth of a second later, is logged after them all.
        std::thread::sleep(Duration::from_millis(100));
        let _ = get(addr, &format!("/{fence}"));
        let mut served = None;
        let logged = wait_for(Duration::from_secs(10), || {
            let text = std::fs::read_to_string(&self.ops_log).unwrap_or_default();
            served = tally_begun_before(&text, &marker, &fence);
            served.is_some()
        });
        assert!(
            logged,
            "the gateway did not log the requests for buckets {marker} and {fence} in {}",
            self.ops_log.display()
        );
        served.expect("tallied")
    }
}

/// The ops log's requests that began before the one for bucket `marker`,
/// tallied (the markers and fences left out); `None` until the request
/// for bucket `fence` is logged.
fn tally_begun_before(ops_log: &str, marker: &str, fence: &str) -> Option<Served> {
    // One JSON object a request, most on a line of their own but some run
    // together (`}{`): read as a stream of objects. The last may be half
    // written; the fence's is whole when found, and every one before it.
    let mut entries = Vec::new();
    let mut fenced = false;
    for entry in serde_json::Deserializer::from_str(ops_log).into_iter::<serde_json::Value>() {
        let Ok(entry) = entry else {
            break;
        };
        if entry["bucket"] == fence {
            fenced = true;
            break;
        }
        entries.push(entry);
    }
    if !fenced {
        return None;
    }
    // Each entry's `time` is when its request began, written in one width
    // (`2026-11-28T04:25:43.699838Z`): as strings, they sort as times.
    let began = |entry: &serde_json::Value| entry["time"].as_str().unwrap_or_default().to_owned();
    let marked = began(entries.iter().find(|e| e["bucket"] == marker)?);
    let mut served = Served::default();
    for entry in &entries {
        let bucket = entry["bucket"].as_str().unwrap_or_default();
        if bucket.starts_with("iorepro-served-") || bucket.starts_with("iorepro-fence-") {
            continue;
        }
        if began(entry) >= marked {
            continue;
        }
        let method = entry["uri"]
            .as_str()
            .and_then(|uri| uri.split(' ').next())
            .unwrap_or_default();
        let operation = entry["operation"].as_str().unwrap_or_default();
        let status: u16 = entry["http_status"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        served
            .0
            .entry(format!("{method} {operation}"))
            .or_default()
            .add(&Tally {
                count: 1,
                failed: u64::from(status >= 400),
                sent: entry["bytes_sent"].as_u64().unwrap_or(0),
                received: entry["bytes_received"].as_u64().unwrap_or(0),
            });
    }
    Some(served)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn line(bucket: &str, began: &str, operation: &str, received: u64) -> String {
        serde_json::json!({
            "bucket": bucket, "time": began, "operation": operation,
            "uri": format!("PUT /{bucket}/k HTTP/1.1"), "http_status": "200",
            "bytes_sent": 0, "bytes_received": received,
        })
        .to_string()
    }

    #[test]
    fn a_request_logged_after_the_marker_but_begun_before_it_counts() {
        // As the gateway wrote it once: a PUT answered before the marker
        // was sent, logged after it.
        let log = [
            line("bench", "2026-11-28T04:25:43.600000Z", "put_obj", 10),
            line(
                "iorepro-served-5",
                "2026-11-28T04:25:43.711838Z",
                "list_bucket",
                0,
            ),
            line("bench", "2026-11-28T04:25:43.699838Z", "put_obj", 9254),
        ]
        .join("\n");
        assert!(tally_begun_before(&log, "iorepro-served-5", "iorepro-fence-5").is_none());
        let fenced = format!(
            "{log}{}",
            line(
                "iorepro-fence-5",
                "2026-11-28T04:25:43.812000Z",
                "list_bucket",
                0
            )
        );
        let served = tally_begun_before(&fenced, "iorepro-served-5", "iorepro-fence-5").unwrap();
        assert_eq!(served.of("PUT put_obj").count, 2);
        assert_eq!(served.of("PUT put_obj").received, 9264);
        // A later request, begun after the marker, is the next tally's.
        let later = format!(
            "{fenced}\n{}\n{}",
            line("bench", "2026-11-28T04:25:44.000000Z", "put_obj", 7),
            line(
                "iorepro-fence-6",
                "2026-11-28T04:25:44.100000Z",
                "list_bucket",
                0
            )
        );
        let served = tally_begun_before(&later, "iorepro-served-5", "iorepro-fence-5").unwrap();
        assert_eq!(served.of("PUT put_obj").received, 9264);
    }
}
