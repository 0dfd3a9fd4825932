//! `iorepro-replay`: parse, validate, run, print. Rank 0 (or the only
//! process) prints the report; every rank prints its own errors.

use std::process::ExitCode;

use clap::Parser;
use iorepro_replayer::cli::Cli;
use iorepro_replayer::report::output::mlperf_tree::{self, MlperfRun};
use iorepro_replayer::report::output::OutputFormat;
use iorepro_replayer::report::{page, sweep};

/// musl's allocator made the analyses four times as costly as with glibc's
/// (docs/PRODUCTION.md, "Static binaries"); the static build takes mimalloc instead.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn fail(e: iorepro_replayer::ReplayError) -> ExitCode {
    let code = e.exit_code();
    eprintln!("Error: {:#}", anyhow::Error::from(e));
    ExitCode::from(code)
}

fn main() -> ExitCode {
    let opts = match Cli::parse().into_options() {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    if opts.plan_only {
        return match iorepro_replayer::run::plan_only(&opts) {
            Ok(None) => ExitCode::SUCCESS,
            Ok(Some(plans)) => {
                if opts.output.is_machine_readable() {
                    print!("{}", sweep::json(&plans));
                } else {
                    print!("{}", sweep::render(&plans, opts.explain));
                }
                if let Some(out) = &opts.plot {
                    if let Err(e) = sweep::plot(&plans, out) {
                        return fail(e);
                    }
                    eprintln!("plot: {}", out.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        };
    }
    let mut outcome = match iorepro_replayer::run(&opts) {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    if let Some(report) = &outcome.report {
        print!("{}", opts.output.exporter().render(report));
        for e in &report.errors {
            eprintln!("Error: {e}");
        }
        if let Some(file) = &opts.report {
            // The replay's calls, where this process recorded them all
            // (not the per-rank records of a launched run).
            let ops = opts
                .record_ops
                .as_deref()
                .filter(|d| d.join("manifest.json").exists());
            match page::write(file, report, &opts.trace, ops) {
                Ok(()) => eprintln!("report: {}", file.display()),
                Err(e) => {
                    eprintln!("Error: {:#}", anyhow::Error::from(e));
                    outcome.failed = true;
                }
            }
        }
        if let Some(results) = &opts.mlperf_results {
            let run = MlperfRun {
                results,
                model: opts.mlperf_model.as_deref(),
                trace: &opts.trace,
                command_line: std::env::args().collect(),
            };
            let log = OutputFormat::Table.exporter().render(report);
            match mlperf_tree::write(&run, report, &log) {
                Ok(dir) => eprintln!("mlperf results: {}", dir.display()),
                Err(e) => {
                    eprintln!("Error: {:#}", anyhow::Error::from(e));
                    outcome.failed = true;
                }
            }
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
    if let (true, Some(dir)) = (opts.record_ops_for_report, &opts.record_ops) {
        let _ = std::fs::remove_dir_all(dir);
    }
    outcome.linger();
    if outcome.failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
