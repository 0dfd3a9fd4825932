//! The `iorepro-trace` command line: raw arguments parsed by clap, each
//! subcommand a small function over the library.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::error::TraceError;
use crate::reader::TraceReader;
use crate::summary::Summary;
use crate::synth::Workload;
use crate::writer::WriterOptions;
use crate::Source;

#[derive(Debug, Parser)]
#[command(name = "iorepro-trace", version, about = "Inspect, analyze, convert and synthesize iorepro traces")]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Totals, op mix, peaks and phases of a trace.
    Summary {
        trace: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Check that a trace is complete and consistent.
    Validate {
        trace: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Make a synthetic trace from a workload description (TOML).
    Synth {
        workload: PathBuf,
        #[arg(short, long)]
        out: PathBuf,
        /// Rows per segment file.
        #[arg(long, default_value_t = 1 << 20)]
        segment_events: usize,
    },
}

/// Bad input (a trace or workload that cannot be used) exits 2; anything else 1.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<TraceError>()) {
        2
    } else {
        1
    }
}

pub fn run(cli: Cli) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match cli.cmd {
        Cmd::Summary { trace, json } => {
            let reader = TraceReader::open(&trace)?;
            let s = Summary::compute(&reader)?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&s)?)?;
            } else {
                write!(out, "{}", s.render())?;
            }
        }
        Cmd::Validate { trace, json } => {
            let v = crate::validate::validate(&trace)?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                writeln!(
                    out,
                    "{}: ok: {} events in {} segments, {} dropped at capture",
                    trace.display(),
                    v.events,
                    v.segments,
                    v.dropped_events
                )?;
                for w in &v.warnings {
                    writeln!(out, "warning: {w}")?;
                }
            }
        }
        Cmd::Synth {
            workload,
            out: dir,
            segment_events,
        } => {
            let w = Workload::load(&workload)?;
            let mut opts = WriterOptions::new(Source::Synth);
            opts.segment_rows = segment_events.max(1);
            opts.command = Some(std::env::args().collect());
            let m = w.write_trace(&dir, opts)?;
            writeln!(
                out,
                "{}: {} events in {} segments, {:.3} s",
                dir.display(),
                m.events,
                m.segments.len(),
                m.duration_s()
            )?;
        }
    }
    Ok(())
}
