//! Loading and attaching the kernel-side programs, and the maps user space
//! shares with them: the traced-process set, the two ring buffers and the
//! per-CPU drop counters.

use std::collections::BTreeSet;
use std::path::Path;

use aya::maps::{Array, Map, MapData, PerCpuArray};
use aya::programs::{BtfTracePoint, TracePoint};
use aya::{Btf as AyaBtf, Ebpf, EbpfLoader};
use iorepro_common::{globals, IoEvent, Slot, DROPPED_PROC, MAX_SLOTS};

use crate::btf::{kernel_offsets, uring_offsets, Btf};
use crate::error::{CollectError, CollectResult};
use crate::ring::Ring;

/// The kernel-side programs, compiled from `ebpf/iorepro-ebpf` by `cargo xtask
/// build-ebpf` and committed, so that this crate builds on stable Rust with no
/// LLVM or bpf-linker (see the crate docs for how the object is kept honest).
static OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/iorepro.bpf.o");

/// How the programs are set up before loading.
#[derive(Debug, Clone)]
pub struct ProbeConfig<'a> {
    pub ring_buffer_bytes: u32,
    /// Trace this cgroup (an open cgroup v2 directory) and below, instead
    /// of a tgid set.
    pub cgroup: Option<&'a std::fs::File>,
    pub all_files: bool,
    /// Merge runs of back-to-back equal-sized calls into one record.
    pub merge_runs: bool,
}

/// The loaded, attached programs; dropping it detaches everything.
pub struct Probes {
    /// The loaded programs; `None` once detached.
    ebpf: Option<Ebpf>,
    pub events: Ring,
    pub proc_events: Ring,
    /// Indexed by tgid; the kernel side sets the entries of forked children.
    traced: Array<MapData, u64>,
    /// The tgids set in `traced`, as far as user space knows: those it added
    /// and the forks reported on the process ring.
    traced_set: BTreeSet<u32>,
    dropped: PerCpuArray<MapData, u64>,
    slots: Array<MapData, Slot>,
    /// What this kernel lets the capture record, and what it does not.
    pub capabilities: Capabilities,
}

/// What a capture records on this kernel: the hooks attached, and the
/// optional ones left out with the reason (written to the manifest as
/// `capabilities`, and said once on stderr).
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    /// `uname -r`.
    pub kernel: String,
    pub hooks: Vec<&'static str>,
    pub missing: Vec<Missing>,
}

/// An optional part of the capture this kernel does not allow.
#[derive(Debug, Clone)]
pub struct Missing {
    /// A short name: `io_uring`, `page_faults`.
    pub what: &'static str,
    /// What the trace lacks, in a user's words.
    pub effect: &'static str,
    /// Why: what the kernel lacks.
    pub why: String,
}

impl Capabilities {
    pub fn to_json(&self) -> serde_json::Value {
        let missing: Vec<_> = self
            .missing
            .iter()
            .map(|m| serde_json::json!({ "what": m.what, "effect": m.effect, "why": m.why }))
            .collect();
        serde_json::json!({ "kernel": self.kernel, "hooks": self.hooks, "missing": missing })
    }

    /// One line per missing part, for stderr.
    pub fn warnings(&self) -> Vec<String> {
        self.missing
            .iter()
            .map(|m| format!("{}: {}", m.effect, m.why))
            .collect()
    }
}

/// The programs every capture needs, in the order they are loaded and
/// attached (a fixed order, so a kernel that cannot load one always names
/// the same one): (program, hook, what it is for).
const REQUIRED: [(&str, &str, &str); 6] = [
    ("sys_enter", "tp_btf:sys_enter", "syscall entries"),
    ("sys_exit", "tp_btf:sys_exit", "syscall exits"),
    (
        "sched_process_fork",
        "tp_btf:sched_process_fork",
        "following new processes",
    ),
    ("sched_process_exec", "tp_btf:sched_process_exec", "exec"),
    ("sched_process_exit", "tp_btf:sched_process_exit", "exits"),
    ("task_rename", "tp_btf:task_rename", "thread names"),
];

/// The programs on io_uring's tracepoints (see the kernel side's `uring`):
/// one for submissions and one for completions, picked by the arguments
/// this kernel's tracepoints take.
type Programs = [(&'static str, &'static str, &'static str); 2];

/// The page-cache fill tracepoint (`fault` rows under mmap).
const FILL_CATEGORY: &str = "filemap";
const FILL_EVENT: &str = "mm_filemap_add_to_page_cache";

fn kernel_err(what: &str) -> impl Fn(aya::EbpfError) -> CollectError + '_ {
    move |e| CollectError::Kernel(format!("{what}: {e}"))
}

fn prog_err(what: &str) -> impl Fn(aya::programs::ProgramError) -> CollectError + '_ {
    move |e| CollectError::Kernel(format!("{what}: {e:#}"))
}

fn map_err(what: &str) -> impl Fn(aya::maps::MapError) -> CollectError + '_ {
    move |e| CollectError::Kernel(format!("map {what}: {e}"))
}

/// A program the kernel refused, named with what it is for and what it
/// needs, and the verifier's last words (its whole log is long).
fn load_failure(name: &str, purpose: &str, e: aya::programs::ProgramError) -> String {
    let detail = match &e {
        aya::programs::ProgramError::LoadError {
            io_error,
            verifier_log,
        } => {
            let log = verifier_log.to_string();
            let lines: Vec<&str> = log
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
            format!("{io_error}; the verifier said: {tail}")
        }
        other => format!("{other:#}"),
    };
    format!(
        "this kernel ({}) refused the program `{name}` ({purpose}; it needs BPF ring buffers \
         and BTF tracepoints: Linux 5.10 or later built with CONFIG_DEBUG_INFO_BTF): {detail}",
        kernel_release()
    )
}

/// `uname -r`.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

impl Probes {
    /// Loads and attaches every program this kernel allows: all the required
    /// ones or nothing, and of the optional ones (io_uring, page faults)
    /// those the kernel has the hooks for, saying what was left out. Nothing
    /// is traced until a tgid is added with [`Probes::trace`] (or, for a
    /// cgroup, at once).
    pub fn load(cfg: &ProbeConfig<'_>) -> CollectResult<Probes> {
        if let Some(why) = forced_failure() {
            return Err(CollectError::Kernel(why));
        }
        if !Path::new("/sys/kernel/btf/vmlinux").exists() {
            return Err(CollectError::Kernel(format!(
                "this kernel ({}) has no BTF (/sys/kernel/btf/vmlinux): iorepro-collect needs \
                 Linux 5.10 or later built with CONFIG_DEBUG_INFO_BTF=y",
                kernel_release()
            )));
        }
        ensure_tracefs()?;
        raise_memlock();
        // The kernel's BTF is read twice, for the member offsets and by the
        // loader; the two parses take most of start-up, so they run side by side.
        let (ours, btf) = std::thread::scope(|scope| {
            let ours = scope.spawn(|| -> CollectResult<_> {
                let ours = Btf::from_sys_fs()?;
                let offsets = kernel_offsets(&ours)?;
                let uring = uring_programs(&ours)
                    .and_then(|programs| Ok((programs, uring_offsets(&ours)?)));
                Ok((offsets, uring))
            });
            let btf = AyaBtf::from_sys_fs()
                .map_err(|e| CollectError::Kernel(format!("/sys/kernel/btf/vmlinux: {e}")));
            (ours.join().expect("BTF parsing does not panic"), btf)
        });
        let ((offsets, uring), btf) = (ours?, btf?);
        let fill = fill_offsets();
        let mut caps = Capabilities {
            kernel: kernel_release(),
            ..Capabilities::default()
        };
        let by_cgroup = cfg.cgroup.is_some() as u64;
        let all_files = cfg.all_files as u64;
        let slots = slot_count();
        let slot_mask = slots as u64 - 1;
        let merge_runs = cfg.merge_runs as u64;
        let mut loader = EbpfLoader::new();
        loader.btf(Some(&btf));
        for (name, value) in offsets
            .iter()
            .chain(uring.iter().flat_map(|(_, offsets)| offsets))
            .chain(fill.iter().flatten())
        {
            loader.override_global(name, value, true);
        }
        loader
            .override_global(globals::CGROUP, &by_cgroup, true)
            .override_global(globals::ALL_FILES, &all_files, true)
            .override_global(globals::SLOT_MASK, &slot_mask, true)
            .override_global(globals::MERGE_RUNS, &merge_runs, true)
            .map_max_entries("EVENTS", cfg.ring_buffer_bytes)
            .map_max_entries("SLOTS", slots)
            .map_max_entries("TRACED", pid_limit());
        let mut ebpf = loader
            .load(OBJECT)
            .map_err(kernel_err("loading the eBPF object"))?;

        load_btf_programs(&mut ebpf, &btf, &REQUIRED)
            .map_err(|(name, purpose, e)| CollectError::Kernel(load_failure(name, purpose, e)))?;
        for (name, hook, _) in REQUIRED {
            let p: &mut BtfTracePoint = program(&mut ebpf, name)?;
            p.attach().map_err(prog_err(name))?;
            caps.hooks.push(hook);
        }

        // io_uring requests are followed where this kernel's tracepoints and
        // structures are the ones the programs read.
        let uring = uring.and_then(|(programs, _)| {
            load_btf_programs(&mut ebpf, &btf, &programs)
                .map_err(|(name, _, e)| format!("the kernel refused `{name}`: {e:#}"))?;
            for (name, _, _) in programs {
                let p: &mut BtfTracePoint = program(&mut ebpf, name).map_err(|e| e.to_string())?;
                p.attach()
                    .map_err(|e| format!("attaching `{name}`: {e:#}"))?;
            }
            Ok(programs)
        });
        match uring {
            Ok(programs) => caps.hooks.extend(programs.iter().map(|(_, h, _)| *h)),
            Err(why) => caps.missing.push(Missing {
                what: "io_uring",
                effect: "io_uring requests not captured",
                why,
            }),
        }
        let fill = fill.and_then(|_| {
            let p: &mut TracePoint =
                program(&mut ebpf, "filemap_add").map_err(|e| e.to_string())?;
            p.load()
                .map_err(|e| format!("the kernel refused `filemap_add`: {e:#}"))?;
            p.attach(FILL_CATEGORY, FILL_EVENT)
                .map_err(|e| format!("attaching `filemap_add`: {e:#}"))?;
            Ok(())
        });
        match fill {
            Ok(_) => caps
                .hooks
                .push("tracepoint:filemap:mm_filemap_add_to_page_cache"),
            Err(why) => caps.missing.push(Missing {
                what: "page_faults",
                effect: "pages read in by faults under mmap not captured (no `fault` rows)",
                why,
            }),
        }

        if let Some(dir) = cfg.cgroup {
            match ebpf.map("CGROUP") {
                Some(Map::CgroupArray(data)) => set_cgroup(data, dir)?,
                _ => {
                    return Err(CollectError::Kernel(
                        "eBPF object has no cgroup array CGROUP".into(),
                    ))
                }
            }
        }
        let events = Ring::new(ring_map(&mut ebpf, "EVENTS")?)?;
        let proc_events = Ring::new(ring_map(&mut ebpf, "PROC_EVENTS")?)?;
        let traced = Array::try_from(take_map(&mut ebpf, "TRACED")?).map_err(map_err("TRACED"))?;
        let dropped =
            PerCpuArray::try_from(take_map(&mut ebpf, "DROPPED")?).map_err(map_err("DROPPED"))?;
        let slots = Array::try_from(take_map(&mut ebpf, "SLOTS")?).map_err(map_err("SLOTS"))?;
        Ok(Probes {
            ebpf: Some(ebpf),
            events,
            proc_events,
            traced,
            traced_set: BTreeSet::new(),
            dropped,
            slots,
            capabilities: caps,
        })
    }

    /// Detaches every program: nothing more is recorded, and the state the
    /// kernel side left (rings, open runs) holds still for a last read. The
    /// kernel waits for a grace period per detached syscall hook, so the
    /// programs are unloaded side by side.
    pub fn detach(&mut self) {
        let Some(mut ebpf) = self.ebpf.take() else {
            return;
        };
        std::thread::scope(|scope| {
            for (_, program) in ebpf.programs_mut() {
                if let Ok(p) = <&mut BtfTracePoint>::try_from(program) {
                    scope.spawn(move || {
                        let _ = p.unload();
                    });
                }
            }
        });
    }

    /// The runs that the threads `tids` still had open, as records (after
    /// [`Probes::detach`]). Every thread that took a slot has sent its name,
    /// so the named threads' slots are all there is to look at.
    pub fn open_runs(&self, tids: impl Iterator<Item = u32>) -> Vec<IoEvent> {
        let mask = self.slots.len().saturating_sub(1);
        let mut runs = Vec::new();
        for tid in tids {
            let (a, b) = iorepro_common::slot_indexes(tid, mask);
            for i in [a, b] {
                if let Ok(s) = self.slots.get(&i, 0) {
                    if s.tid == tid && s.run.calls != 0 {
                        runs.push(s.run.event());
                        break;
                    }
                }
            }
        }
        runs
    }

    pub fn trace(&mut self, tgid: u32) -> CollectResult<()> {
        self.traced.set(tgid, 1, 0).map_err(map_err("TRACED"))?;
        self.traced_set.insert(tgid);
        Ok(())
    }

    /// A child the kernel side started tracing when it was forked.
    pub fn forked(&mut self, tgid: u32) {
        self.traced_set.insert(tgid);
    }

    pub fn untrace(&mut self, tgid: u32) {
        let _ = self.traced.set(tgid, 0, 0);
        self.traced_set.remove(&tgid);
    }

    pub fn traced(&self) -> Vec<u32> {
        self.traced_set.iter().copied().collect()
    }

    /// Records lost so far: I/O records (all kinds), process records.
    pub fn dropped_totals(&self) -> (u64, u64) {
        let (io, proc) = self.dropped();
        (io.iter().map(|(_, n)| n).sum(), proc)
    }

    /// Records lost to a full ring buffer so far: I/O records by kind
    /// (thread names among them), and process records.
    pub fn dropped(&self) -> (Vec<(u32, u64)>, u64) {
        let sum = |slot: u32| {
            self.dropped
                .get(&slot, 0)
                .map(|v| v.iter().sum::<u64>())
                .unwrap_or(0)
        };
        let io = (0..DROPPED_PROC)
            .map(|k| (k, sum(k)))
            .filter(|(_, n)| *n > 0)
            .collect();
        (io, sum(DROPPED_PROC))
    }
}

fn program<'a, T>(ebpf: &'a mut Ebpf, name: &str) -> CollectResult<&'a mut T>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    let p = ebpf
        .program_mut(name)
        .ok_or_else(|| CollectError::Kernel(format!("eBPF object has no program {name}")))?;
    p.try_into().map_err(prog_err(name))
}

/// Verifies and loads the BTF-tracepoint programs `programs` side by side
/// (verifying the two syscall programs takes most of a capture's start-up);
/// a failure is the first in `programs`' order, whichever thread finished
/// first, so the same kernel always gives the same error.
fn load_btf_programs<'p>(
    ebpf: &mut Ebpf,
    btf: &AyaBtf,
    programs: &[(&'p str, &'p str, &'p str)],
) -> Result<(), (&'p str, &'p str, aya::programs::ProgramError)> {
    let mut found: Vec<(usize, &mut BtfTracePoint)> = Vec::new();
    for (name, p) in ebpf.programs_mut() {
        if let Some(i) = programs.iter().position(|(n, _, _)| *n == name) {
            if let Ok(p) = <&mut BtfTracePoint>::try_from(p) {
                found.push((i, p));
            }
        }
    }
    found.sort_by_key(|(i, _)| *i);
    if let Some((i, _)) = programs
        .iter()
        .enumerate()
        .find(|(i, _)| !found.iter().any(|(j, _)| j == i))
    {
        let (name, _, purpose) = programs[i];
        return Err((
            name,
            purpose,
            aya::programs::ProgramError::InvalidName {
                name: name.to_string(),
            },
        ));
    }
    let results: Vec<_> = std::thread::scope(|scope| {
        let loads: Vec<_> = found
            .into_iter()
            .map(|(i, p)| {
                let hook = programs[i].1;
                let tracepoint = hook.strip_prefix("tp_btf:").unwrap_or(hook);
                (i, scope.spawn(move || p.load(tracepoint, btf)))
            })
            .collect();
        loads
            .into_iter()
            .map(|(i, l)| (i, l.join().expect("program loading does not panic")))
            .collect()
    });
    for (i, r) in results {
        r.map_err(|e| (programs[i].0, programs[i].2, e))?;
    }
    Ok(())
}

/// The io_uring programs that read this kernel's tracepoints, or why there
/// are none: submissions from `io_uring_submit_req(req)` (6.4 and later) or
/// `io_uring_submit_sqe(req, force_nonblock)` (6.0 to 6.3; before 6.0 its
/// arguments are others), completions from `io_uring_complete(ctx, req,
/// cqe)` or, where it passes the result itself, `io_uring_complete(ctx,
/// req, user_data, res, cflags, extra1, extra2)`. (Each count below
/// includes the tracepoint's leading context argument.)
fn uring_programs(btf: &Btf) -> Result<Programs, String> {
    let submit = match (
        btf.tracepoint_params("io_uring_submit_req"),
        btf.tracepoint_params("io_uring_submit_sqe"),
    ) {
        (Some(2), _) => (
            "io_uring_submit_req",
            "tp_btf:io_uring_submit_req",
            "io_uring submissions",
        ),
        (None, Some(3)) => (
            "io_uring_submit_sqe",
            "tp_btf:io_uring_submit_sqe",
            "io_uring submissions",
        ),
        (None, None) => return Err("this kernel has no io_uring_submit_* tracepoint".into()),
        _ => {
            return Err(
                "this kernel's io_uring_submit_* tracepoint does not pass the request \
                 (kernels before 6.0)"
                    .into(),
            )
        }
    };
    let complete = match btf.tracepoint_params("io_uring_complete") {
        Some(4) => (
            "io_uring_complete",
            "tp_btf:io_uring_complete",
            "io_uring completions",
        ),
        Some(8) => (
            "io_uring_complete_res",
            "tp_btf:io_uring_complete",
            "io_uring completions",
        ),
        Some(_) => {
            return Err("this kernel's io_uring_complete tracepoint has arguments \
                 the collector does not read"
                .into())
        }
        None => return Err("this kernel has no io_uring_complete tracepoint".into()),
    };
    Ok([submit, complete])
}

/// Where the page-cache fill tracepoint keeps its fields on this kernel
/// (from its format file), or why it cannot be followed.
fn fill_offsets() -> Result<Vec<(&'static str, u64)>, String> {
    let rel = format!("events/{FILL_CATEGORY}/{FILL_EVENT}/format");
    let text = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find_map(|root| std::fs::read_to_string(Path::new(root).join(&rel)).ok())
        .ok_or_else(|| format!("this kernel has no tracepoint {FILL_CATEGORY}:{FILL_EVENT}"))?;
    let field = |name: &str| -> Option<u64> {
        text.lines().find_map(|l| {
            let l = l.trim().strip_prefix("field:")?;
            let (decl, rest) = l.split_once(';')?;
            let ident = decl.trim().rsplit([' ', '*']).next()?;
            if ident != name {
                return None;
            }
            let off = rest.trim().strip_prefix("offset:")?.split(';').next()?;
            off.trim().parse().ok()
        })
    };
    let need = |name: &str| {
        field(name).ok_or_else(|| {
            format!("the tracepoint {FILL_CATEGORY}:{FILL_EVENT} has no field `{name}` here")
        })
    };
    Ok(vec![
        (globals::FILL_INO, need("i_ino")?),
        (globals::FILL_INDEX, need("index")?),
        (globals::FILL_DEV, need("s_dev")?),
        // Kernels before the folio `order` field fill single pages.
        (globals::FILL_ORDER, field("order").unwrap_or(0)),
    ])
}

/// `IOREPRO_FORCE_LOAD_FAILURE=WHY` makes loading fail with WHY, as a
/// kernel that refuses the programs would: how the tests check what a
/// failed start leaves behind on a kernel that loads them.
fn forced_failure() -> Option<String> {
    std::env::var("IOREPRO_FORCE_LOAD_FAILURE")
        .ok()
        .filter(|v| !v.is_empty())
}

fn attach_btf(ebpf: &mut Ebpf, program_name: &str, hook: &str, btf: &AyaBtf) -> CollectResult<()> {
    let p: &mut BtfTracePoint = program(ebpf, program_name)?;
    let t0 = std::time::Instant::now();
    p.load(hook, btf).map_err(prog_err(program_name))?;
    if std::env::var("IOREPRO_T").is_ok() {
        eprintln!(
            "    load {program_name} {:.1} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
    p.attach().map_err(prog_err(program_name))?;
    Ok(())
}

/// Entries of the tgid-indexed traced-process array: `pid_max`, whose pids
/// all fit (a child forked with a larger pid after `pid_max` was raised is
/// counted as a lost process record).
fn pid_limit() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(1 << 22)
        .clamp(1024, 1 << 22)
}

/// Entries of the per-thread slot array: enough that live threads never
/// share a slot below `pid_max` (tids are below it), within the map's limit.
fn slot_count() -> u32 {
    pid_limit().next_power_of_two().clamp(1024, MAX_SLOTS)
}

/// Only the two empty programs on the syscall hooks: what any tracer on them
/// costs at least. Dropping the value detaches them.
pub fn load_floor() -> CollectResult<Ebpf> {
    ensure_tracefs()?;
    raise_memlock();
    let btf = AyaBtf::from_sys_fs()
        .map_err(|e| CollectError::Kernel(format!("/sys/kernel/btf/vmlinux: {e}")))?;
    let mut ebpf = EbpfLoader::new()
        .btf(Some(&btf))
        .map_max_entries("SLOTS", 1024)
        .load(OBJECT)
        .map_err(kernel_err("loading the eBPF object"))?;
    attach_btf(&mut ebpf, "empty_enter", "sys_enter", &btf)?;
    attach_btf(&mut ebpf, "empty_exit", "sys_exit", &btf)?;
    Ok(ebpf)
}

/// Puts the cgroup directory `dir` at index 0 of the cgroup array `map`
/// (aya has no typed wrapper for cgroup arrays: the bpf syscall directly).
fn set_cgroup(map: &MapData, dir: &std::fs::File) -> CollectResult<()> {
    use std::os::fd::{AsFd, AsRawFd};
    #[repr(C)]
    struct UpdateElem {
        map_fd: u32,
        _pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }
    let key: u32 = 0;
    let value: u32 = dir.as_raw_fd() as u32;
    let attr = UpdateElem {
        map_fd: map.fd().as_fd().as_raw_fd() as u32,
        _pad: 0,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        flags: 0,
    };
    const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
    // SAFETY: the attribute layout of BPF_MAP_UPDATE_ELEM, pointing at locals.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_UPDATE_ELEM,
            &attr as *const UpdateElem,
            std::mem::size_of::<UpdateElem>(),
        )
    };
    if r != 0 {
        return Err(CollectError::Kernel(format!(
            "following the cgroup: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

fn ring_map(ebpf: &mut Ebpf, name: &str) -> CollectResult<MapData> {
    match take_map(ebpf, name)? {
        Map::RingBuf(m) => Ok(m),
        _ => Err(CollectError::Kernel(format!(
            "map {name} is not a ring buffer"
        ))),
    }
}

fn take_map(ebpf: &mut Ebpf, name: &str) -> CollectResult<aya::maps::Map> {
    ebpf.take_map(name)
        .ok_or_else(|| CollectError::Kernel(format!("eBPF object has no map {name}")))
}

/// Tracepoints are found through tracefs, which a minimal system may not mount.
fn ensure_tracefs() -> CollectResult<()> {
    let root = Path::new("/sys/kernel/tracing");
    if root.join("events").exists() || Path::new("/sys/kernel/debug/tracing/events").exists() {
        return Ok(());
    }
    let r = unsafe {
        // SAFETY: constant NUL-terminated strings.
        libc::mount(
            c"nodev".as_ptr(),
            c"/sys/kernel/tracing".as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(CollectError::io(root, std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK.
fn raise_memlock() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a plain struct argument; failure only matters on old kernels.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
}

/// Refuses to start without the capabilities loading needs, naming the missing ones.
pub fn check_privileges(need_setuid: bool) -> CollectResult<()> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |bit: u32| eff & (1u64 << bit) != 0;
    const CAP_SETGID: u32 = 6;
    const CAP_SETUID: u32 = 7;
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let mut missing = Vec::new();
    if !has(CAP_SYS_ADMIN) {
        if !has(CAP_BPF) {
            missing.push("CAP_BPF");
        }
        if !has(CAP_PERFMON) {
            missing.push("CAP_PERFMON");
        }
    }
    if need_setuid {
        if !has(CAP_SETUID) {
            missing.push("CAP_SETUID");
        }
        if !has(CAP_SETGID) {
            missing.push("CAP_SETGID");
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(CollectError::Privilege(format!(
            "iorepro-collect needs root or CAP_BPF + CAP_PERFMON{}; this process lacks {}",
            if need_setuid {
                " + CAP_SETUID + CAP_SETGID (for --user)"
            } else {
                ""
            },
            missing.join(", ")
        )))
    }
}
