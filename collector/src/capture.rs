//! One capture from start to finish: load the probes, start or find the job,
//! drain the ring buffers on a short poll interval, turn records into rows,
//! and close the trace when the job ends, on a signal, or after `--duration`.

use std::path::Path;
use std::time::{Duration, Instant};

use iorepro_common::DROPPED_NAME;
use iorepro_format::{keyed_names, Manifest, Source, TraceError, TraceWriter, WriterOptions};
use rustix::time::ClockId;

use crate::cgroup::Cgroup;
use crate::cli::{CaptureOptions, OnLoadFailure, Target};
use crate::decode::Decoder;
use crate::error::{CollectError, CollectResult};
use crate::hashed_rows::Masker;
use crate::live::Live;
use crate::mounts::MountWatch;
use crate::probes::{check_privileges, ProbeConfig, Probes};
use crate::procs;
use crate::rows::{c_str, op_of};
use crate::salvage;
use crate::signals;
use crate::spawn::{spawn_gated, Job};

/// How often the ring buffers are drained (the kernel side never wakes us).
const POLL: Duration = Duration::from_millis(2);
/// How long a row waits for earlier-starting syscalls that finish later.
const REORDER_WINDOW_NS: i64 = 500_000_000;
/// How long the job gets to exit after a forwarded stop signal.
const STOP_GRACE: Duration = Duration::from_secs(5);

pub struct Outcome {
    /// What `iorepro-collect` exits with: the job's status, or 0.
    pub exit_code: i32,
    /// The trace's manifest; `None` when the job ran untraced.
    pub manifest: Option<Manifest>,
}

/// One capture, as the steps below run it: check that it can start, load the
/// probes, create the trace, start (or find) the job, drain until it is
/// done, stop tracing, then finish the trace, or salvage it if a write failed.
pub fn run(opts: CaptureOptions) -> CollectResult<Outcome> {
    let cgroup = preflight(&opts)?;
    // Before the trace exists: an address in use, a bad status file or a
    // kernel that refuses the programs fails the capture with nothing to
    // clean up, and nothing that looks like a trace is left behind.
    let live = Live::start(&opts.live)?;
    let (mut probes, load_s) = match load_probes(&opts, cgroup.as_ref()) {
        Ok(loaded) => loaded,
        Err(e) => return load_failed(&opts, e),
    };
    let writer = create_trace(&opts, &probes, load_s)?;
    signals::install();
    let mut capture = Capture::start_job(&opts, cgroup.as_ref(), &mut probes, writer, live)?;
    let failed = capture.drain_until_done(&mut probes)?;
    let failed = capture.stop_tracing(&mut probes, failed)?;
    capture.note_unseen_tls(&mut probes);
    let dropped = probes.dropped();
    drop(probes);
    match failed {
        Some(failed) => Ok(capture.salvage(failed)),
        None => capture.finish(dropped),
    }
}

/// Refuses a capture this process may not make or whose target is not
/// there; opens the cgroup a `--cgroup` capture follows.
fn preflight(opts: &CaptureOptions) -> CollectResult<Option<Cgroup>> {
    check_privileges(opts.user.is_some())?;
    let cgroup = match &opts.target {
        Target::Cgroup(p) => Some(Cgroup::open(p)?),
        _ => None,
    };
    if let Target::Pid(pid) = opts.target {
        if !procs::alive(pid) {
            return Err(CollectError::Usage(format!("--pid {pid}: no such process")));
        }
    }
    Ok(cgroup)
}

/// Loads and attaches the probes, saying once what this kernel leaves out;
/// returns them with the seconds loading took.
fn load_probes(opts: &CaptureOptions, cgroup: Option<&Cgroup>) -> CollectResult<(Probes, f64)> {
    let loading = Instant::now();
    let probes = Probes::load(&ProbeConfig {
        ring_buffer_bytes: opts.ring_buffer_bytes,
        cgroup: cgroup.map(|c| &c.dir),
        all_files: opts.all_files,
        merge_runs: opts.merge_runs,
        requests: opts.requests,
    })?;
    let load_s = loading.elapsed().as_secs_f64();
    for line in probes.capabilities.warnings() {
        eprintln!("warning: {line}");
    }
    Ok((probes, load_s))
}

/// The probes could not be loaded: a command runs untraced if
/// `--on-load-failure run` says so; otherwise the capture fails.
fn load_failed(opts: &CaptureOptions, err: CollectError) -> CollectResult<Outcome> {
    match (err, &opts.target) {
        (e @ CollectError::Kernel(_), Target::Command(cmd))
            if opts.on_load_failure == OnLoadFailure::Run =>
        {
            untraced(cmd, opts.user.as_deref(), &e)
        }
        (e @ CollectError::Kernel(_), Target::Command(_)) => Err(CollectError::Kernel(format!(
            "{e}; the job was not run (--on-load-failure fail): run it without \
             iorepro-collect to run it untraced"
        ))),
        (e, _) => Err(e),
    }
}

/// Creates the trace, with the space kept for a disk that fills up and what
/// the manifest says of the collector and this kernel from the start.
fn create_trace(opts: &CaptureOptions, probes: &Probes, load_s: f64) -> CollectResult<TraceWriter> {
    let mut wopts = WriterOptions::new(Source::Ebpf);
    wopts.segment_rows = opts.segment_events;
    wopts.batch_rows = wopts.batch_rows.min(opts.segment_events);
    let command = match &opts.target {
        Target::Command(c) => Some(c.as_slice()),
        _ => None,
    };
    wopts.command = match &opts.anonymize {
        Some(an) => keyed_names::manifest::command(command, an.keep_program_name),
        None => command.map(<[String]>::to_vec),
    };
    let mut writer = TraceWriter::create(&opts.out, wopts)?;
    salvage::reserve_space(&opts.out);
    let collector = serde_json::json!({
        "hooks": probes.capabilities.hooks,
        "target": format!("{:?}", opts.target),
        "load_s": load_s,
    });
    match &opts.anonymize {
        None => writer.set_extra("collector", collector),
        Some(an) => {
            if let Some(c) = keyed_names::manifest::extra("collector", &collector) {
                writer.set_extra("collector", c);
            }
            writer.set_anonymized(keyed_names::manifest::anonymized(
                keyed_names::manifest::At::Capture,
                an.keep_program_name && command.is_some(),
                Vec::new(),
            ));
        }
    }
    writer.set_extra("capabilities", probes.capabilities.to_json());
    Ok(writer)
}

/// A trace write that failed (see `salvage`), and whether it stopped the
/// capture while the job was still running.
struct WriteFailed {
    error: TraceError,
    mid_capture: bool,
}

/// A capture under way, from the job's start to the trace's end.
struct Capture<'a> {
    opts: &'a CaptureOptions,
    cgroup: Option<&'a Cgroup>,
    session: Decoder,
    writer: TraceWriter,
    live: Option<Live>,
    /// The job `-- COMMAND` started; `None` for `--pid` and `--cgroup`.
    job: Option<Job>,
    mount_watch: MountWatch,
    start: Instant,
    /// When the job, sent a stop signal, must have exited.
    stop_deadline: Option<Instant>,
    exit_code: i32,
}

impl<'a> Capture<'a> {
    /// Starts the job traced from its first instruction, or traces the
    /// processes already there (`--pid`, `--cgroup`), and starts watching
    /// their mounts.
    fn start_job(
        opts: &'a CaptureOptions,
        cgroup: Option<&'a Cgroup>,
        probes: &mut Probes,
        mut writer: TraceWriter,
        live: Option<Live>,
    ) -> CollectResult<Self> {
        let host = hostname();
        let mut session = Decoder::new(
            host.clone(),
            opts.path_prefixes.clone(),
            opts.all_files,
            wall_offset_ns(),
            crate::storage_served::Watched {
                fills: probes
                    .capabilities
                    .hooks
                    .contains(&crate::probes::FILL_HOOK),
                device_writes: (probes.capabilities.hooks)
                    .contains(&crate::probes::DEVICE_WRITE_HOOK),
                write_back: (probes.capabilities.hooks).contains(&crate::probes::WRITEBACK_HOOK),
            },
        );
        if let Some(an) = &opts.anonymize {
            session.anonymize(Masker::new(an.anonymizer.clone(), &host));
        }
        let job = match &opts.target {
            Target::Command(cmd) => {
                let mut job = spawn_gated(cmd, opts.user.as_deref())?;
                probes.trace(job.pid)?;
                session.procs.set_rank(job.pid, rank_of_own_env());
                session.files.scan_process(job.pid);
                job.release(&cmd[0])?;
                Some(job)
            }
            Target::Pid(pid) => {
                // Trace the tree, then look again for children forked meanwhile.
                for _ in 0..2 {
                    for tgid in procs::descendants(*pid) {
                        probes.trace(tgid)?;
                        session.adopt(tgid);
                    }
                }
                None
            }
            Target::Cgroup(_) => {
                // The kernel side follows the cgroup itself; the processes already
                // in it are looked at for their ranks and open files.
                for tgid in cgroup.map(Cgroup::processes).unwrap_or_default() {
                    session.adopt(tgid);
                }
                None
            }
        };
        let first_pid = match (&job, &opts.target) {
            (Some(j), _) => Some(j.pid),
            (None, Target::Pid(pid)) => Some(*pid),
            _ => cgroup.and_then(|c| c.processes().first().copied()),
        };
        let anonymizer = opts.anonymize.as_ref().map(|a| a.anonymizer.clone());
        let mount_watch = MountWatch::start(first_pid, &mut writer, anonymizer);
        Ok(Capture {
            opts,
            cgroup,
            session,
            writer,
            live,
            job,
            mount_watch,
            start: Instant::now(),
            stop_deadline: None,
            exit_code: 0,
        })
    }

    /// Drains the ring buffers into the trace on a short poll interval until
    /// the job ends, a stop signal has been dealt with, `--duration` is up,
    /// the traced processes or the cgroup are gone, or a trace write fails
    /// (returned: the job runs on untraced).
    fn drain_until_done(&mut self, probes: &mut Probes) -> CollectResult<Option<TraceError>> {
        let mut last_sweep = Instant::now();
        loop {
            if let Some(l) = self.live.as_mut() {
                l.before_drain(probes);
            }
            let drained = self.session.drain(probes)?;
            if let Some(l) = self.live.as_mut() {
                l.after_drain(drained, &self.session.written, probes);
            }
            if let Some(j) = self.job.as_mut() {
                if let Some(status) = j.try_wait() {
                    self.exit_code = status;
                    return Ok(None);
                }
            }
            if let (Some(sig), None) = (signals::received(), self.stop_deadline) {
                match self.job.as_ref() {
                    Some(j) => {
                        j.signal(sig);
                        self.stop_deadline = Some(Instant::now() + STOP_GRACE);
                    }
                    None => return Ok(None),
                }
            }
            if self.stop_deadline.is_some_and(|d| Instant::now() >= d) {
                self.exit_code = 128 + signals::received().unwrap_or(libc::SIGTERM);
                return Ok(None);
            }
            if self
                .opts
                .duration
                .is_some_and(|d| self.start.elapsed() >= d)
            {
                return Ok(None);
            }
            if last_sweep.elapsed() >= Duration::from_secs(1) {
                last_sweep = Instant::now();
                match self.cgroup {
                    // A cgroup capture lasts while the cgroup does: processes
                    // may join it at any time, until it is removed.
                    Some(cg) if !cg.exists() => return Ok(None),
                    Some(_) => {}
                    None => {
                        if sweep(probes) == 0 && self.job.is_none() {
                            return Ok(None); // every process of the attached tree has exited
                        }
                    }
                }
            }
            let watermark = self.session.watermark(monotonic_ns(), REORDER_WINDOW_NS);
            if let Err(e) = self.session.release(Some(watermark), &mut self.writer) {
                return Ok(Some(e));
            }
            if drained == 0 {
                std::thread::sleep(POLL);
            }
        }
    }

    /// Detaches the probes and, unless a write already failed, reads what
    /// they left (the rings, the runs threads still had open) into the trace.
    fn stop_tracing(
        &mut self,
        probes: &mut Probes,
        failed: Option<TraceError>,
    ) -> CollectResult<Option<WriteFailed>> {
        probes.detach();
        if let Some(error) = failed {
            return Ok(Some(WriteFailed {
                error,
                mid_capture: true,
            }));
        }
        self.session.drain(probes)?;
        let named: Vec<u32> = self.session.names.keys().copied().collect();
        for run in probes.open_runs(named.into_iter()) {
            self.session.on_io(&run);
        }
        self.session.end_requests();
        Ok(self
            .session
            .release(None, &mut self.writer)
            .err()
            .map(|error| WriteFailed {
                error,
                mid_capture: false,
            }))
    }

    /// The trace could not be written: keeps what was (see
    /// [`trace_write_failed`]). Stopped mid-capture, the job is still
    /// running: it is waited for as the capture would have (until it ends,
    /// a stop signal's grace period, or --duration). Otherwise the capture
    /// had already ended.
    fn salvage(self, failed: WriteFailed) -> Outcome {
        drop(self.writer);
        let job = if failed.mid_capture { self.job } else { None };
        let until = self.opts.duration.map(|d| self.start + d);
        trace_write_failed(
            &self.opts.out,
            &failed.error,
            job,
            (self.stop_deadline, until),
            self.exit_code,
        )
    }

    /// Names in the manifest's `capabilities` (and once on stderr) each
    /// process that spoke TLS through a library the uprobes do not see.
    fn note_unseen_tls(&mut self, probes: &mut Probes) {
        let unseen = self.session.unseen_tls();
        if unseen.is_empty() {
            return;
        }
        for (pid, connections) in unseen {
            let name = self
                .session
                .names
                .get(&pid)
                .map_or("?", |n| crate::rows::c_str(n))
                .to_string();
            let m = crate::probes::Missing {
                what: "tls_requests",
                effect: "object-storage requests over TLS not captured",
                why: format!(
                    "process {name} (pid {pid}) opened {connections} TLS connection(s) without \
                     OpenSSL's calls (TLS linked in: Go, rustls, the AWS Common Runtime)"
                ),
            };
            eprintln!("warning: {}: {}", m.effect, m.why);
            probes.capabilities.missing.push(m);
        }
        self.writer
            .set_extra("capabilities", probes.capabilities.to_json());
    }

    /// Closes a complete trace: what was lost, how the capture ended and
    /// what it cost go into the manifest, and what makes the trace
    /// incomplete is said on stderr. `dropped` is [`Probes::dropped`].
    fn finish(mut self, dropped: (Vec<(u32, u64)>, u64)) -> CollectResult<Outcome> {
        let (dropped_by_kind, dropped_proc) = dropped;
        self.mount_watch.finish(&mut self.writer);
        self.writer
            .set_process_starts(self.session.process_starts());
        let dropped_io = record_losses(&mut self.writer, &dropped_by_kind, dropped_proc);
        if let Some(sig) = signals::received() {
            self.writer
                .set_extra("stopped_by_signal", serde_json::json!(sig));
        }
        // A cgroup capture can start before anything runs in the cgroup (a Slurm
        // prolog), and nothing may ever have: an empty trace must not pass for
        // a complete record of a job.
        let empty_cgroup = self.cgroup.is_some() && self.session.names.is_empty();
        if empty_cgroup {
            self.writer.set_extra(
                "no_process_seen",
                serde_json::json!("no process of the cgroup made a call the trace records"),
            );
        }
        let (cpu_s, max_rss_kib) = own_usage();
        self.writer.set_extra(
            "collector_usage",
            serde_json::json!({ "cpu_s": cpu_s, "max_rss_kib": max_rss_kib, "wall_s": self.start.elapsed().as_secs_f64() }),
        );
        salvage::release_space(&self.opts.out);
        let manifest = match self.writer.finish() {
            Ok(m) => m,
            Err(e) => {
                return Ok(trace_write_failed(
                    &self.opts.out,
                    &e,
                    None,
                    (None, None),
                    self.exit_code,
                ))
            }
        };
        if dropped_io > 0 || dropped_proc > 0 {
            eprintln!(
                "warning: {} I/O events and {} process events were lost (ring buffer full); \
                 the trace is incomplete: raise --ring-buffer-bytes",
                dropped_io, dropped_proc
            );
        }
        if empty_cgroup {
            eprintln!(
                "warning: no process of the cgroup made a call the trace records: the trace is empty"
            );
        }
        if let Some(l) = self.live {
            l.finish(&self.session.written, (dropped_io, dropped_proc));
        }
        Ok(Outcome {
            exit_code: self.exit_code,
            manifest: Some(manifest),
        })
    }
}

/// Records lost to full ring buffers, in the manifest: the I/O records in
/// all and by operation, and the process records. Returns the I/O records lost.
fn record_losses(
    writer: &mut TraceWriter,
    dropped_by_kind: &[(u32, u64)],
    dropped_proc: u64,
) -> u64 {
    let dropped_io: u64 = dropped_by_kind.iter().map(|(_, n)| n).sum();
    writer.set_dropped_events(dropped_io);
    if dropped_io > 0 {
        let by_op: serde_json::Map<String, serde_json::Value> = dropped_by_kind
            .iter()
            .map(|(k, n)| {
                let op = match op_of(*k) {
                    Some(o) => o.as_str(),
                    None if *k == DROPPED_NAME => "thread_name",
                    None if *k == iorepro_common::kind::FILL => "page_cache_fill",
                    None if *k == iorepro_common::kind::DEVICE_WRITE => "device_write",
                    None if *k == iorepro_common::DROPPED_BUSY => "busy_thread_slots",
                    None => "unknown",
                };
                (op.to_string(), serde_json::json!(n))
            })
            .collect();
        writer.set_extra("dropped_by_op", serde_json::Value::Object(by_op));
    }
    if dropped_proc > 0 {
        writer.set_extra("dropped_process_events", serde_json::json!(dropped_proc));
    }
    dropped_io
}

/// The probes could not be loaded and the job is to run anyway: it runs
/// untraced (stop signals forwarded), no trace is written, and the exit
/// status is the job's.
fn untraced(cmd: &[String], user: Option<&str>, err: &CollectError) -> CollectResult<Outcome> {
    eprintln!(
        "warning: tracing could not start: {err}\n\
         warning: running the job untraced, no trace written \
         (--on-load-failure fail refuses to run it instead)"
    );
    signals::install();
    let mut job = spawn_gated(cmd, user)?;
    job.release(&cmd[0])?;
    let mut stop_deadline: Option<Instant> = None;
    let status = loop {
        if let Some(status) = job.try_wait() {
            break status;
        }
        if let (Some(sig), None) = (signals::received(), stop_deadline) {
            job.signal(sig);
            stop_deadline = Some(Instant::now() + STOP_GRACE);
        }
        if stop_deadline.is_some_and(|d| Instant::now() >= d) {
            break 128 + signals::received().unwrap_or(libc::SIGTERM);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Outcome {
        exit_code: status,
        manifest: None,
    })
}

/// The trace could not be written: keep what was, say so, let a running job
/// finish untraced (stop signals are still forwarded; `deadlines` are a stop
/// signal's grace period and the end of --duration), and exit non-zero: the
/// job's own status if it failed, else 2, since the trace is incomplete.
fn trace_write_failed(
    dir: &Path,
    err: &TraceError,
    job: Option<Job>,
    deadlines: (Option<Instant>, Option<Instant>),
    exit_code: i32,
) -> Outcome {
    eprintln!("Error: {}", salvage::stop_writing(dir, err));
    let (mut stop_deadline, until) = deadlines;
    let status = match job {
        Some(mut j) => loop {
            if let Some(status) = j.try_wait() {
                break status;
            }
            if until.is_some_and(|u| Instant::now() >= u) {
                break exit_code; // as at the end of a --duration capture: the job runs on
            }
            if let (Some(sig), None) = (signals::received(), stop_deadline) {
                j.signal(sig);
                stop_deadline = Some(Instant::now() + STOP_GRACE);
            }
            if stop_deadline.is_some_and(|d| Instant::now() >= d) {
                break 128 + signals::received().unwrap_or(libc::SIGTERM);
            }
            std::thread::sleep(Duration::from_millis(20));
        },
        None => exit_code,
    };
    Outcome {
        exit_code: if status != 0 { status } else { 2 },
        manifest: Some(Manifest::load(dir).unwrap_or_else(|_| Manifest::new(Source::Ebpf))),
    }
}

/// Drops tgids that no longer exist from the traced set; returns how many remain.
fn sweep(probes: &mut Probes) -> usize {
    probes.sweep_tls();
    let mut live = 0;
    for tgid in probes.traced() {
        if Path::new(&format!("/proc/{tgid}")).exists() {
            live += procs::alive(tgid) as usize;
        } else {
            probes.untrace(tgid);
        }
    }
    live
}

fn rank_of_own_env() -> Option<i32> {
    iorepro_format::launchers::rank_from(|v| std::env::var(v).ok())
}

fn clock_ns(clock: ClockId) -> i64 {
    let ts = rustix::time::clock_gettime(clock);
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// `bpf_ktime_get_ns` counts CLOCK_MONOTONIC.
fn monotonic_ns() -> i64 {
    clock_ns(ClockId::Monotonic)
}

/// Wall clock minus monotonic clock, taken as the tightest of a few samples.
fn wall_offset_ns() -> i64 {
    (0..5)
        .map(|_| {
            let a = monotonic_ns();
            let w = clock_ns(ClockId::Realtime);
            let b = monotonic_ns();
            (b - a, w - (a + (b - a) / 2))
        })
        .min()
        .map(|(_, off)| off)
        .unwrap_or(0)
}

/// CPU seconds and peak RSS of the collector itself (not the job).
fn own_usage() -> (f64, i64) {
    // Neither rustix nor std has getrusage (a peak RSS that counts every
    // thread, and CPU time to the microsecond, from one call).
    // SAFETY: getrusage fills a zeroed struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime) + secs(ru.ru_stime), ru.ru_maxrss)
}

/// The node name, as `gethostname` reads it (from `uname`).
fn hostname() -> String {
    c_str(rustix::system::uname().nodename().to_bytes()).to_string()
}
