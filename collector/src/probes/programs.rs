//! Loading and attaching BTF-tracepoint programs, shared by the required
//! programs ([`super::load`]) and the optional hooks ([`super::optional`]):
//! a program found by name, a set verified side by side, and a refusal
//! reported with what the program is for.

use aya::programs::{BtfTracePoint, ProgramError};
use aya::{Btf as AyaBtf, Ebpf};

use super::kernel::kernel_release;
use crate::error::{CollectError, CollectResult};

/// A BTF-tracepoint program: (program, hook, what it is for).
pub(super) type Program = (&'static str, &'static str, &'static str);

pub(super) fn prog_err(what: &str) -> impl Fn(ProgramError) -> CollectError + '_ {
    move |e| CollectError::Kernel(format!("{what}: {e:#}"))
}

/// A program the kernel refused, named with what it is for and what it
/// needs, and the verifier's last words (its whole log is long).
pub(super) fn load_failure(name: &str, purpose: &str, e: ProgramError) -> String {
    let detail = match &e {
        ProgramError::LoadError {
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

/// The object's program `name`, as the kind of program `T` it is.
pub(super) fn program<'a, T>(ebpf: &'a mut Ebpf, name: &str) -> CollectResult<&'a mut T>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = ProgramError>,
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
pub(super) fn load_btf_programs(
    ebpf: &mut Ebpf,
    btf: &AyaBtf,
    programs: &[Program],
) -> Result<(), (&'static str, &'static str, ProgramError)> {
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
            ProgramError::InvalidName {
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

pub(super) fn attach_btf(
    ebpf: &mut Ebpf,
    program_name: &str,
    hook: &str,
    btf: &AyaBtf,
) -> CollectResult<()> {
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
