//! Phases of a training job found from its own bandwidth timeline: the initial
//! load burst, steady reading, checkpoint write spikes and idle stretches.
//!
//! Every test is relative to the trace itself, so the same rules hold for a
//! synthetic trace, a laptop capture and a 512-GPU job:
//! - a window is *write-heavy* when it writes more than it reads and at least
//!   [`WRITE_SHARE_OF_PEAK`] of the busiest write window (a log line next to a
//!   checkpoint is noise, not a spike); write-heavy windows separated by short
//!   stretches without real reading are one checkpoint;
//! - *steady* reading is the median read rate of the windows that read outside
//!   checkpoints; *load* is the read activity above [`LOAD_OVER_STEADY`] times
//!   that rate at the start of the job, before steady reading settles in;
//! - *idle* is a quiet stretch (under [`QUIET_SHARE`] of the median active
//!   window) of at least [`IDLE_MIN_S`]; shorter pauses are compute between
//!   steps and belong to the phase around them, but a stretch that reads
//!   nothing at all is idle whatever its length.

use serde::{Deserialize, Serialize};

use super::timeline::{join_spans, Timeline};

pub const WRITE_SHARE_OF_PEAK: f64 = 0.05;
pub const LOAD_OVER_STEADY: f64 = 2.0;
pub const QUIET_SHARE: f64 = 0.01;
pub const IDLE_MIN_S: f64 = 1.0;
/// Small writes this close to a checkpoint's writes (before or after) are
/// part of it: headers, metadata, index files.
pub const CHECKPOINT_TAIL_GAP_S: f64 = 0.05;
/// Pauses inside one checkpoint (serialisation between tensors, ranks that
/// start late) up to this long do not split it.
pub const CHECKPOINT_GAP_S: f64 = 0.5;
/// Steady reading has settled once this much read-active time at the steady
/// rate has been seen.
pub const STEADY_SETTLE_S: f64 = 0.5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseKind {
    Load,
    Read,
    Checkpoint,
    Idle,
}

impl PhaseKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseKind::Load => "load",
            PhaseKind::Read => "read",
            PhaseKind::Checkpoint => "checkpoint",
            PhaseKind::Idle => "idle",
        }
    }

    pub fn parse(s: &str) -> Option<PhaseKind> {
        [
            PhaseKind::Load,
            PhaseKind::Read,
            PhaseKind::Checkpoint,
            PhaseKind::Idle,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Phase {
    pub kind: PhaseKind,
    /// Seconds from the first event of the trace.
    pub start_s: f64,
    pub end_s: f64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Most writers (ranks) active in one window of the phase: how many ranks
    /// a checkpoint spike involves.
    pub max_writers: u32,
}

impl Phase {
    pub fn duration_s(&self) -> f64 {
        (self.end_s - self.start_s).max(0.0)
    }

    /// Bytes moved per second over the phase, in GiB/s.
    pub fn gib_s(&self) -> f64 {
        let d = self.duration_s();
        if d <= 0.0 {
            0.0
        } else {
            (self.read_bytes + self.write_bytes) as f64 / (1u64 << 30) as f64 / d
        }
    }
}

fn median(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let mid = v.len() / 2;
    *v.select_nth_unstable(mid).1
}

/// Finds the phases of a timeline; they cover it from the first to the last event.
pub fn detect(timeline: &Timeline) -> Vec<Phase> {
    let tl = timeline.at_most(super::timeline::MAX_PHASE_WINDOWS);
    let n = tl.len();
    if n == 0 {
        return Vec::new();
    }
    let secs = tl.window_s();
    let windows_for = |s: f64| ((s / secs).round() as usize).max(1);
    let (r, w) = (&tl.read, &tl.write);
    let mut kind = vec![PhaseKind::Read; n];

    // Checkpoints.
    let peak_write = w.iter().copied().max().unwrap_or(0);
    let write_floor = ((peak_write as f64 * WRITE_SHARE_OF_PEAK) as u64).max(1);
    let write_heavy = |i: usize| w[i] >= write_floor && w[i] >= r[i];
    let max_gap = windows_for(CHECKPOINT_GAP_S).max(2);
    let tail_gap_ns = (CHECKPOINT_TAIL_GAP_S * 1e9) as i64;
    // Reading at a tenth of the usual rate or more means the job is back to
    // training; a stray read inside a checkpoint (a config file) is not.
    let reading_floor = (median(
        (0..n)
            .filter(|&i| r[i] > 0 && !write_heavy(i))
            .map(|i| r[i])
            .collect(),
    ) / 10)
        .max(1);
    let mut i = 0;
    while i < n {
        if !write_heavy(i) {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i; // last write-heavy window of the burst
        let mut j = i + 1;
        while j < n && j - end <= max_gap {
            if write_heavy(j) {
                end = j;
            } else if r[j] > w[j] && r[j] >= reading_floor {
                break; // reading resumed: the checkpoint is over
            }
            j += 1;
        }
        // The windows at either edge that a checkpoint shares with reading
        // still hold part of it.
        let edge_floor = (write_floor / 10).max(1);
        let mut start = if start > 0
            && w[start - 1] >= edge_floor
            && kind[start - 1] != PhaseKind::Checkpoint
        {
            start - 1
        } else {
            start
        };
        let last_heavy = end;
        let mut end = if end + 1 < n && w[end + 1] >= edge_floor {
            end + 1
        } else {
            end
        };
        // Its small writes at either end (headers first; metadata, index
        // files and last flushes after) are still the checkpoint as long as
        // they follow on from its writes without a pause.
        let follows = |a: usize, b: usize| {
            let (ea, sb) = (tl.write_span[a].1, tl.write_span[b].0);
            w[a] > 0 && w[b] > 0 && sb - ea <= tail_gap_ns
        };
        while end + 1 < n
            && end + 1 - last_heavy <= max_gap
            && r[end + 1] < reading_floor
            && follows(end, end + 1)
        {
            end += 1;
        }
        let first_heavy = start;
        while start > 0
            && first_heavy - (start - 1) <= max_gap
            && kind[start - 1] != PhaseKind::Checkpoint
            && r[start - 1] < reading_floor
            && follows(start - 1, start)
        {
            start -= 1;
        }
        for k in kind.iter_mut().take(end + 1).skip(start) {
            *k = PhaseKind::Checkpoint;
        }
        i = end + 1;
    }

    // Steady read rate (measured after the first checkpoint when the job
    // reads there, so a long load does not count as steady), and the load
    // burst before it settles. Startup reads far below the steady rate
    // (imports, configs) neither count as load nor as steady reading.
    let first_ckpt_end = (0..n)
        .rev()
        .find(|&i| kind[i] == PhaseKind::Checkpoint)
        .map(|_| {
            let first = (0..n)
                .find(|&i| kind[i] == PhaseKind::Checkpoint)
                .unwrap_or(0);
            (first..n)
                .find(|&i| kind[i] != PhaseKind::Checkpoint)
                .unwrap_or(n)
        });
    let reads_in = |from: usize| -> Vec<u64> {
        (from..n)
            .filter(|&i| kind[i] != PhaseKind::Checkpoint && r[i] > 0)
            .map(|i| r[i])
            .collect()
    };
    let after = first_ckpt_end.map(reads_in).unwrap_or_default();
    let steady = median(if after.len() >= windows_for(STEADY_SETTLE_S) {
        after
    } else {
        reads_in(0)
    });
    let load_floor = (steady as f64 * LOAD_OVER_STEADY) as u64;
    let steady_floor = steady / 2;
    let settle = windows_for(STEADY_SETTLE_S);
    let mut steady_seen = 0;
    let mut load: Option<(usize, usize)> = None;
    for i in 0..n {
        if kind[i] == PhaseKind::Checkpoint {
            if load.is_some() {
                break; // a checkpoint after loading began ends the load
            }
            continue; // writes before any reading (staging inputs) do not end it
        }
        if r[i] > load_floor {
            load = Some((load.map_or(i, |l| l.0), i));
        } else if r[i] >= steady_floor.max(1) {
            steady_seen += 1;
            if steady_seen >= settle {
                break;
            }
        }
    }
    if let Some((first, last)) = load {
        for k in kind.iter_mut().take(last + 1).skip(first) {
            if *k != PhaseKind::Checkpoint {
                *k = PhaseKind::Load;
            }
        }
    }

    // Idle stretches.
    let typical = median((0..n).map(|i| r[i] + w[i]).filter(|&b| b > 0).collect());
    let quiet = |i: usize| (r[i] + w[i]) as f64 <= typical as f64 * QUIET_SHARE;
    let idle_min = windows_for(IDLE_MIN_S).max(2);
    let mut i = 0;
    while i < n {
        if !(quiet(i) && kind[i] == PhaseKind::Read) {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && quiet(i) && kind[i] == PhaseKind::Read {
            i += 1;
        }
        if i - start >= idle_min {
            for k in kind.iter_mut().take(i).skip(start) {
                *k = PhaseKind::Idle;
            }
        }
    }

    // A stretch that reads nothing is not reading, however short.
    let mut i = 0;
    while i < n {
        if kind[i] != PhaseKind::Read {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && kind[i] == PhaseKind::Read {
            i += 1;
        }
        if r[start..i].iter().all(|&b| b == 0) {
            for k in kind.iter_mut().take(i).skip(start) {
                *k = PhaseKind::Idle;
            }
        }
    }

    // Runs of one kind are phases.
    let duration = tl.duration_s();
    let mut phases: Vec<Phase> = Vec::new();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for i in 0..n {
        match runs.last_mut() {
            Some(r) if kind[r.0] == kind[i] => r.1 = i,
            _ => runs.push((i, i)),
        }
        let start_s = i as f64 * secs;
        let end_s = ((i + 1) as f64 * secs).min(duration);
        match phases.last_mut() {
            Some(p) if p.kind == kind[i] => {
                p.end_s = end_s;
                p.read_bytes += r[i];
                p.write_bytes += w[i];
                p.max_writers = p.max_writers.max(tl.writers[i]);
            }
            _ => phases.push(Phase {
                kind: kind[i],
                start_s,
                end_s,
                read_bytes: r[i],
                write_bytes: w[i],
                max_writers: tl.writers[i],
            }),
        }
    }
    sharpen_edges(&tl, &runs, &mut phases);
    phases
}

/// Moves the edges of load and checkpoint phases from window boundaries to
/// the first call's start and the last call's end, so a 60 ms checkpoint is
/// not reported as a 100 ms one; the neighbouring phases give or take the
/// difference, so the phases still tile the trace.
fn sharpen_edges(tl: &Timeline, runs: &[(usize, usize)], phases: &mut [Phase]) {
    let secs_of = |ns: i64| (ns - tl.origin_ns) as f64 / 1e9;
    for k in 0..phases.len() {
        if !matches!(phases[k].kind, PhaseKind::Load | PhaseKind::Checkpoint) {
            continue;
        }
        let (a, b) = runs[k];
        let spans = if phases[k].kind == PhaseKind::Load {
            &tl.read_span
        } else {
            &tl.write_span
        };
        let (first, last) = join_spans(&spans[a..=b]);
        if first > last {
            continue;
        }
        let lo = if k > 0 { phases[k - 1].start_s } else { 0.0 };
        let hi = if k + 1 < phases.len() {
            phases[k + 1].end_s
        } else {
            phases[k].end_s
        };
        // The first phase starts the trace, whatever its first call.
        let start = if k == 0 {
            phases[0].start_s
        } else {
            secs_of(first).clamp(lo, phases[k].end_s)
        };
        let end = secs_of(last).clamp(start, hi);
        phases[k].start_s = start;
        phases[k].end_s = end;
        if k > 0 {
            phases[k - 1].end_s = start;
        }
        if k + 1 < phases.len() {
            phases[k + 1].start_s = end;
        }
    }
}

/// How many phases of a kind there are.
pub fn count(phases: &[Phase], kind: PhaseKind) -> usize {
    phases.iter().filter(|p| p.kind == kind).count()
}

/// The phases as a table, one line each.
pub fn render(phases: &[Phase]) -> String {
    use crate::units::fmt_bytes;
    let mut s = format!(
        "{:<11} {:>10} {:>10} {:>10} {:>12} {:>12} {:>9}\n",
        "phase", "start s", "end s", "dur s", "read", "write", "GiB/s"
    );
    for p in phases {
        s.push_str(&format!(
            "{:<11} {:>10.2} {:>10.2} {:>10.2} {:>12} {:>12} {:>9.3}\n",
            p.kind.as_str(),
            p.start_s,
            p.end_s,
            p.duration_s(),
            fmt_bytes(p.read_bytes as f64),
            fmt_bytes(p.write_bytes as f64),
            p.gib_s()
        ));
    }
    s
}
