//! The `--metrics-addr` endpoint: `GET /metrics` answers with the registry
//! encoded at that moment (OpenMetrics text, which Prometheus asks for
//! first); anything else gets 404 or 405.
//!
//! It runs on a single-threaded tokio runtime in a thread of its own, so
//! scrapes never take time from the capture or replay threads beyond the
//! moment their figures are read. The listening socket is bound before
//! `start` returns: an address in use fails the run at once, not silently.

use std::net::{SocketAddr, TcpListener as StdListener, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::error::TelemetryError;

/// What Prometheus asks for first; `prometheus-client` writes this format.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// A request head larger than this is not a scrape.
const MAX_REQUEST: usize = 16 << 10;
/// A connection that has not sent its request by then is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

pub struct MetricsServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `addr` (`HOST:PORT`; port 0 picks a free one) and serves
    /// `registry` until dropped.
    pub fn start(addr: &str, registry: Registry) -> Result<MetricsServer, TelemetryError> {
        let bad = |reason: String| TelemetryError::Address {
            addr: addr.to_string(),
            reason,
        };
        let resolved: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| bad(format!("not a HOST:PORT address ({e})")))?
            .collect();
        let listener = StdListener::bind(&resolved[..]).map_err(|e| bad(e.to_string()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| bad(e.to_string()))?;
        let local = listener.local_addr().map_err(|e| bad(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(TelemetryError::Runtime)?;
        let registry = Arc::new(registry);
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = TcpListener::from_std(listener) else {
                        return;
                    };
                    let accepting = tokio::spawn(accept(listener, registry));
                    let _ = stopped.await;
                    accepting.abort();
                });
            })
            .map_err(TelemetryError::Runtime)?;
        Ok(MetricsServer {
            addr: local,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on (the port chosen, when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn accept(listener: TcpListener, registry: Arc<Registry>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(answer(stream, registry.clone()));
            }
            // Out of descriptors, say: wait rather than spin.
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn answer(mut stream: TcpStream, registry: Arc<Registry>) {
    let Ok(Some(head)) = tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut stream)).await else {
        return;
    };
    let (status, content_type, body) = respond(&head, &registry);
    let with_body = !head.starts_with("HEAD ");
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if with_body {
        out.extend_from_slice(body.as_bytes());
    }
    let _ = stream.write_all(&out).await;
    let _ = stream.shutdown().await;
}

/// The request head (up to the blank line), or `None` for a connection that
/// closed early or sent too much.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 || head.len() + n > MAX_REQUEST {
            return None;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// Status line, content type and body for a request head.
fn respond(head: &str, registry: &Registry) -> (&'static str, &'static str, String) {
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let text = "text/plain; charset=utf-8";
    if method != "GET" && method != "HEAD" {
        return ("405 Method Not Allowed", text, "only GET /metrics\n".into());
    }
    if path != "/metrics" {
        return (
            "404 Not Found",
            text,
            "the figures are at /metrics\n".into(),
        );
    }
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, registry) {
        Ok(()) => ("200 OK", CONTENT_TYPE, body),
        Err(_) => (
            "500 Internal Server Error",
            text,
            "encoding failed\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_the_registry_and_nothing_else() {
        let mut registry = Registry::default();
        let c = prometheus_client::metrics::counter::Counter::<u64>::default();
        c.inc_by(41);
        registry.register("probe", "A counter.", c);
        let server = MetricsServer::start("127.0.0.1:0", registry).unwrap();
        let addr = server.local_addr();
        let ok = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("probe_total 41\n"), "{ok}");
        assert!(ok.contains(CONTENT_TYPE));
        let missing = get(addr, "GET / HTTP/1.1\r\n\r\n");
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        let post = get(addr, "POST /metrics HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        // The port is taken while the server runs, and free once it is dropped.
        assert!(MetricsServer::start(&addr.to_string(), Registry::default()).is_err());
        drop(server);
        assert!(MetricsServer::start(&addr.to_string(), Registry::default()).is_ok());
        assert!(MetricsServer::start("nowhere", Registry::default()).is_err());
    }
}
