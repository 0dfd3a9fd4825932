use clap::Parser;
use iorepro_collector::{run, Opts};

/// musl's allocator made the analyses four times as costly as with glibc's
/// (docs/PRODUCTION.md, "Static binaries"); the static build takes mimalloc instead.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let opts = Opts::parse();
    let result = opts
        .validate()
        .map_err(anyhow::Error::from)
        .and_then(|o| run(o).map_err(anyhow::Error::from));
    match result {
        Ok(outcome) => std::process::exit(outcome.exit_code),
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::exit(2);
        }
    }
}
