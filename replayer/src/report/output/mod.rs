//! How the report is printed: a table for people, our JSON for scripts, and
//! the layouts other tools print, so dashboards built for them read our
//! results: fio's `--output-format=json` and MLPerf Storage's summary, and
//! a replay as a run of MLPerf Storage's results tree ([`mlperf_tree`]).
//! One file per format behind [`Exporter`].

mod fio;
mod mlperf;
pub mod mlperf_tree;
mod table;

use crate::report::summary::Report;

pub trait Exporter {
    fn render(&self, report: &Report) -> String;
}

/// `--output-format`: `table`, `json`, `fio` or `mlperf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
    Fio,
    Mlperf,
}

struct Table;
struct Json;

impl Exporter for Table {
    fn render(&self, report: &Report) -> String {
        table::render(report)
    }
}

impl Exporter for Json {
    fn render(&self, report: &Report) -> String {
        serde_json::to_string_pretty(report).expect("report serialises") + "\n"
    }
}

impl OutputFormat {
    pub fn exporter(self) -> &'static dyn Exporter {
        match self {
            OutputFormat::Table => &Table,
            OutputFormat::Json => &Json,
            OutputFormat::Fio => &fio::Fio,
            OutputFormat::Mlperf => &mlperf::Mlperf,
        }
    }

    /// Whether the output is for a program (no progress bar on the terminal).
    pub fn is_machine_readable(self) -> bool {
        self != OutputFormat::Table
    }
}
