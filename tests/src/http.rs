//! A plain HTTP/1.1 GET over a TCP socket: enough to scrape an endpoint or
//! ask Prometheus's HTTP API, without an HTTP client in the tests.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// `GET path` from `addr` (`HOST:PORT`); the body when the status is 200.
pub fn get(addr: &str, path: &str) -> Result<String, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("{addr}: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .map_err(|e| format!("{addr}: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(format!("GET {path}: {}", head.lines().next().unwrap_or("")));
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok(dechunk(body));
    }
    Ok(body.to_string())
}

/// A chunked body, joined.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Percent-encodes a query parameter (a PromQL expression).
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A TCP port free now on every local address, for a server the test
/// starts next.
///
/// The port lies below the kernel's ephemeral range, so no client
/// connection (srun's, slurmd's, an S3 client's) can take it between now
/// and the server's bind: a port the kernel handed out for a moment
/// (`bind(":0")`) could be, and torch.distributed's rendezvous failed on
/// that with EADDRINUSE. Each call in a process gets a port of its own, so
/// tests running side by side never share one; processes start apart.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = ephemeral_low().clamp(2048, 32768);
    let first = 1024 + (low - 1024) / 3;
    let span = low - first;
    let start = std::process::id() * 97;
    for _ in 0..span {
        let port = first + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        if std::net::TcpListener::bind(("0.0.0.0", port as u16)).is_ok() {
            return port as u16;
        }
    }
    panic!("no free port between {first} and {low}");
}

/// The lowest port the kernel hands out on its own (32768 where unread).
fn ephemeral_low() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}
