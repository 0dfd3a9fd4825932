//! One capture from start to finish: load the probes, start or find the job,
//! drain the ring buffers on a short poll interval, turn records into rows,
//! and close the trace when the job ends, on a signal, or after `--duration`.

use std::path::Path;
use std::time::{Duration, Instant};

use iorepro_common::DROPPED_NAME;
use iorepro_format::{Manifest, Source, TraceError, TraceWriter, WriterOptions};

use crate::cgroup::Cgroup;
use crate::cli::{CaptureOptions, OnLoadFailure, Target};
use crate::decode::Decoder;
use crate::error::{CollectError, CollectResult};
use crate::live::Live;
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

pub fn run(opts: CaptureOptions) -> CollectResult<Outcome> {
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
    let mut wopts = WriterOptions::new(Source::Ebpf);
    wopts.segment_rows = opts.segment_events;
    wopts.batch_rows = wopts.batch_rows.min(opts.segment_events);
    wopts.command = match &opts.target {
        Target::Command(c) => Some(c.clone()),
        _ => None,
    };
    // Before the trace exists: an address in use, a bad status file or a
    // kernel that refuses the programs fails the capture with nothing to
    // clean up, and nothing that looks like a trace is left behind.
    let mut live = Live::start(&opts.live)?;
    let loading = Instant::now();
    let probes = Probes::load(&ProbeConfig {
        ring_buffer_bytes: opts.ring_buffer_bytes,
        cgroup: cgroup.as_ref().map(|c| &c.dir),
        all_files: opts.all_files,
        merge_runs: opts.merge_runs,
    });
    let mut probes = match (probes, &opts.target) {
        (Ok(p), _) => p,
        (Err(e @ CollectError::Kernel(_)), Target::Command(cmd))
            if opts.on_load_failure == OnLoadFailure::Run =>
        {
            return untraced(cmd, opts.user.as_deref(), &e);
        }
        (Err(e @ CollectError::Kernel(_)), Target::Command(_)) => {
            return Err(CollectError::Kernel(format!(
                "{e}; the job was not run (--on-load-failure fail): run it without \
                 iorepro-collect to run it untraced"
            )));
        }
        (Err(e), _) => return Err(e),
    };
    let load_s = loading.elapsed().as_secs_f64();
    for line in probes.capabilities.warnings() {
        eprintln!("warning: {line}");
    }
    let mut writer = TraceWriter::create(&opts.out, wopts)?;
    salvage::reserve_space(&opts.out);
    writer.set_extra(
        "collector",
        serde_json::json!({
            "hooks": probes.capabilities.hooks,
            "target": format!("{:?}", opts.target),
            "load_s": load_s,
        }),
    );
    writer.set_extra("capabilities", probes.capabilities.to_json());
    signals::install();

    let mut session = Decoder::new(
        hostname(),
        opts.path_prefixes.clone(),
        opts.all_files,
        wall_offset_ns(),
    );
    let mut job = match &opts.target {
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
            for tgid in cgroup.as_ref().map(Cgroup::processes).unwrap_or_default() {
                session.adopt(tgid);
            }
            None
        }
    };
    let first_pid = match (&job, &opts.target) {
        (Some(j), _) => Some(j.pid),
        (None, Target::Pid(pid)) => Some(*pid),
        _ => cgroup.as_ref().and_then(|c| c.processes().first().copied()),
    };
    let mount_watch = crate::mounts::MountWatch::start(first_pid, &mut writer);

    let start = Instant::now();
    let mut stop_deadline: Option<Instant> = None;
    let mut last_sweep = Instant::now();
    let mut exit_code = 0;
    // A failed trace write stops the capture, not the job (see `salvage`).
    let mut write_error: Option<TraceError> = None;
    let mut mid_capture = false;
    loop {
        if let Some(l) = live.as_mut() {
            l.before_drain(&probes);
        }
        let drained = session.drain(&mut probes)?;
        if let Some(l) = live.as_mut() {
            l.after_drain(drained, &session.tally, &probes);
        }
        if let Some(j) = job.as_mut() {
            if let Some(status) = j.try_wait() {
                exit_code = status;
                break;
            }
        }
        if let (Some(sig), None) = (signals::received(), stop_deadline) {
            match job.as_ref() {
                Some(j) => {
                    j.signal(sig);
                    stop_deadline = Some(Instant::now() + STOP_GRACE);
                }
                None => break,
            }
        }
        if stop_deadline.is_some_and(|d| Instant::now() >= d) {
            exit_code = 128 + signals::received().unwrap_or(libc::SIGTERM);
            break;
        }
        if opts.duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        if last_sweep.elapsed() >= Duration::from_secs(1) {
            last_sweep = Instant::now();
            match &cgroup {
                // A cgroup capture lasts while the cgroup does: processes
                // may join it at any time, until it is removed.
                Some(cg) if !cg.exists() => break,
                Some(_) => {}
                None => {
                    if sweep(&mut probes) == 0 && job.is_none() {
                        break; // every process of the attached tree has exited
                    }
                }
            }
        }
        let watermark = monotonic_ns() + session.wall_offset_ns - REORDER_WINDOW_NS;
        if let Err(e) = session.release(Some(watermark), &mut writer) {
            write_error = Some(e);
            mid_capture = true;
            break;
        }
        if drained == 0 {
            std::thread::sleep(POLL);
        }
    }
    probes.detach();
    if write_error.is_none() {
        session.drain(&mut probes)?;
        let named: Vec<u32> = session.names.keys().copied().collect();
        for run in probes.open_runs(named.into_iter()) {
            session.on_io(&run);
        }
        if let Err(e) = session.release(None, &mut writer) {
            write_error = Some(e);
        }
    }
    let (dropped_by_kind, dropped_proc) = probes.dropped();
    drop(probes);
    if let Some(e) = write_error {
        drop(writer);
        // Stopped mid-capture, the job is still running: it is waited for
        // as the capture would have (until it ends, a stop signal's grace
        // period, or --duration). Otherwise the capture had already ended.
        let job = if mid_capture { job } else { None };
        let until = opts.duration.map(|d| start + d);
        return Ok(trace_write_failed(
            &opts.out,
            &e,
            job,
            (stop_deadline, until),
            exit_code,
        ));
    }
    let dropped_io: u64 = dropped_by_kind.iter().map(|(_, n)| n).sum();
    mount_watch.finish(&mut writer);
    writer.set_dropped_events(dropped_io);
    if dropped_io > 0 {
        let by_op: serde_json::Map<String, serde_json::Value> = dropped_by_kind
            .iter()
            .map(|(k, n)| {
                let op = match op_of(*k) {
                    Some(o) => o.as_str(),
                    None if *k == DROPPED_NAME => "thread_name",
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
    if let Some(sig) = signals::received() {
        writer.set_extra("stopped_by_signal", serde_json::json!(sig));
    }
    // A cgroup capture can start before anything runs in the cgroup (a Slurm
    // prolog), and nothing may ever have: an empty trace must not pass for
    // a complete record of a job.
    let empty_cgroup = cgroup.is_some() && session.names.is_empty();
    if empty_cgroup {
        writer.set_extra(
            "no_process_seen",
            serde_json::json!("no process of the cgroup made a call the trace records"),
        );
    }
    let (cpu_s, max_rss_kib) = own_usage();
    writer.set_extra(
        "collector_usage",
        serde_json::json!({ "cpu_s": cpu_s, "max_rss_kib": max_rss_kib, "wall_s": start.elapsed().as_secs_f64() }),
    );
    salvage::release_space(&opts.out);
    let manifest = match writer.finish() {
        Ok(m) => m,
        Err(e) => {
            return Ok(trace_write_failed(
                &opts.out,
                &e,
                None,
                (None, None),
                exit_code,
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
    if let Some(l) = live {
        l.finish(&session.tally, (dropped_io, dropped_proc));
    }
    Ok(Outcome {
        exit_code,
        manifest: Some(manifest),
    })
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

fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into a local timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// `bpf_ktime_get_ns` counts CLOCK_MONOTONIC.
fn monotonic_ns() -> i64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Wall clock minus monotonic clock, taken as the tightest of a few samples.
fn wall_offset_ns() -> i64 {
    (0..5)
        .map(|_| {
            let a = monotonic_ns();
            let w = clock_ns(libc::CLOCK_REALTIME);
            let b = monotonic_ns();
            (b - a, w - (a + (b - a) / 2))
        })
        .min()
        .map(|(_, off)| off)
        .unwrap_or(0)
}

/// CPU seconds and peak RSS of the collector itself (not the job).
fn own_usage() -> (f64, i64) {
    // SAFETY: getrusage fills a zeroed struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime) + secs(ru.ru_stime), ru.ru_maxrss)
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: writes at most buf.len() bytes.
    unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    c_str(&buf).to_string()
}
