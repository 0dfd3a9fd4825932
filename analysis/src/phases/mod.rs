//! Phases of a training job: the initial load, steady reading, checkpoint
//! write spikes, stretches of name-space calls and idle stretches, found from the calls themselves (see
//! [`detect`] for the rules). The one detector behind `summary`, `phases`,
//! `plot`, `compare` and the replayer's checkpoint barriers.

mod detect;

use iorepro_format::units::GIB;

use crate::activity::{process_of, Named, Stretch};
use serde::{Deserialize, Serialize};

pub use detect::{
    detect, reading_floor, CHECKPOINT_GAP_NS, CHECKPOINT_TAIL_GAP_NS, EDGE_SHARE, IDLE_MIN_NS,
    LOAD_MIN_EXCESS_RUNS, METADATA_BYTES_PER_CALL, METADATA_GAP_NS, METADATA_MIN_CALLS,
    MIN_CHECKPOINT_BYTES, READING_FLOOR_SHARE, RESUME_GAP_NS, WRITE_SHARE_OF_PEAK,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseKind {
    Load,
    Read,
    Checkpoint,
    /// Name-space calls with little data: a dataset walk, a probe storm.
    Metadata,
    Idle,
}

impl PhaseKind {
    pub const ALL: [PhaseKind; 5] = [
        PhaseKind::Load,
        PhaseKind::Read,
        PhaseKind::Checkpoint,
        PhaseKind::Metadata,
        PhaseKind::Idle,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PhaseKind::Load => "load",
            PhaseKind::Read => "read",
            PhaseKind::Checkpoint => "checkpoint",
            PhaseKind::Metadata => "metadata",
            PhaseKind::Idle => "idle",
        }
    }

    pub fn parse(s: &str) -> Option<PhaseKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One phase; the phases of a trace follow each other without gaps from its
/// first call's start to its last call's end.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Phase {
    pub kind: PhaseKind,
    /// Seconds from the first call of the trace.
    pub start_s: f64,
    pub end_s: f64,
    /// Bytes of the reads and writes that started in the phase.
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Distinct writers (ranks, or processes without a rank) that wrote in
    /// the phase: how many ranks a checkpoint spike involves.
    pub max_writers: u32,
    /// Name-space calls (stat, open, mkdir, listings...; not close) that
    /// started in the phase.
    #[serde(default)]
    pub metadata_calls: u64,
    /// Of `read_bytes`, those the storage served rather than the page cache
    /// (the rows' `storage_bytes`); absent where the trace does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_read_bytes: Option<u64>,
    /// The same edges in wall-clock Unix ns, to join with the rows' `ts`.
    pub start_unix_ns: i64,
    pub end_unix_ns: i64,
}

impl Phase {
    pub fn duration_s(&self) -> f64 {
        (self.end_s - self.start_s).max(0.0)
    }

    /// Bytes moved per second over the phase, in GiB/s.
    /// Name-space calls per second over the phase.
    pub fn metadata_calls_per_s(&self) -> f64 {
        let d = self.duration_s();
        if d <= 0.0 {
            0.0
        } else {
            self.metadata_calls as f64 / d
        }
    }

    pub fn gib_s(&self) -> f64 {
        let d = self.duration_s();
        if d <= 0.0 {
            0.0
        } else {
            (self.read_bytes + self.write_bytes) as f64 / GIB / d
        }
    }

    /// Whether the call starting at `ts` (Unix ns) belongs to this phase.
    pub fn holds(&self, ts: i64) -> bool {
        self.start_unix_ns <= ts && ts < self.end_unix_ns
    }
}

/// Index of the phase a call starting at `ts` (Unix ns) belongs to: the last
/// phase that starts at or before it (the first phase for calls before all).
pub fn phase_at(phases: &[Phase], ts: i64) -> usize {
    phases
        .partition_point(|p| p.start_unix_ns <= ts)
        .saturating_sub(1)
}

/// Detected phases as the job ran them: its start-up one phase (see
/// [`fold_startup`]), then each save begun where the job first named what
/// it saves (see [`begin_saves_where_named`]). What `phases`, `summary` and
/// the replay's plan all show; the two times come from the files' roles.
pub fn as_the_job_ran(
    detected: Vec<Phase>,
    reads: &[Stretch],
    first_data_ns: Option<i64>,
    named: &[Named],
) -> Vec<Phase> {
    begin_saves_where_named(fold_startup(detected, first_data_ns), reads, named)
}

/// A process tree's start-up as one phase: the phases that end before the
/// job's first data call (`first_data_ns`, its first read or write of a
/// dataset or checkpoint file; see [`crate::roles`]) become one
/// `metadata` phase, however the imports, library loads and configuration
/// reads of a whole capture bunch into reads, bursts and idle stretches.
/// Nothing changes when fewer than two phases end before it.
pub fn fold_startup(phases: Vec<Phase>, first_data_ns: Option<i64>) -> Vec<Phase> {
    let Some(first) = first_data_ns else {
        return phases;
    };
    let before = phases.iter().take_while(|p| p.end_unix_ns <= first).count();
    if before < 2 {
        return phases;
    }
    let mut rest = phases.into_iter();
    let folded: Vec<Phase> = rest.by_ref().take(before).collect();
    let last = folded.last().expect("two or more");
    let startup = Phase {
        kind: PhaseKind::Metadata,
        start_s: folded[0].start_s,
        end_s: last.end_s,
        read_bytes: folded.iter().map(|p| p.read_bytes).sum(),
        write_bytes: folded.iter().map(|p| p.write_bytes).sum(),
        max_writers: folded.iter().map(|p| p.max_writers).max().unwrap_or(0),
        metadata_calls: folded.iter().map(|p| p.metadata_calls).sum(),
        storage_read_bytes: sum_known(folded.iter().map(|p| p.storage_read_bytes)),
        start_unix_ns: folded[0].start_unix_ns,
        end_unix_ns: last.end_unix_ns,
    };
    std::iter::once(startup).chain(rest).collect()
}

/// Each checkpoint begun where the job first named what it saves, when
/// that comes after the naming process's last reading before the save: a
/// job that looks up a checkpoint's path or makes its folder, then
/// serialises its state in memory before it writes a byte (`torch.save`
/// into a buffer, then one write: PyTorch Lightning's atomic save), is
/// saving from that first call; its training loop is held from there.
/// Only the naming process's reading counts: a loader's workers are other
/// processes, and the batches they prefetched may still be read well into
/// a save that a loop stopping short of its loader (a step budget, a save
/// mid-epoch) began. `named`: when and by which process the job first
/// named each checkpoint file or folder it made; `reads`: the trace's read
/// runs, in time order, with their processes. The phase the naming falls
/// in gives up the stretch from there, and idle phases between it and the
/// save become the save's; reading by the naming process (a run that
/// moves at least [`reading_floor`]) stays where it was.
pub fn begin_saves_where_named(
    mut phases: Vec<Phase>,
    reads: &[Stretch],
    named: &[Named],
) -> Vec<Phase> {
    if named.is_empty() {
        return phases;
    }
    let mut named = named.to_vec();
    named.sort_unstable_by_key(|n| n.ns);
    let floor = reading_floor(reads);
    // A run that reaches past a naming began at most this long before it:
    // each naming looks at the few runs around it, not the whole trace.
    let longest = reads.iter().map(|r| r.end - r.start).max().unwrap_or(0);
    let mut i = 1;
    while i < phases.len() {
        if phases[i].kind != PhaseKind::Checkpoint || phases[i - 1].kind == PhaseKind::Checkpoint {
            i += 1;
            continue;
        }
        let start = phases[i].start_unix_ns;
        let before = &reads[..reads.partition_point(|r| r.start < start)];
        // The save may reach back over idle stretches before it (a pause
        // between its naming and its first write is the save's) into the
        // phase before them.
        let mut k = i - 1;
        while k > 0
            && phases[k].kind == PhaseKind::Idle
            && phases[k - 1].kind != PhaseKind::Checkpoint
        {
            k -= 1;
        }
        let after = phases[k].start_unix_ns;
        // The first naming after which its process read no more before
        // the save.
        let first = named[named.partition_point(|n| n.ns <= after)..]
            .iter()
            .take_while(|n| n.ns < start)
            .find(|n| {
                let process = process_of(n.pid);
                let near = before.partition_point(|r| r.start < n.ns.saturating_sub(longest));
                !before[near..]
                    .iter()
                    .any(|r| r.end >= n.ns && r.moved_by(process) >= floor)
            });
        let Some(first) = first.map(|n| n.ns) else {
            i += 1;
            continue;
        };
        // The phase the naming falls in ends there; the idle ones after it
        // become the save's.
        let cut = k + phases[k..i].partition_point(|p| p.start_unix_ns <= first) - 1;
        let earlier_s = (start - first) as f64 / 1e9;
        phases[i].start_unix_ns = first;
        phases[i].start_s -= earlier_s;
        phases[cut].end_unix_ns = first;
        phases[cut].end_s = phases[i].start_s;
        let absorbed: Vec<Phase> = phases.drain(cut + 1..i).collect();
        i = cut + 1;
        let save = &mut phases[i];
        for p in absorbed {
            save.read_bytes += p.read_bytes;
            save.write_bytes += p.write_bytes;
            save.metadata_calls += p.metadata_calls;
            save.storage_read_bytes = sum_known([save.storage_read_bytes, p.storage_read_bytes]);
        }
        i += 1;
    }
    phases
}

/// The sum of figures each of which may be unknown: known where any is.
pub fn sum_known(figures: impl IntoIterator<Item = Option<u64>>) -> Option<u64> {
    figures.into_iter().fold(None, |acc, f| match (acc, f) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    })
}

/// How many phases of a kind there are.
pub fn count(phases: &[Phase], kind: PhaseKind) -> usize {
    phases.iter().filter(|p| p.kind == kind).count()
}

/// The phases as a table, one line each; with a column of the bytes the
/// storage served the reads where the trace says (see [`crate::served`]).
pub fn render(phases: &[Phase]) -> String {
    use iorepro_format::units::fmt_bytes;
    let says = phases.iter().any(|p| p.storage_read_bytes.is_some());
    let mut s = format!(
        "{:<11} {:>10} {:>10} {:>10} {:>12} {:>12} {:>9} {:>10}",
        "phase", "start s", "end s", "dur s", "read", "write", "GiB/s", "meta/s"
    );
    if says {
        s.push_str(&format!(" {:>13}", "from storage"));
    }
    s.push('\n');
    for p in phases {
        s.push_str(&format!(
            "{:<11} {:>10.3} {:>10.3} {:>10.3} {:>12} {:>12} {:>9.3} {:>10.0}",
            p.kind.as_str(),
            p.start_s,
            p.end_s,
            p.duration_s(),
            fmt_bytes(p.read_bytes as f64),
            fmt_bytes(p.write_bytes as f64),
            p.gib_s(),
            p.metadata_calls_per_s()
        ));
        if says {
            let stored = p
                .storage_read_bytes
                .map_or("-".into(), |b| fmt_bytes(b as f64));
            s.push_str(&format!(" {stored:>13}"));
        }
        s.push('\n');
    }
    s
}
