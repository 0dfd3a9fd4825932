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

/// The saves of `o`, cut by the checkpoint phases of `phases`; `None`
/// where the job saved nothing. `files`: the dataset's files, `batch`:
/// files per batch, `processes`: ranks (to count steps).
pub fn saves(
    o: &Observed,
    phases: &[Phase],
    files: u64,
    batch: u64,
    processes: u64,
) -> Option<Saves> {
    if o.checkpoints.is_empty() {
        return None;
    }
    // Each file to the last checkpoint phase begun by its first write.
    let starts: Vec<i64> = phases
        .iter()
        .filter(|p| p.kind == PhaseKind::Checkpoint)
        .map(|p| p.start_unix_ns)
        .collect();
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
    Some(Saves {
        count,
        writers,
        bytes_per_writer: total / writer_saves.max(1) as u64,
        files_per_save: o.checkpoints.len() as f64 / count as f64,
        dlio_parts: dlio_parts(o, writer_saves),
        cadence: cadence(o, &save_starts, files, batch, processes),
        folder: common_folder(o.checkpoints.keys()),
    })
}

/// When the saves at `save_starts` came, by the dataset's visits before
/// each.
fn cadence(o: &Observed, save_starts: &[i64], files: u64, batch: u64, processes: u64) -> Cadence {
    let before: Vec<u64> = save_starts
        .iter()
        .map(|&t| o.visits.partition_point(|v| v.ts < t) as u64)
        .collect();
    let epochs: Vec<f64> = before
        .iter()
        .map(|&n| n as f64 / files.max(1) as f64)
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
    // A rank's steps before each save.
    let per_step = (batch * processes).max(1);
    let steps: Vec<u64> = before.iter().map(|&n| n / per_step).collect();
    let between = most_common(steps.windows(2).map(|w| w[1].saturating_sub(w[0])))
        .unwrap_or(steps[0])
        .max(1);
    Cadence::Steps { between }
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
        let s = saves(&o, &phases, 8, 2, 1).unwrap();
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
        let s = saves(&o, &phases, 8, 2, 1).unwrap();
        assert_eq!(s.cadence, Cadence::Steps { between: 2 });
        assert!(s.dlio_parts.is_none());
        assert_eq!(s.bytes_per_writer, (5 << 20) + 2 * TORCH_SAVE_BYTES);
        assert_eq!(s.files_per_save, 2.0);
    }
}
