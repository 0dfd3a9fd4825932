//! A real S3 API server for a test, in its own process: moto's server
//! behind `tests/servers/s3.py`, which counts what it served (the bytes of
//! every response body, by method) and can answer with 503 SlowDown on
//! demand. Started on a free port, stopped when dropped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::bins::{wait_for, workspace_root};
use crate::http::{free_port, get};

pub struct S3Server {
    child: Child,
    pub addr: String,
}

/// The credentials the tests use (the server takes any).
const KEY_ID: &str = "iorepro-test";
const SECRET: &str = "iorepro-test-secret";

impl S3Server {
    /// Starts the server; `args` as `tests/servers/s3.py` takes them
    /// (`--fail-every N`). `Err` when this machine lacks moto's server.
    pub fn start(args: &[&str]) -> Result<S3Server, String> {
        let port = free_port();
        let script = workspace_root().join("tests/servers/s3.py");
        let child = Command::new("python3")
            .arg(&script)
            .arg(port.to_string())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("python3 {}: {e}", script.display()))?;
        let mut server = S3Server {
            child,
            addr: format!("127.0.0.1:{port}"),
        };
        let up = wait_for(Duration::from_secs(30), || {
            get(&server.addr, "/__served").is_ok()
                || server.child.try_wait().ok().flatten().is_some()
        });
        if !up || server.child.try_wait().ok().flatten().is_some() {
            return Err(
                "the S3 test server did not start (moto's server, from `cargo xtask setup`)".into(),
            );
        }
        Ok(server)
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The environment a client needs to reach this server.
    pub fn env<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.env("AWS_ENDPOINT_URL", self.endpoint())
            .env("AWS_ACCESS_KEY_ID", KEY_ID)
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .env("AWS_REGION", "us-east-1")
            .env_remove("AWS_PROFILE")
    }

    /// One request: the status and the body.
    fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).expect("S3 test server");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            body.len()
        )
        .unwrap();
        s.write_all(body).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw).to_string();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_string();
        (status, body)
    }

    pub fn create_bucket(&self, bucket: &str) {
        let (status, body) = self.request("PUT", &format!("/{bucket}"), b"");
        assert_eq!(status, 200, "creating bucket {bucket}: {body}");
    }

    /// Puts an object of `size` bytes (a foreign object, in the tests).
    pub fn put(&self, bucket: &str, key: &str, size: usize) {
        let (status, body) = self.request("PUT", &format!("/{bucket}/{key}"), &vec![7u8; size]);
        assert_eq!(status, 200, "putting {key}: {body}");
    }

    /// Every key beneath `prefix` with its size, sorted (the server's own
    /// listing, every page).
    pub fn objects(&self, bucket: &str, prefix: &str) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let path = format!(
                "/{bucket}?list-type=2&prefix={}{token}",
                crate::http::encode(prefix)
            );
            let (status, body) = self.request("GET", &path, b"");
            assert_eq!(status, 200, "listing {bucket}/{prefix}: {body}");
            for item in body.split("<Contents>").skip(1) {
                let field = |name: &str| {
                    let open = format!("<{name}>");
                    let start = item.find(&open).expect("field") + open.len();
                    let end = item[start..].find('<').expect("field end") + start;
                    item[start..end].to_string()
                };
                out.push((field("Key"), field("Size").parse().expect("size")));
            }
            match body
                .split_once("<NextContinuationToken>")
                .and_then(|(_, rest)| rest.split_once('<'))
            {
                Some((t, _)) if body.contains("<IsTruncated>true") => {
                    token = format!("&continuation-token={}", crate::http::encode(t));
                }
                _ => break,
            }
        }
        out.sort();
        out
    }

    /// Multipart uploads begun and neither completed nor aborted.
    pub fn open_uploads(&self, bucket: &str) -> usize {
        let (status, body) = self.request("GET", &format!("/{bucket}?uploads"), b"");
        assert_eq!(status, 200, "listing uploads: {body}");
        body.matches("<Upload>").count()
    }

    /// What the server counted: `requests`, `body_bytes` (served) and
    /// `received_bytes` by method, and the `slowdowns` it answered.
    pub fn served(&self) -> serde_json::Value {
        let text = get(&self.addr, "/__served").expect("the server's figures");
        serde_json::from_str(&text).expect("JSON figures")
    }

    /// From now on, every request (of `method`, if given) after the next
    /// `n` is answered 503 SlowDown.
    pub fn fail_after(&self, n: u64, method: Option<&str>) {
        let only = method.map_or(String::new(), |m| format!("&method={m}"));
        get(&self.addr, &format!("/__fail?after={n}{only}")).expect("arming the fault");
    }
}

impl S3Server {
    /// Answers every request again.
    pub fn heal(&self) {
        get(&self.addr, "/__heal").expect("healing the server");
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every regular file under `dir`, as keys relative to it with sizes, sorted.
pub fn files_as_keys(dir: &Path, prefix: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = crate::job::files_under(dir)
        .into_iter()
        .map(|(p, n)| {
            let rel = p
                .strip_prefix(dir)
                .expect("beneath")
                .to_string_lossy()
                .to_string();
            (format!("{prefix}/{rel}"), n)
        })
        .collect();
    out.sort();
    out
}
