//! What `--plan-only` prints: one plan's verdict (its model's details
//! first with `--explain`), or, for a sizing sweep (lists of `--ranks` and
//! `--bandwidth`), one table with a row per world and bandwidth, each row
//! the figures of that plan's verdict.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::verdict::Verdict;
use crate::error::ReplayResult;
use crate::plan::scale::Forecast;
use iorepro_plot::{SizingFigure, SizingLine};

/// One plan: the scaling model's forecast and its verdict.
#[derive(Debug, Clone, Serialize)]
pub struct PlanAnswer {
    #[serde(flatten)]
    pub forecast: Forecast,
    pub verdict: Verdict,
}

/// A row of the sweep's JSON: the world, the bandwidth, and the verdict.
#[derive(Serialize)]
struct Row<'a> {
    ranks: u32,
    nodes: u32,
    bandwidth_gib_s: Option<f64>,
    verdict: &'a Verdict,
}

/// The plans for people: one plan's verdict, or the sweep's table.
pub fn render(answers: &[PlanAnswer], explain: bool) -> String {
    let mut s = String::new();
    if explain {
        for a in answers {
            s.push_str(&a.forecast.render());
        }
    }
    match answers {
        [one] => s.push_str(&one.verdict.render()),
        many => s.push_str(&table(many)),
    }
    s
}

/// The plans for scripts: one plan's forecast with its `verdict`, or the
/// sweep's rows.
pub fn json(answers: &[PlanAnswer]) -> String {
    let text = match answers {
        [one] => serde_json::to_string_pretty(one),
        many => {
            let rows: Vec<Row> = many
                .iter()
                .map(|a| Row {
                    ranks: a.verdict.ranks,
                    nodes: a.verdict.nodes,
                    bandwidth_gib_s: a.verdict.bandwidth_gib_s,
                    verdict: &a.verdict,
                })
                .collect();
            serde_json::to_string_pretty(&serde_json::json!({ "sweep": rows }))
        }
    };
    text.expect("the plan serialises") + "\n"
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// A row per plan: the epochs' time and lowest AU, the longest save and
/// the saves' share of the run, and the bandwidths the job at N needs.
fn table(answers: &[PlanAnswer]) -> String {
    let mut s = String::new();
    let bar = answers
        .first()
        .map_or(90.0, |a| a.verdict.au_threshold_percent);
    let _ = writeln!(
        s,
        "sizing sweep: {} plan(s); AU as MLPerf Storage computes it, the bar {bar:.0} %",
        answers.len()
    );
    let _ = writeln!(
        s,
        "{:>7} {:>6} {:>10} {:>9} {:>8} {:>5} {:>8} {:>8} {:>11} {:>11}",
        "ranks",
        "nodes",
        "read GiB/s",
        "epoch s",
        "min AU %",
        "pass",
        "save s",
        "saves %",
        "need read",
        "need write"
    );
    for a in answers {
        let v = &a.verdict;
        let epoch_s = (!v.epochs.is_empty())
            .then(|| v.epochs.iter().map(|e| e.duration_s).sum::<f64>() / v.epochs.len() as f64);
        let min_au = v
            .epochs
            .iter()
            .filter_map(|e| e.au_percent)
            .reduce(f64::min);
        let pass = match min_au {
            Some(au) if au >= v.au_threshold_percent => "yes",
            Some(_) => "NO",
            None => "-",
        };
        let save_s = v.saves.iter().map(|x| x.duration_s).reduce(f64::max);
        let _ = writeln!(
            s,
            "{:>7} {:>6} {:>10} {:>9} {:>8} {:>5} {:>8} {:>8} {:>11} {:>11}",
            v.ranks,
            v.nodes,
            v.bandwidth_gib_s
                .map_or_else(|| "fed".to_string(), |b| format!("{b:.3}")),
            opt(epoch_s, 2),
            opt(min_au, 1),
            pass,
            opt(save_s, 2),
            opt(v.saves_share_percent, 1),
            opt(v.read_gib_s_for_au, 3),
            opt(v.write_gib_s_for_saves, 3),
        );
    }
    let _ = writeln!(
        s,
        "need read: GiB/s for AU >= {bar:.0} % in every epoch; need write: GiB/s for saves <= {:.0} % \
         of the run; save s: the longest save, at --write-bandwidth, else at the row's GiB/s \
         (fed: at the traced write rate)",
        super::verdict::SAVE_SHARE_PERCENT
    );
    s
}

/// Draws the plans into `out` (.svg or .png): a line per rank count, each
/// plan a point at its read (left) and write (right) bandwidth. A plan on
/// storage that keeps up has no bandwidth to stand at, and is left out.
pub fn plot(answers: &[PlanAnswer], out: &Path) -> ReplayResult<()> {
    let mut lines: Vec<SizingLine> = Vec::new();
    for a in answers {
        let v = &a.verdict;
        let name = format!("{} ranks", v.ranks);
        let at = match lines.iter().position(|l| l.name == name) {
            Some(i) => i,
            None => {
                lines.push(SizingLine {
                    name,
                    au: Vec::new(),
                    save_s: Vec::new(),
                });
                lines.len() - 1
            }
        };
        let Some(read) = v.bandwidth_gib_s else {
            continue;
        };
        let write = a.forecast.write_bandwidth_gib_s.unwrap_or(read);
        if let Some(au) = v
            .epochs
            .iter()
            .filter_map(|e| e.au_percent)
            .reduce(f64::min)
        {
            lines[at].au.push((read, au));
        }
        if let Some(s) = v.saves.iter().map(|x| x.duration_s).reduce(f64::max) {
            lines[at].save_s.push((write, s));
        }
    }
    let bar = answers
        .first()
        .map_or(90.0, |a| a.verdict.au_threshold_percent);
    let figure = SizingFigure {
        title: "sizing sweep: AU and saves against the storage's bandwidth".into(),
        lines,
        bar,
    };
    Ok(iorepro_plot::sizing(&figure, out)?)
}
