//! Figures of a capture while it runs, for `--status-interval` lines and the
//! `--metrics-addr` endpoint.
//!
//! The capture thread counts rows as it writes them ([`written`]: the
//! per-op tally both binaries share, and the rows) and, every
//! [`PUBLISH`] (or when a line is due), publishes a copy with the kernel
//! side's figures (records lost, ring fill) under a lock that only scrapes
//! share; the status lines are written from the capture loop itself, which
//! never sleeps longer than its poll interval. Nothing here runs unless one
//! of the options asks for it.

pub mod lines;
pub mod metrics;
pub mod written;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iorepro_telemetry::{LiveOptions, MetricsServer, StatusSink};
use prometheus_client::registry::Registry;

use crate::error::{CollectError, CollectResult};
use crate::probes::Probes;
use metrics::CaptureFigures;
use written::Written;

/// How often figures are published for scrapes: finer than any scrape
/// interval worth having, coarse enough to cost nothing.
const PUBLISH: Duration = Duration::from_millis(250);

/// The capture's figures at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub at: Instant,
    pub started: Instant,
    pub unix_ms: i64,
    pub written: Written,
    pub records: u64,
    pub dropped_io: u64,
    pub dropped_proc: u64,
    /// Share of the fuller ring waiting to be read, before the latest read.
    pub ring_fill: f64,
    pub ring_fill_peak: f64,
    pub finished: bool,
}

impl Snapshot {
    fn new(started: Instant) -> Snapshot {
        Snapshot {
            at: started,
            started,
            unix_ms: unix_ms(),
            written: Written::default(),
            records: 0,
            dropped_io: 0,
            dropped_proc: 0,
            ring_fill: 0.0,
            ring_fill_peak: 0.0,
            finished: false,
        }
    }
}

/// The latest published figures, where scrapes read them.
pub struct Shared {
    latest: Mutex<Snapshot>,
}

impl Shared {
    pub fn snapshot(&self) -> Snapshot {
        self.latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Owned by the capture loop.
pub struct Live {
    shared: Arc<Shared>,
    lines: Option<(StatusSink, Duration)>,
    next_line: Instant,
    prev: Snapshot,
    server: Option<MetricsServer>,
    linger: Duration,
    next_publish: Instant,
    current: Snapshot,
}

impl Live {
    /// Opens the status file and binds the endpoint: a bad address or file
    /// fails the capture before anything is traced.
    pub fn start(opts: &LiveOptions) -> CollectResult<Option<Live>> {
        if !opts.any() {
            return Ok(None);
        }
        let usage = |e: iorepro_telemetry::TelemetryError| CollectError::Usage(e.to_string());
        let started = Instant::now();
        let shared = Arc::new(Shared {
            latest: Mutex::new(Snapshot::new(started)),
        });
        let server = match &opts.metrics_addr {
            Some(addr) => {
                let mut registry = Registry::default();
                registry.register_collector(Box::new(CaptureFigures {
                    shared: shared.clone(),
                }));
                Some(MetricsServer::start(addr, registry).map_err(usage)?)
            }
            None => None,
        };
        let lines = match opts.status_interval {
            Some(every) => Some((
                StatusSink::open(opts.status_file.as_deref()).map_err(usage)?,
                every,
            )),
            None => None,
        };
        Ok(Some(Live {
            shared,
            next_line: started + opts.status_interval.unwrap_or_default(),
            lines,
            prev: Snapshot::new(started),
            server,
            linger: opts.metrics_linger,
            next_publish: started,
            current: Snapshot::new(started),
        }))
    }

    /// Before a read of the rings: how full they are.
    pub fn before_drain(&mut self, probes: &Probes) {
        let fill = probes.events.fill().max(probes.proc_events.fill());
        self.current.ring_fill = fill;
        self.current.ring_fill_peak = self.current.ring_fill_peak.max(fill);
    }

    /// After a read of the rings: publishes and writes a line when due.
    pub fn after_drain(&mut self, records: usize, written: &Written, probes: &Probes) {
        self.current.records += records as u64;
        let now = Instant::now();
        let line_due = self.lines.is_some() && now >= self.next_line;
        if !line_due && (self.server.is_none() || now < self.next_publish) {
            return;
        }
        self.publish(written, probes.dropped_totals(), false);
        self.next_publish = now + PUBLISH;
        if line_due {
            self.write_line();
            let every = self.lines.as_ref().map_or(PUBLISH, |l| l.1);
            // A slow line (a stalled disk under the status file) skips
            // beats rather than bunching them up.
            self.next_line = (self.next_line + every).max(Instant::now());
        }
    }

    /// The trace is closed: final figures, a last line (`"done": true`), and
    /// the endpoint kept up for `--metrics-linger` so a scraper sees them.
    pub fn finish(mut self, written: &Written, dropped: (u64, u64)) {
        self.publish(written, dropped, true);
        if self.lines.is_some() {
            self.write_line();
        }
        if self.server.is_some() {
            std::thread::sleep(self.linger);
        }
    }

    fn publish(
        &mut self,
        written: &Written,
        (dropped_io, dropped_proc): (u64, u64),
        finished: bool,
    ) {
        self.current.at = Instant::now();
        self.current.unix_ms = unix_ms();
        self.current.written.clone_from(written);
        self.current.dropped_io = dropped_io;
        self.current.dropped_proc = dropped_proc;
        self.current.finished = finished;
        if self.server.is_some() {
            *self.shared.latest.lock().unwrap_or_else(|p| p.into_inner()) = self.current.clone();
        }
    }

    fn write_line(&mut self) {
        if let Some((sink, _)) = self.lines.as_mut() {
            sink.write(&lines::status_line(&self.current, &self.prev));
            self.prev = self.current.clone();
        }
    }
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iorepro_format::{EventRow, Op};

    fn row(op: Op, ret: i64, dur_ns: i64, calls: i64) -> EventRow<'static> {
        EventRow {
            ts_ns: 0,
            dur_ns,
            host: "h",
            pid: 1,
            tid: 1,
            rank: None,
            comm: "python",
            op,
            path: None,
            fd: None,
            offset: None,
            size: None,
            ret,
            flags: None,
            calls,
            span_ns: None,
            path2: None,
            via: None,
            exchange: None,
            from_storage: None,
        }
    }

    #[test]
    fn lines_count_calls_bytes_and_rates_over_the_interval() {
        let t0 = Instant::now();
        let mut prev = Snapshot::new(t0);
        prev.written.add(&row(Op::Read, 1 << 20, 1_000_000, 1));
        let mut now = prev.clone();
        now.at = t0 + Duration::from_secs(2);
        // A run of 1,024 reads of 1 MiB taking 100 µs each, in the interval.
        now.written.add(&row(Op::Read, 1 << 30, 102_400_000, 1024));
        now.written.add(&row(Op::Open, 3, 5_000, 1));
        now.dropped_io = 2;
        now.ring_fill_peak = 0.5;
        let line = lines::status_line(&now, &prev);
        assert_eq!(line["events"], 3);
        assert_eq!(line["read_bytes"], (1u64 << 30) + (1 << 20));
        assert_eq!(line["read_gib_s"], 0.5);
        assert_eq!(line["ops"]["read"]["count"], 1025);
        assert_eq!(line["ops"]["read"]["ops_s"], 512.0);
        let p99 = line["ops"]["read"]["p99_us"].as_f64().unwrap();
        assert!((99.0..=101.0).contains(&p99), "{p99}");
        assert_eq!(line["ops"]["open"]["bytes"], 0);
        assert_eq!(line["dropped_events"], 2);
        assert_eq!(line["ring_fill_peak"], 0.5);
        assert_eq!(line["elapsed_s"], 2.0);
        assert_eq!(line["done"], false);
    }
}
