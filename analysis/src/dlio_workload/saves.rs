//! A job's saves as DLIO's checkpoint settings: how many, who writes them
//! (rank 0 alone or every rank), how many bytes each writer writes, and
//! when (every k epochs, or every k steps).
//!
//! DLIO's own saves name their parts (`model-E-S-R.pt`,
//! `optimizer-E-S-R.pt`, `layer-L-E-S-R.pt`): where the files are so named,
//! each part's size comes back as the setting that made it. Any other job's
//! save is one model of its bytes per writer, one file each.

use std::collections::{BTreeMap, BTreeSet};

use crate::phases::{Phase, PhaseKind};

use super::observe::Observed;

/// What `torch.save` adds to one int8 tensor of DLIO's (its zip container
/// and pickle), in bytes: a model file is `model_size` and this.
pub const TORCH_SAVE_BYTES: u64 = 1_577;

/// The saves seen.
#[derive(Debug, Clone, PartialEq)]
pub struct Saves {
    pub count: usize,
    /// The ranks that wrote checkpoint files (-1: rows without a rank).
    pub writers: BTreeSet<i32>,
    /// Bytes a writer wrote in a save, the mean over saves and writers.
    pub bytes_per_writer: u64,
    /// Files written per save, the mean.
    pub files_per_save: f64,
    /// The parts of DLIO's own saves, where the names say.
    pub dlio_parts: Option<DlioParts>,
    pub cadence: Cadence,
    /// The deepest folder holding every checkpoint file.
    pub folder: String,
}

/// The parts of one writer's DLIO save, in bytes of each file less
/// [`TORCH_SAVE_BYTES`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DlioParts {
    pub model: Option<u64>,
    pub optimizer: Option<u64>,
    /// Layer files per save and writer, and the size of one.
    pub layers: u64,
    pub layer: Option<u64>,
}

/// When the saves came.
#[derive(Debug, Clone, PartialEq)]
pub enum Cadence {
    /// At the ends of epochs: after epoch `after`, then every `between`.
    Epochs { after: u64, between: u64 },
    /// Every `between` steps of each rank.
    Steps { between: u64 },
}

/// How far from a whole epoch a save may come and still be at its end,
/// in epochs (a rank's last batch may be short, or read ahead).
const EPOCH_EDGE: f64 = 0.05;

/// How the dataset was read, to count steps: its files, files per batch,
/// the ranks, and a rank's time from one batch to the next where the
/// rhythm told it.
#[derive(Debug, Clone, Copy)]
pub struct Steps {
    pub files: u64,
    pub batch: u64,
    pub processes: u64,
    pub step_s: Option<f64>,
}

/// The saves of `o`, cut by the checkpoint phases of `phases`; `None`
/// where the job saved nothing.
pub fn saves(o: &Observed, phases: &[Phase], steps: Steps) -> Option<Saves> {
    if o.checkpoints.is_empty() {
        return None;
    }
    // Each file to the last checkpoint phase begun by its first write.
    let checkpoint_phases: Vec<&Phase> = phases
        .iter()
        .filter(|p| p.kind == PhaseKind::Checkpoint)
        .collect();
    let starts: Vec<i64> = checkpoint_phases.iter().map(|p| p.start_unix_ns).collect();
    let mut by_save: BTreeMap<usize, Vec<(&String, i64, i32, u64)>> = BTreeMap::new();
    for (path, f) in &o.checkpoints {
        let at = starts.partition_point(|&s| s <= f.first_write_ns);
        by_save
            .entry(at)
            .or_default()
            .push((path, f.first_write_ns, f.rank, f.bytes));
    }
    let count = by_save.len();
    let writers: BTreeSet<i32> = o.checkpoints.values().map(|f| f.rank).collect();
    let total: u64 = o.checkpoints.values().map(|f| f.bytes).sum();
    let writer_saves: usize = by_save
        .values()
        .map(|fs| fs.iter().map(|f| f.2).collect::<BTreeSet<_>>().len())
        .sum();
    let save_starts: Vec<i64> = by_save
        .values()
        .map(|fs| fs.iter().map(|f| f.1).min().unwrap_or(0))
        .collect();
    // Where each save's phase ended (its first write where no phase holds it).
    let save_ends: Vec<i64> = by_save
        .iter()
        .zip(&save_starts)
        .map(|((&at, _), &start)| {
            at.checked_sub(1)
                .and_then(|i| checkpoint_phases.get(i))
                .map_or(start, |p| p.end_unix_ns.max(start))
        })
        .collect();
    Some(Saves {
        count,
        writers,
        bytes_per_writer: total / writer_saves.max(1) as u64,
        files_per_save: o.checkpoints.len() as f64 / count as f64,
        dlio_parts: dlio_parts(o, writer_saves),
        cadence: cadence(o, &save_starts, &save_ends, steps),
        folder: common_folder(o.checkpoints.keys()),
    })
}

/// When the saves at `save_starts` (ending at `save_ends`) came: at
/// epochs' ends where the dataset's visits before each are whole epochs,
/// else every k steps ([`steps_between`]).
fn cadence(o: &Observed, save_starts: &[i64], save_ends: &[i64], steps: Steps) -> Cadence {
    let before: Vec<u64> = save_starts
        .iter()
        .map(|&t| o.visits.partition_point(|v| v.ts < t) as u64)
        .collect();
    let epochs: Vec<f64> = before
        .iter()
        .map(|&n| n as f64 / steps.files.max(1) as f64)
        .collect();
    let whole = epochs
        .iter()
        .all(|e| e.round() >= 1.0 && (e - e.round()).abs() <= EPOCH_EDGE);
    if whole {
        let at: Vec<u64> = epochs.iter().map(|e| e.round() as u64).collect();
        let between = most_common(at.windows(2).map(|w| w[1].saturating_sub(w[0]))).unwrap_or(1);
        return Cadence::Epochs {
            after: at[0],
            between: between.max(1),
        };
    }
    Cadence::Steps {
        between: steps_between(o, &before, save_starts, save_ends, steps),
    }
}

/// A rank's steps from one save to the next. The visits before each save
/// count the batches a loader read ahead too, more of them after an
/// epoch's start than before its end, so they bound it only: `n` saves
/// every `k` steps in a rank's `s` steps (all its visits over batch and
/// ranks) put `k` in `s / (n + 1) < k <= s / n`. Within that, the `k`
/// whose steps at the traced step time come nearest the median time from
/// one save's end to the next's start; without a step time (or a bound),
/// the steps counted from the visits between saves, the most common.
fn steps_between(
    o: &Observed,
    before: &[u64],
    save_starts: &[i64],
    save_ends: &[i64],
    steps: Steps,
) -> u64 {
    let per_step = (steps.batch * steps.processes).max(1);
    let counted: Vec<u64> = before.iter().map(|&n| n / per_step).collect();
    let by_visits = most_common(counted.windows(2).map(|w| w[1].saturating_sub(w[0])))
        .unwrap_or(counted[0])
        .max(1);
    let (rank_steps, n) = (o.visits.len() as u64 / per_step, before.len() as u64);
    let (low, high) = (rank_steps / (n + 1), rank_steps / n.max(1));
    let mut gaps: Vec<f64> = save_starts
        .iter()
        .skip(1)
        .zip(save_ends)
        .map(|(next, end)| (next - end).max(0) as f64 / 1e9)
        .collect();
    gaps.sort_by(f64::total_cmp);
    match (steps.step_s.filter(|t| *t > 0.0), gaps.get(gaps.len() / 2)) {
        (Some(t), Some(gap)) if low < high => (low + 1..=high)
            .min_by(|a, b| {
                let off = |k: &u64| (*k as f64 * t - gap).abs();
                off(a).total_cmp(&off(b))
            })
            .unwrap_or(by_visits),
        _ => by_visits,
    }
}

/// The most common value (the larger on a tie).
fn most_common(values: impl Iterator<Item = u64>) -> Option<u64> {
    let mut n: BTreeMap<u64, usize> = BTreeMap::new();
    for v in values {
        *n.entry(v).or_default() += 1;
    }
    n.into_iter().max_by_key(|&(v, c)| (c, v)).map(|(v, _)| v)
}

/// The parts of DLIO's saves where every checkpoint file is named as DLIO
/// names them; `writer_saves`: saves times writers.
fn dlio_parts(o: &Observed, writer_saves: usize) -> Option<DlioParts> {
    let mut parts = DlioParts::default();
    let mut layer_files = 0u64;
    for (path, f) in &o.checkpoints {
        let name = path.rsplit('/').next().unwrap_or(path);
        let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
        let fields: Vec<&str> = stem.split('-').collect();
        let numbers = |from: usize| fields[from..].iter().all(|x| x.parse::<u64>().is_ok());
        let size = f.bytes.saturating_sub(TORCH_SAVE_BYTES);
        match fields.as_slice() {
            ["model", _, _, _] if numbers(1) => parts.model = Some(size),
            ["optimizer", _, _, _] if numbers(1) => parts.optimizer = Some(size),
            ["layer", _, _, _, _] if numbers(1) => {
                parts.layer = Some(size);
                layer_files += 1;
            }
            _ => return None,
        }
    }
    parts.layers = layer_files / writer_saves.max(1) as u64;
    Some(parts)
}

/// The deepest folder holding every path of `paths`.
pub fn common_folder<'a>(paths: impl Iterator<Item = &'a String>) -> String {
    let mut common: Option<Vec<&str>> = None;
    for p in paths {
        let dir: Vec<&str> = p
            .rsplit_once('/')
            .map_or("", |(d, _)| d)
            .split('/')
            .collect();
        common = Some(match common {
            None => dir,
            Some(c) => c
                .iter()
                .zip(&dir)
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| *a)
                .collect(),
        });
    }
    let c = common.unwrap_or_default().join("/");
    if c.is_empty() {
        "/".to_string()
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dlio_workload::observe::{CheckpointFile, Visit};

    const S: i64 = 1_000_000_000;

    fn steps(files: u64, batch: u64, step_s: Option<f64>) -> Steps {
        Steps {
            files,
            batch,
            processes: 1,
            step_s,
        }
    }

    fn save_phase(at: i64) -> Phase {
        Phase {
            kind: PhaseKind::Checkpoint,
            start_s: at as f64,
            end_s: at as f64 + 1.0,
            read_bytes: 0,
            write_bytes: 1,
            max_writers: 1,
            metadata_calls: 0,
            storage_read_bytes: None,
            start_unix_ns: at * S,
            end_unix_ns: at * S + S,
        }
    }

    /// 3 epochs of 8 files, read one a second; `saves_at`: the seconds of
    /// the saves, each a model and a layer file of rank 0.
    fn job(saves_at: &[i64], names: &dyn Fn(usize) -> [String; 2]) -> (Observed, Vec<Phase>) {
        let mut o = Observed::default();
        for i in 0..24 {
            o.visits.push(Visit {
                ts: i * S + S / 2,
                rank: 0,
                pid: 1,
                tid: 1,
                file: 0,
            });
        }
        for (k, &at) in saves_at.iter().enumerate() {
            for (j, name) in names(k).into_iter().enumerate() {
                let bytes = if j == 0 { 4 << 20 } else { 1 << 20 } + TORCH_SAVE_BYTES;
                o.checkpoints.insert(
                    format!("/c/{name}"),
                    CheckpointFile {
                        first_write_ns: at * S + j as i64,
                        rank: 0,
                        bytes,
                    },
                );
            }
        }
        (o, saves_at.iter().map(|&a| save_phase(a)).collect())
    }

    #[test]
    fn dlio_saves_at_each_epoch_end_come_back() {
        let names = |k: usize| {
            [
                format!("model-{}-4-0.pt", k + 1),
                format!("layer-0-{}-4-0.pt", k + 1),
            ]
        };
        let (o, phases) = job(&[8, 16, 24], &names);
        let s = saves(&o, &phases, steps(8, 2, None)).unwrap();
        assert_eq!(s.count, 3);
        assert_eq!(
            s.cadence,
            Cadence::Epochs {
                after: 1,
                between: 1
            }
        );
        let p = s.dlio_parts.unwrap();
        assert_eq!(
            (p.model, p.layers, p.layer, p.optimizer),
            (Some(4 << 20), 1, Some(1 << 20), None)
        );
        assert_eq!(s.folder, "/c");
        assert_eq!(s.writers, BTreeSet::from([0]));
    }

    #[test]
    fn saves_inside_epochs_are_every_k_steps() {
        let names = |k: usize| [format!("step{k}.ckpt"), format!("step{k}.opt")];
        // After 4, 8, 12... files: every 2 steps of 2 files.
        let (o, phases) = job(&[4, 8, 12, 20], &names);
        let s = saves(&o, &phases, steps(8, 2, None)).unwrap();
        assert_eq!(s.cadence, Cadence::Steps { between: 2 });
        assert!(s.dlio_parts.is_none());
        assert_eq!(s.bytes_per_writer, (5 << 20) + 2 * TORCH_SAVE_BYTES);
        assert_eq!(s.files_per_save, 2.0);
    }

    #[test]
    fn steps_between_saves_are_told_past_the_loaders_read_ahead() {
        // 3 epochs of 16 steps of 2 files, a step a second; the loader
        // reads 4 batches ahead, from each epoch's start; a save of 0.5 s
        // after every 10th step. The visits before each save run up to 4
        // batches ahead of the steps, fewer near an epoch's end.
        let (mut o, mut phases) = (Observed::default(), Vec::new());
        let (mut clock, mut step) = (0i64, 0u64);
        let visit = |o: &mut Observed, ts: i64| {
            for _ in 0..2 {
                o.visits.push(Visit {
                    ts,
                    rank: 0,
                    pid: 1,
                    tid: 2,
                    file: 0,
                });
            }
        };
        for _epoch in 0..3 {
            for b in 0..4 {
                visit(&mut o, clock + b);
            }
            for j in 0..16 {
                clock += S;
                step += 1;
                if j + 4 < 16 {
                    visit(&mut o, clock);
                }
                if step % 10 == 0 {
                    o.checkpoints.insert(
                        format!("/c/step{step}"),
                        CheckpointFile {
                            first_write_ns: clock + 1,
                            rank: 0,
                            bytes: 1 << 20,
                        },
                    );
                    let mut p = save_phase(0);
                    (p.start_unix_ns, p.end_unix_ns) = (clock, clock + S / 2);
                    phases.push(p);
                    clock += S / 2;
                }
            }
        }
        o.visits.sort_by_key(|v| v.ts);
        let by_visits = saves(&o, &phases, steps(32, 2, None)).unwrap();
        assert_ne!(by_visits.cadence, Cadence::Steps { between: 10 });
        let timed = saves(&o, &phases, steps(32, 2, Some(1.0))).unwrap();
        assert_eq!(timed.count, 4);
        assert_eq!(timed.cadence, Cadence::Steps { between: 10 });
    }
}
