//! Two traces side by side — a capture and its replay's `--record-ops` trace,
//! or two captures — as relative errors `(B − A) / A`, overall and per phase.
//! Phases of A are matched in order to the next phase of the same kind in B,
//! so an extra idle stretch in B does not shift every later match. When the
//! two have different rank counts (a trace of 1 rank against its replay at
//! 4), the bytes are compared per rank too.

use serde::Serialize;

use crate::overview::Overview;
use crate::phases::{Phase, PhaseKind};

#[derive(Debug, Clone, Serialize)]
pub struct PhaseComparison {
    pub kind: PhaseKind,
    /// Position of the phase in A's list, and of its match in B's (None when B has none).
    pub a_index: usize,
    pub b_index: Option<usize>,
    pub a_duration_s: f64,
    pub b_duration_s: Option<f64>,
    pub a_gib_s: f64,
    pub b_gib_s: Option<f64>,
    pub duration_error: Option<f64>,
    pub gib_s_error: Option<f64>,
    pub read_bytes_error: Option<f64>,
    pub write_bytes_error: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub a_duration_s: f64,
    pub b_duration_s: f64,
    /// Relative, signed: (B − A) / A; null where A is 0 and B is not.
    pub duration_error: Option<f64>,
    pub read_bytes_error: Option<f64>,
    pub write_bytes_error: Option<f64>,
    pub events_error: Option<f64>,
    /// Ranks of each side.
    pub a_ranks: usize,
    pub b_ranks: usize,
    /// Bytes per rank, (B/b_ranks − A/a_ranks) / (A/a_ranks); only when the
    /// rank counts differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_rank_read_bytes_error: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_rank_write_bytes_error: Option<f64>,
    pub peak_read_gib_s_error: Option<f64>,
    pub peak_write_gib_s_error: Option<f64>,
    pub phases: Vec<PhaseComparison>,
    /// Phases of B that no phase of A was matched to.
    pub unmatched_b_phases: usize,
}

/// `(b − a) / a`; 0 when both are 0, None when only `a` is.
pub fn relative_error(a: f64, b: f64) -> Option<f64> {
    if a == 0.0 {
        (b == 0.0).then_some(0.0)
    } else {
        Some((b - a) / a)
    }
}

fn match_phases(a: &[Phase], b: &[Phase]) -> (Vec<PhaseComparison>, usize) {
    // The k-th phase of a kind in A is matched to the k-th phase of that kind
    // in B: one cursor per kind, so a short extra phase of one kind (a brief
    // read lull after a checkpoint, say) cannot shift the matches of another.
    let mut out = Vec::with_capacity(a.len());
    let mut cursors: Vec<(PhaseKind, usize)> = Vec::new();
    let mut matched = 0;
    for (ai, pa) in a.iter().enumerate() {
        let slot = match cursors.iter().position(|(k, _)| *k == pa.kind) {
            Some(i) => i,
            None => {
                cursors.push((pa.kind, 0));
                cursors.len() - 1
            }
        };
        let cursor = cursors[slot].1;
        let found = (cursor..b.len()).find(|&j| b[j].kind == pa.kind);
        let pb = found.map(|j| &b[j]);
        if let Some(j) = found {
            cursors[slot].1 = j + 1;
            matched += 1;
        }
        let err = |f: fn(&Phase) -> f64| pb.and_then(|pb| relative_error(f(pa), f(pb)));
        out.push(PhaseComparison {
            kind: pa.kind,
            a_index: ai,
            b_index: found,
            a_duration_s: pa.duration_s(),
            b_duration_s: pb.map(Phase::duration_s),
            a_gib_s: pa.gib_s(),
            b_gib_s: pb.map(Phase::gib_s),
            duration_error: err(Phase::duration_s),
            gib_s_error: err(Phase::gib_s),
            read_bytes_error: err(|p| p.read_bytes as f64),
            write_bytes_error: err(|p| p.write_bytes as f64),
        });
    }
    (out, b.len() - matched)
}

/// A against B; `ranks` are each side's rank counts (see
/// [`crate::overview::rank_count`]).
pub fn compare(
    a_name: &str,
    a: &Overview,
    b_name: &str,
    b: &Overview,
    ranks: (usize, usize),
) -> Comparison {
    let (phases, unmatched_b_phases) = match_phases(&a.phases, &b.phases);
    let (ar, br) = (ranks.0.max(1) as f64, ranks.1.max(1) as f64);
    let per_rank = |x: u64, y: u64| {
        (ranks.0.max(1) != ranks.1.max(1))
            .then(|| relative_error(x as f64 / ar, y as f64 / br))
            .flatten()
    };
    Comparison {
        a: a_name.to_string(),
        b: b_name.to_string(),
        a_duration_s: a.duration_s,
        b_duration_s: b.duration_s,
        duration_error: relative_error(a.duration_s, b.duration_s),
        read_bytes_error: relative_error(a.read_bytes as f64, b.read_bytes as f64),
        write_bytes_error: relative_error(a.write_bytes as f64, b.write_bytes as f64),
        events_error: relative_error(a.events as f64, b.events as f64),
        a_ranks: ranks.0,
        b_ranks: ranks.1,
        per_rank_read_bytes_error: per_rank(a.read_bytes, b.read_bytes),
        per_rank_write_bytes_error: per_rank(a.write_bytes, b.write_bytes),
        peak_read_gib_s_error: relative_error(a.peak_read_gib_s, b.peak_read_gib_s),
        peak_write_gib_s_error: relative_error(a.peak_write_gib_s, b.peak_write_gib_s),
        phases,
        unmatched_b_phases,
    }
}

fn pct(e: Option<f64>) -> String {
    match e {
        Some(v) => format!("{:+.1} %", v * 100.0),
        None => "n/a".to_string(),
    }
}

impl Comparison {
    pub fn render(&self) -> String {
        let mut s = format!("A = {}\nB = {}\n", self.a, self.b);
        s.push_str(&format!(
            "duration {:.3} s -> {:.3} s ({})   read bytes {}   write bytes {}\n",
            self.a_duration_s,
            self.b_duration_s,
            pct(self.duration_error),
            pct(self.read_bytes_error),
            pct(self.write_bytes_error)
        ));
        if self.per_rank_read_bytes_error.is_some() || self.per_rank_write_bytes_error.is_some() {
            s.push_str(&format!(
                "ranks {} -> {}: per rank, read bytes {}   write bytes {}\n",
                self.a_ranks,
                self.b_ranks,
                pct(self.per_rank_read_bytes_error),
                pct(self.per_rank_write_bytes_error)
            ));
        }
        s.push_str(&format!(
            "\n{:<11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
            "phase", "A dur s", "B dur s", "dur err", "A GiB/s", "B GiB/s", "GiB/s err"
        ));
        for p in &self.phases {
            let opt =
                |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |v| format!("{v:.prec$}"));
            s.push_str(&format!(
                "{:<11} {:>10.3} {:>10} {:>10} {:>10.3} {:>10} {:>10}\n",
                p.kind.as_str(),
                p.a_duration_s,
                opt(p.b_duration_s, 3),
                pct(p.duration_error),
                p.a_gib_s,
                opt(p.b_gib_s, 3),
                pct(p.gib_s_error)
            ));
        }
        if self.unmatched_b_phases > 0 {
            s.push_str(&format!(
                "{} phases of B have no counterpart in A\n",
                self.unmatched_b_phases
            ));
        }
        s
    }
}
