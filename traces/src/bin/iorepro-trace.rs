//! `iorepro-trace`: inspect, analyze, convert and synthesize traces.

use std::process::ExitCode;

use clap::Parser;
use iorepro_traces::cli::{run, Cli};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::from(iorepro_traces::cli::exit_code(&e))
        }
    }
}
