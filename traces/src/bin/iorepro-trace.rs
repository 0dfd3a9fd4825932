//! `iorepro-trace`: inspect, analyze, convert and synthesize traces.

use std::process::ExitCode;

use clap::Parser;
use iorepro_traces::cli::{run, Cli};

/// musl's allocator made the analyses four times as costly as with glibc's
/// (docs/PRODUCTION.md, "Static binaries"); the static build takes mimalloc instead.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // A reader that stops early (`| head`) ends the command quietly, as it
    // ends `cat` or `rg`: the default action of SIGPIPE, which Rust's
    // runtime turns off (every write would then fail with EPIPE instead).
    // SAFETY: setting a signal's disposition to its default, before any
    // thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::from(iorepro_traces::cli::exit_code(&e))
        }
    }
}
