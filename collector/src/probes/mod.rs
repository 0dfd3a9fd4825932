//! Loading and attaching the kernel-side programs, and the maps user space
//! shares with them: the traced-process set, the two ring buffers and the
//! per-CPU drop counters.
//!
//! [`Probes::load`] is the whole start-up, in order; each step lives in the
//! file that owns its concern, so that what a kernel must have, what it may
//! lack and what user space reads back are each said in one place:
//!
//! - `privileges`: who may load at all, checked before anything is touched
//!   so that a refusal names the missing capabilities, not a bare EPERM.
//! - `kernel`: what the host provides before loading (BTF, tracefs, the
//!   memlock limit of old kernels) and its release, for messages.
//! - `load`: the embedded object set up for this kernel and this capture,
//!   and the programs every capture needs: all of them or nothing, in a fixed
//!   order so that a kernel that refuses one always names the same one.
//! - `optional`: the hooks a kernel may lack (io_uring, page faults), attached
//!   where it has them and otherwise left out with the reason.
//! - `tls`: the uprobes on OpenSSL that see requests inside TLS, attached
//!   to the system's library at start and to the traced processes' own
//!   copies as they are found.
//! - `capabilities`: what was attached and what was left out, as the manifest
//!   and stderr say it.
//! - `maps`: how the maps are sized for this host, taken out of the object,
//!   and read and written while the capture runs.

mod capabilities;
mod kernel;
mod load;
mod maps;
mod optional;
mod privileges;
mod programs;
mod tls;

use std::collections::BTreeSet;

use aya::maps::{Array, HashMap, MapData, PerCpuArray};
use aya::programs::BtfTracePoint;
use aya::Ebpf;
use iorepro_common::{Slot, Written};

use crate::error::CollectResult;
use crate::ring::Ring;

pub use capabilities::{Capabilities, Missing};
pub use kernel::kernel_release;
pub use load::load_floor;
pub use optional::{DEVICE_WRITE_HOOK, FILL_HOOK, WRITEBACK_HOOK};
pub use privileges::check_privileges;

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
    /// Record the heads of HTTP requests and answers on sockets.
    pub requests: bool,
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
    /// The job's written files whose write-back the kernel side follows.
    written: HashMap<MapData, u64, Written>,
    /// What this kernel lets the capture record, and what it does not.
    pub capabilities: Capabilities,
    /// The OpenSSL libraries the TLS uprobes are attached to.
    tls: tls::Tls,
}

impl Probes {
    /// Loads and attaches every program this kernel allows: all the required
    /// ones or nothing, and of the optional ones (io_uring, page faults)
    /// those the kernel has the hooks for, saying what was left out. Nothing
    /// is traced until a tgid is added with [`Probes::trace`] (or, for a
    /// cgroup, at once).
    pub fn load(cfg: &ProbeConfig<'_>) -> CollectResult<Probes> {
        kernel::prepare()?;
        let (kernel_btf, btf) = load::read_btf()?;
        let fill = optional::fill_offsets();
        let bio = optional::bio_offsets();
        let wb = optional::writeback_offsets();
        let mut caps = Capabilities {
            kernel: kernel_release(),
            ..Capabilities::default()
        };
        let mut ebpf = load::load_object(cfg, &btf, &kernel_btf, &[&fill, &bio, &wb])?;
        load::attach_required(&mut ebpf, &btf, &mut caps)?;
        optional::attach_uring(&mut ebpf, &btf, kernel_btf.uring, &mut caps);
        optional::attach_fill(&mut ebpf, fill, &mut caps);
        optional::attach_device_writes(&mut ebpf, bio, &mut caps);
        optional::attach_writeback(&mut ebpf, wb, &mut caps);
        let tls = if cfg.requests {
            tls::Tls::start(&mut ebpf, &mut caps)
        } else {
            tls::Tls::default()
        };
        let mut probes = Probes::from_maps(ebpf, cfg.cgroup, caps)?;
        probes.tls = tls;
        Ok(probes)
    }

    /// Attaches the TLS uprobes to OpenSSL copies the traced processes
    /// have mapped since the last look (see `tls`).
    pub fn sweep_tls(&mut self) {
        let pids = self.traced();
        if let Some(ebpf) = self.ebpf.as_mut() {
            self.tls.sweep(ebpf, &pids);
        }
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
}
