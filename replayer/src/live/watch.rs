//! Watching a replay from outside: `--status-interval` lines from a thread
//! of their own, and the `--metrics-addr` endpoint, both reading the ranks'
//! [`LiveRanks`]. At the end a last line (`"done": true`) gives the final
//! figures, and the endpoint stays up for `--metrics-linger` so a scraper
//! sees them too.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use iorepro_telemetry::LiveOptions;
use iorepro_telemetry::{MetricsServer, StatusSink};
use prometheus_client::registry::Registry;

use super::lines::status_line;
use super::metrics::ReplayFigures;
use super::{LiveRanks, Totals};
use crate::error::{ReplayError, ReplayResult};

type StopFlag = Arc<(Mutex<bool>, Condvar)>;

pub struct Watch {
    stop: StopFlag,
    lines: Option<JoinHandle<()>>,
    server: Option<MetricsServer>,
    linger: Duration,
}

/// The endpoint, kept serving the final figures until a deadline.
pub struct Lingering {
    server: Option<MetricsServer>,
    until: Instant,
}

impl std::fmt::Debug for Lingering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lingering")
            .field("serving", &self.server.as_ref().map(|s| s.local_addr()))
            .field("until", &self.until)
            .finish()
    }
}

impl Lingering {
    /// Waits out `--metrics-linger` (at once without an endpoint), then stops serving.
    pub fn wait(self) {
        if self.server.is_some() {
            std::thread::sleep(self.until.saturating_duration_since(Instant::now()));
        }
    }
}

/// `HOST:PORT` with the port moved up by this process's local rank, so the
/// processes a launcher starts on one node do not fight over one port.
pub fn addr_for_local_rank(addr: &str, local_rank: Option<u32>) -> ReplayResult<String> {
    let bad = || {
        ReplayError::Usage(format!(
            "--metrics-addr {addr}: expected HOST:PORT, such as 0.0.0.0:9464"
        ))
    };
    let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    match local_rank {
        Some(l) if l > 0 && port != 0 => {
            let moved = u16::try_from(port as u32 + l).map_err(|_| bad())?;
            Ok(format!("{host}:{moved}"))
        }
        _ => Ok(addr.to_string()),
    }
}

impl Watch {
    /// Starts what `opts` asks for (nothing at all when it asks for nothing).
    pub fn start(
        opts: &LiveOptions,
        live: Arc<LiveRanks>,
        local_rank: Option<u32>,
    ) -> ReplayResult<Watch> {
        let usage = |e: iorepro_telemetry::TelemetryError| ReplayError::Usage(e.to_string());
        let server = match &opts.metrics_addr {
            Some(addr) => {
                let mut registry = Registry::default();
                registry.register_collector(Box::new(ReplayFigures { live: live.clone() }));
                let at = addr_for_local_rank(addr, local_rank)?;
                Some(MetricsServer::start(&at, registry).map_err(usage)?)
            }
            None => None,
        };
        let stop: StopFlag = Arc::new((Mutex::new(false), Condvar::new()));
        let lines = match opts.status_interval {
            Some(every) => {
                let sink = StatusSink::open(opts.status_file.as_deref()).map_err(usage)?;
                let stop = stop.clone();
                Some(
                    std::thread::Builder::new()
                        .name("status".into())
                        .spawn(move || write_lines(&live, sink, every, &stop))
                        .map_err(|e| {
                            ReplayError::Usage(format!("starting the status thread: {e}"))
                        })?,
                )
            }
            None => None,
        };
        Ok(Watch {
            stop,
            lines,
            server,
            linger: opts.metrics_linger,
        })
    }

    /// The ranks have finished: the last line goes out now, and the endpoint
    /// serves the final figures for the linger time (see [`Lingering::wait`]).
    pub fn finish(mut self) -> Lingering {
        self.stop_lines();
        Lingering {
            server: self.server.take(),
            until: Instant::now() + self.linger,
        }
    }

    fn stop_lines(&mut self) {
        let (flag, wake) = &*self.stop;
        *flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
        if let Some(t) = self.lines.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop_lines();
    }
}

/// A line every `every`, on a steady cadence, and a last one when stopped.
fn write_lines(live: &LiveRanks, mut sink: StatusSink, every: Duration, stop: &StopFlag) {
    let started = live.created;
    let mut prev = Totals::empty(started, live.ranks.len());
    let mut due = started + every;
    loop {
        let (flag, wake) = &**stop;
        let mut stopped = flag.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let now = Instant::now();
            if *stopped || now >= due {
                break;
            }
            stopped = wake
                .wait_timeout(stopped, due - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let last = *stopped;
        drop(stopped);
        let now = live.totals();
        sink.write(&status_line(&now, &prev, started, live.launched_rank));
        prev = now;
        if last {
            return;
        }
        // A slow line (a stalled disk under the status file) skips beats
        // rather than bunching them up.
        due = (due + every).max(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_move_with_the_local_rank() {
        assert_eq!(
            addr_for_local_rank("0.0.0.0:9464", None).unwrap(),
            "0.0.0.0:9464"
        );
        assert_eq!(
            addr_for_local_rank("0.0.0.0:9464", Some(0)).unwrap(),
            "0.0.0.0:9464"
        );
        assert_eq!(
            addr_for_local_rank("[::1]:9464", Some(3)).unwrap(),
            "[::1]:9467"
        );
        assert_eq!(
            addr_for_local_rank("localhost:0", Some(3)).unwrap(),
            "localhost:0"
        );
        assert!(addr_for_local_rank("9464", None).is_err());
        assert!(addr_for_local_rank("h:65535", Some(1)).is_err());
    }
}
