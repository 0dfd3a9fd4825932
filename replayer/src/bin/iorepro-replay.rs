//! `iorepro-replay`: parse, validate, run, print. Rank 0 (or the only
//! process) prints the report; every rank prints its own errors.

use std::process::ExitCode;

use clap::Parser;
use iorepro_replayer::cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.json;
    let outcome = match cli.into_options().and_then(|o| iorepro_replayer::run(&o)) {
        Ok(o) => o,
        Err(e) => {
            let code = e.exit_code();
            eprintln!("Error: {:#}", anyhow::Error::from(e));
            return ExitCode::from(code);
        }
    };
    if let Some(report) = &outcome.report {
        if json {
            println!("{}", report.to_json());
        } else {
            print!("{}", report.to_table());
        }
        for e in &report.errors {
            eprintln!("Error: {e}");
        }
    } else {
        if let (true, Some(p)) = (outcome.prepare_only, &outcome.prepare) {
            println!(
                "prepared {} file(s), {} bytes, in {:.2} s; {} already present",
                p.files_created, p.bytes_written, p.duration_s, p.files_present
            );
        }
        for e in &outcome.local_errors {
            eprintln!("Error: {e}");
        }
    }
    if outcome.failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
