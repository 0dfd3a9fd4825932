//! The embedded object, set up for this kernel (structure offsets from its
//! BTF) and this capture (globals, map sizes), and the programs every
//! capture needs. Verifying the syscall programs and parsing BTF take most
//! of a capture's start-up, so both run side by side; failures are still
//! reported in one fixed order, so that the same kernel always names the
//! same program.

use aya::programs::BtfTracePoint;
use aya::{Btf as AyaBtf, Ebpf, EbpfLoader};
use iorepro_common::globals;

use super::kernel::{ensure_tracefs, raise_memlock};
use super::maps::{pid_limit, slot_count};
use super::optional::{self, Fields, Uring};
use super::programs::{attach_btf, load_btf_programs, load_failure, prog_err, program, Program};
use super::{Capabilities, ProbeConfig};
use crate::btf::{kernel_offsets, Btf};
use crate::error::{CollectError, CollectResult};

/// The kernel-side programs, compiled from `ebpf/iorepro-ebpf` by `cargo xtask
/// build-ebpf` and committed, so that this crate builds on stable Rust with no
/// LLVM or bpf-linker (see the crate docs for how the object is kept honest).
static OBJECT: &[u8] = aya::include_bytes_aligned!("../../bpf/iorepro.bpf.o");

/// The programs every capture needs, in the order they are loaded and
/// attached (a fixed order, so a kernel that cannot load one always names
/// the same one).
const REQUIRED: [Program; 6] = [
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

/// What the collector's own reading of the kernel's BTF found: where the
/// members the programs read lie, and the io_uring programs that fit this
/// kernel (or why none does).
pub(super) struct KernelBtf {
    pub offsets: Vec<(&'static str, u64)>,
    pub uring: Uring,
}

/// The kernel's BTF, read twice: by the collector's parser for
/// [`KernelBtf`] and by the loader. The two parses take most of start-up,
/// so they run side by side.
pub(super) fn read_btf() -> CollectResult<(KernelBtf, AyaBtf)> {
    let (ours, btf) = std::thread::scope(|scope| {
        let ours = scope.spawn(|| -> CollectResult<_> {
            let ours = Btf::from_sys_fs()?;
            Ok(KernelBtf {
                offsets: kernel_offsets(&ours)?,
                uring: optional::uring(&ours),
            })
        });
        let btf = AyaBtf::from_sys_fs()
            .map_err(|e| CollectError::Kernel(format!("/sys/kernel/btf/vmlinux: {e}")));
        (ours.join().expect("BTF parsing does not panic"), btf)
    });
    Ok((ours?, btf?))
}

/// Loads the object with this kernel's offsets and this capture's settings
/// in its globals, and its maps sized for this host; no program is loaded
/// into the kernel yet.
pub(super) fn load_object(
    cfg: &ProbeConfig<'_>,
    btf: &AyaBtf,
    kernel: &KernelBtf,
    tracepoints: &[&Fields],
) -> CollectResult<Ebpf> {
    let by_cgroup = cfg.cgroup.is_some() as u64;
    let all_files = cfg.all_files as u64;
    let slots = slot_count();
    let slot_mask = slots as u64 - 1;
    let merge_runs = cfg.merge_runs as u64;
    let requests = cfg.requests as u64;
    let mut loader = EbpfLoader::new();
    loader.btf(Some(btf));
    for (name, value) in kernel
        .offsets
        .iter()
        .chain(kernel.uring.iter().flat_map(|(_, offsets)| offsets))
        .chain(tracepoints.iter().flat_map(|f| f.iter().flatten()))
    {
        loader.override_global(name, value, true);
    }
    loader
        .override_global(globals::CGROUP, &by_cgroup, true)
        .override_global(globals::ALL_FILES, &all_files, true)
        .override_global(globals::SLOT_MASK, &slot_mask, true)
        .override_global(globals::MERGE_RUNS, &merge_runs, true)
        .override_global(globals::REQUESTS, &requests, true)
        .map_max_entries("EVENTS", cfg.ring_buffer_bytes)
        .map_max_entries("SLOTS", slots)
        .map_max_entries("TRACED", pid_limit());
    loader
        .load(OBJECT)
        .map_err(kernel_err("loading the eBPF object"))
}

/// Loads and attaches the [`REQUIRED`] programs, all or none: a refusal
/// fails the capture, naming the program and what the kernel lacks.
pub(super) fn attach_required(
    ebpf: &mut Ebpf,
    btf: &AyaBtf,
    caps: &mut Capabilities,
) -> CollectResult<()> {
    load_btf_programs(ebpf, btf, &REQUIRED)
        .map_err(|(name, purpose, e)| CollectError::Kernel(load_failure(name, purpose, e)))?;
    for (name, hook, _) in REQUIRED {
        let p: &mut BtfTracePoint = program(ebpf, name)?;
        p.attach().map_err(prog_err(name))?;
        caps.hooks.push(hook);
    }
    Ok(())
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

fn kernel_err(what: &str) -> impl Fn(aya::EbpfError) -> CollectError + '_ {
    move |e| CollectError::Kernel(format!("{what}: {e}"))
}
