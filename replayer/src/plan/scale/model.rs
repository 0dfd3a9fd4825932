//! The model of one replay at N ranks, settled before it starts: which
//! target ranks share each source rank's dataset reads, and, for each
//! checkpoint file family, its layout, its writers at N and the bytes each
//! writes.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use iorepro_format::Op;
use serde::Serialize;

use super::roles::{file_name, file_role, names_a_shard, rank_template, FileRole};
use super::{BatchMode, CheckpointMode, DataMode, ScaleOptions};
use crate::error::ReplayResult;
use crate::plan::ops::for_each_op;
use crate::plan::survey::Survey;

/// How a checkpoint family's files are written at N.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointLayout {
    /// The state once, split over all N ranks, each with the traced
    /// per-writer pattern.
    Sharded,
    /// One rank writes it, as traced.
    RankZero,
    /// One rank writes the bulk, as traced, and the rest is split over the
    /// other ranks: state the ranks all hold (a data-parallel model) saved
    /// once by the rank that de-duplication gives it to, beside each rank's
    /// small part (PyTorch's distributed checkpoint of a DDP model writes
    /// 50 MB from rank 0 and 0.5-1.6 MB from each other rank, at 2 ranks
    /// as at 4).
    Lead,
    /// Every target rank writes what its source rank wrote.
    Replicated,
}

/// The files of one checkpoint that the ranks write side by side (one
/// directory, one name once the rank's number is taken out).
#[derive(Debug, Clone, Serialize)]
pub struct Family {
    pub dir: String,
    pub name: String,
    pub layout: CheckpointLayout,
    /// The layout was taken from the file names (a trace of one rank).
    pub by_name: bool,
    /// Bytes each source rank wrote.
    pub traced_writers: BTreeMap<i32, u64>,
    pub traced_bytes: u64,
    /// The bytes all writers write at N (Replicated: per clone of each source).
    pub bytes: u64,
    /// The phase of the trace in which the family was first written.
    pub phase: usize,
    /// The phase of its last write: past it, the router forgets what each
    /// writer at N spent of the family (a long trace's saves are thousands
    /// of families, each with a writer slot per rank at N).
    #[serde(skip)]
    pub last_phase: usize,
    /// A save the job at N does not make (a step-bound job makes fewer
    /// saves at a larger N): its calls are left out.
    pub dropped: bool,
}

/// What a traced path is to the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathRole {
    Dataset,
    /// A written file of checkpoint family `n`.
    Family(u32),
    Other,
}

#[derive(Debug)]
pub struct Model {
    pub world: u32,
    pub sources: Vec<i32>,
    pub options: ScaleOptions,
    /// When checkpoints happen, and which the job at N would not make.
    pub saves: Saves,
    pub roles: Vec<PathRole>,
    pub families: Vec<Family>,
    /// Per source index: the target ranks that replay it in full (t mod R).
    pub clones: Vec<Vec<u32>>,
    /// Per source index: the target ranks among which its dataset reads
    /// are shared out.
    pub shares: Vec<Vec<u32>>,
    source_index: HashMap<i32, usize>,
    /// Per family, per source rank: its targets and their byte budgets.
    by_pattern: Vec<HashMap<i32, Vec<(u32, u64)>>>,
}

/// Per written path: the bytes each source rank wrote, and the phase of the
/// first write.
#[derive(Default)]
struct Written {
    by: BTreeMap<i32, u64>,
    phase: usize,
    last_phase: usize,
}

/// When the traced job saved checkpoints: at the end of an epoch (as
/// often at any N) or after a number of steps (at N ranks sharing the
/// dataset, each rank makes R/N of the traced steps per epoch, so an
/// epoch-bound run saves about R/N times as often).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Saves {
    /// `epoch`, `steps`, or `none` (no checkpoint, or no dataset to tell by).
    pub bound: &'static str,
    /// The phases of the trace in which a save began.
    pub traced: Vec<usize>,
    /// Those the job at N does not make.
    pub dropped: Vec<usize>,
}

impl Saves {
    fn judge(
        families: &[Family],
        visits: &Visits,
        files: u64,
        r: u32,
        world: u32,
        data: DataMode,
        batch: BatchMode,
    ) -> Saves {
        let mut traced: Vec<usize> = families.iter().map(|f| f.phase).collect();
        traced.sort_unstable();
        traced.dedup();
        let epochs = if files > 0 {
            (visits.total as f64 / files as f64).round()
        } else {
            0.0
        };
        if traced.is_empty() || epochs < 1.0 || visits.total == 0 {
            return Saves {
                bound: "none",
                traced,
                dropped: Vec::new(),
            };
        }
        // A save at an epoch's end comes when its writers have made a whole
        // number of epochs' visits (loaders read ahead a little: a
        // tolerance): the epoch it follows. The writers' own visits count,
        // not all ranks': in a job without a barrier before its save, the
        // other ranks read on.
        let epoch_ended = |p: &usize| -> Option<i64> {
            let writers: Vec<i32> = families
                .iter()
                .filter(|f| f.phase == *p)
                .flat_map(|f| f.traced_writers.keys().copied())
                .collect();
            let whole = |done: u64, all: u64| {
                let e = done as f64 / all as f64 * epochs;
                ((e - e.round()).abs() <= 0.05 && e.round() >= 1.0).then_some(e.round() as i64)
            };
            let own: Vec<Option<i64>> = writers
                .iter()
                .filter_map(|w| visits.by_rank.get(w))
                .filter(|(_, all)| *all > 0)
                .map(|(at, all)| whole(at[*p], *all))
                .collect();
            match own.split_first() {
                None => whole(visits.at_phase[*p], visits.total),
                Some((first, rest)) => rest.iter().all(|e| e == first).then_some(*first).flatten(),
            }
        };
        // Epoch-bound: every save at an epoch's end, and no two after the
        // same epoch (a loader that reads the whole epoch ahead makes every
        // save of a step-bound job look like one at the epoch's end).
        let ended: Option<Vec<i64>> = traced.iter().map(epoch_ended).collect();
        if ended.is_some_and(|e| e.windows(2).all(|w| w[0] < w[1])) {
            return Saves {
                bound: "epoch",
                traced,
                dropped: Vec::new(),
            };
        }
        // Step-bound: save c (from 1) is made at N when the c-th traced save
        // is the last before a multiple of N/R of them.
        let k = world as f64 / r as f64;
        let dropped = if data == DataMode::Shard && batch == BatchMode::PerRank && k > 1.0 {
            traced
                .iter()
                .enumerate()
                .filter(|(i, _)| {
                    let c = (*i + 1) as f64;
                    (c / k).floor() <= ((c - 1.0) / k).floor()
                })
                .map(|(_, p)| *p)
                .collect()
        } else {
            Vec::new()
        };
        Saves {
            bound: "steps",
            traced,
            dropped,
        }
    }
}

/// The writer of a family that writes its bulk: one of several whose
/// bytes are at least [`LEAD_SHARE`] times the others' together. Writers
/// of even shards have none.
fn lead_writer(traced_writers: &BTreeMap<i32, u64>) -> Option<(i32, u64)> {
    if traced_writers.len() < 2 {
        return None;
    }
    let (&w, &b) = traced_writers.iter().max_by_key(|(w, b)| (**b, -**w))?;
    let rest: u64 = traced_writers.values().sum::<u64>() - b;
    (b >= LEAD_SHARE * rest.max(1)).then_some((w, b))
}

/// How many times the other writers' bytes together a lead writer writes.
const LEAD_SHARE: u64 = 4;

/// Splits `total` into `n` parts that differ by at most one.
pub fn split(total: u64, n: u32, i: u32) -> u64 {
    let n = n.max(1) as u64;
    total / n + u64::from((i as u64) < total % n)
}

/// Dataset visits (opens of a dataset file), to tell when the checkpoints
/// came: made before each phase began, and in all; by all ranks, and by
/// each source rank.
#[derive(Default)]
struct Visits {
    at_phase: Vec<u64>,
    total: u64,
    by_rank: BTreeMap<i32, (Vec<u64>, u64)>,
}

/// What the trace wrote, and when it read its dataset: one pass over it.
struct TracedWrites {
    /// Which ranks wrote which files, and how much.
    written: HashMap<u32, Written>,
    visits: Visits,
}

impl TracedWrites {
    fn count(trace: &Path, survey: &Survey) -> ReplayResult<TracedWrites> {
        let mut written: HashMap<u32, Written> = HashMap::new();
        let all = vec![true; survey.phases.len()];
        let phases = survey.phases.len();
        // Per rank (and i32::MIN for all): visits in each phase.
        let mut in_phase: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
        for_each_op(trace, survey, &all, |source, op| {
            let info = survey.paths.get(op.path as usize);
            if op.op == Op::Open
                && !op.failed
                && info.is_some_and(|i| file_role(i) == FileRole::Dataset)
            {
                for who in [i32::MIN, source] {
                    in_phase.entry(who).or_insert_with(|| vec![0; phases])[op.phase as usize] += 1;
                }
            }
            if op.op == Op::Write && op.path != crate::plan::survey::NO_PATH && op.bytes > 0 {
                let w = written.entry(op.path).or_insert_with(|| Written {
                    phase: op.phase as usize,
                    ..Default::default()
                });
                w.last_phase = op.phase as usize;
                *w.by.entry(source).or_default() += op.bytes as u64;
            }
        })?;
        // Visits made before each phase began: the sums of those in the
        // phases before it.
        let before = |v: &[u64]| -> (Vec<u64>, u64) {
            let mut at = Vec::with_capacity(v.len());
            let mut sum = 0;
            for n in v {
                at.push(sum);
                sum += n;
            }
            (at, sum)
        };
        let mut visits = Visits::default();
        for (who, v) in &in_phase {
            let (at, total) = before(v);
            if *who == i32::MIN {
                (visits.at_phase, visits.total) = (at, total);
            } else {
                visits.by_rank.insert(*who, (at, total));
            }
        }
        if visits.at_phase.is_empty() {
            visits.at_phase = vec![0; phases];
        }
        Ok(TracedWrites { written, visits })
    }
}

/// The checkpoint's file families and the traced files each holds: files
/// one rank wrote grouped by directory and rank-free name, each with the
/// layout it keeps at N; a file several ranks wrote is a family of its own,
/// replicated as traced.
fn families_of(
    survey: &Survey,
    written: &HashMap<u32, Written>,
    r: u32,
    options: &ScaleOptions,
) -> (Vec<Family>, Vec<Vec<u32>>) {
    let (keyed, shared_files) = checkpoint_files_by_template(survey, written);
    let mut families = Vec::new();
    let mut members: Vec<Vec<u32>> = Vec::new();
    for (key, ids) in keyed {
        families.push(grouped_family(survey, written, key, &ids, r, options));
        members.push(ids);
    }
    for id in shared_files {
        families.push(shared_family(survey, &written[&id], id));
        members.push(vec![id]);
    }
    (families, members)
}

/// Path ids of checkpoint files one rank each wrote, by directory and
/// rank-free name.
type ByTemplate = BTreeMap<(String, String), Vec<u32>>;

/// The checkpoint files the trace wrote, in path-id order: those one rank
/// wrote keyed by directory and rank-free name (a rank's files of one kind
/// fall under one key), and apart those several ranks wrote.
fn checkpoint_files_by_template(
    survey: &Survey,
    written: &HashMap<u32, Written>,
) -> (ByTemplate, Vec<u32>) {
    let mut keyed = ByTemplate::new();
    let mut shared_files = Vec::new();
    let mut ids: Vec<&u32> = written.keys().collect();
    ids.sort();
    for &id in ids {
        let info = &survey.paths[id as usize];
        if file_role(info) != FileRole::Checkpoint {
            continue;
        }
        let w = &written[&id];
        if w.by.len() > 1 {
            // A file several ranks write: each target rank its own, as traced.
            shared_files.push(id);
            continue;
        }
        let rank = *w.by.keys().next().expect("a writer");
        keyed
            .entry(rank_template(&info.path, rank))
            .or_default()
            .push(id);
    }
    (keyed, shared_files)
}

/// The family of the files `ids`, one rank's each, that share a directory
/// and rank-free name: who wrote how much, its first phase, and its layout.
fn grouped_family(
    survey: &Survey,
    written: &HashMap<u32, Written>,
    (dir, name): (String, String),
    ids: &[u32],
    r: u32,
    options: &ScaleOptions,
) -> Family {
    let mut traced_writers: BTreeMap<i32, u64> = BTreeMap::new();
    let mut phase = usize::MAX;
    let mut last_phase = 0;
    for id in ids {
        let w = &written[id];
        phase = phase.min(w.phase);
        last_phase = last_phase.max(w.last_phase);
        for (s, b) in &w.by {
            *traced_writers.entry(*s).or_default() += b;
        }
    }
    let path_of = |id: u32| &*survey.paths[id as usize].path;
    // A digit run that happens to be its one writer's rank number
    // (`tmpmskd_c00` by rank 0) is part of the file's name, unless the
    // name says it is a rank's shard.
    let name = match ids {
        [id] if traced_writers.len() == 1 && !names_a_shard(path_of(*id)) => {
            file_name(path_of(*id))
        }
        _ => name,
    };
    let by_name = r == 1 && options.checkpoint == CheckpointMode::Auto;
    let named_shards = by_name && ids.iter().any(|id| names_a_shard(path_of(*id)));
    let layout = family_layout(options.checkpoint, &traced_writers, named_shards);
    let traced_bytes = traced_writers.values().sum();
    Family {
        dir,
        name,
        layout,
        by_name,
        traced_writers,
        traced_bytes,
        bytes: traced_bytes,
        phase,
        last_phase,
        dropped: false,
    }
}

/// The layout a family keeps at N: the one `--checkpoint` names, or, left
/// to the model, what its traced writers show (one lead writer, several
/// shards, or, from one rank, shards its names tell of, else rank 0's).
fn family_layout(
    mode: CheckpointMode,
    traced_writers: &BTreeMap<i32, u64>,
    named_shards: bool,
) -> CheckpointLayout {
    match mode {
        CheckpointMode::Replicate => CheckpointLayout::Replicated,
        CheckpointMode::Sharded => CheckpointLayout::Sharded,
        CheckpointMode::Rank0 => CheckpointLayout::RankZero,
        CheckpointMode::Auto if lead_writer(traced_writers).is_some() => CheckpointLayout::Lead,
        CheckpointMode::Auto if traced_writers.len() > 1 => CheckpointLayout::Sharded,
        CheckpointMode::Auto if named_shards => CheckpointLayout::Sharded,
        CheckpointMode::Auto => CheckpointLayout::RankZero,
    }
}

/// The family of one file several ranks wrote: replicated as traced.
fn shared_family(survey: &Survey, w: &Written, id: u32) -> Family {
    let p = Path::new(&*survey.paths[id as usize].path);
    Family {
        dir: p
            .parent()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default(),
        name: p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        layout: CheckpointLayout::Replicated,
        by_name: false,
        traced_writers: w.by.clone(),
        traced_bytes: w.by.values().sum(),
        bytes: w.by.values().sum(),
        phase: w.phase,
        last_phase: w.last_phase,
        dropped: false,
    }
}

/// `--checkpoint-bytes`: each checkpoint (the families first written in one
/// phase) grows or shrinks to `size`, its families keeping their shares.
fn resize_checkpoints(families: &mut [Family], size: u64) {
    let mut per_phase: HashMap<usize, u64> = HashMap::new();
    for f in families.iter() {
        *per_phase.entry(f.phase).or_default() += f.traced_bytes;
    }
    for f in families.iter_mut() {
        let whole = per_phase[&f.phase].max(1);
        f.bytes = (f.traced_bytes as u128 * size as u128 / whole as u128) as u64;
    }
}

/// Who writes a family at N, and how much: by traced writer, the target
/// ranks that replay its calls with their byte budgets (a replicated
/// family's `bytes` set to what its clones write in all).
fn assign_writers(
    f: &mut Family,
    world: u32,
    sources: &[i32],
    source_index: &HashMap<i32, usize>,
    clones: &[Vec<u32>],
    shares: &[Vec<u32>],
) -> HashMap<i32, Vec<(u32, u64)>> {
    let r = sources.len() as u32;
    let mut map: HashMap<i32, Vec<(u32, u64)>> = HashMap::new();
    let writers: Vec<i32> = f.traced_writers.keys().copied().collect();
    match f.layout {
        CheckpointLayout::Sharded => {
            for t in 0..world {
                let own = sources[(t % r) as usize];
                let pattern = if f.traced_writers.contains_key(&own) {
                    own
                } else {
                    writers[t as usize % writers.len()]
                };
                let budget = split(f.bytes, world, t);
                map.entry(pattern).or_default().push((t, budget));
            }
        }
        CheckpointLayout::Lead => {
            let (lead, lead_bytes) =
                lead_writer(&f.traced_writers).expect("a lead layout has a lead writer");
            let lead_t = shares[source_index[&lead]][0];
            let lead_budget =
                (lead_bytes as u128 * f.bytes as u128 / f.traced_bytes.max(1) as u128) as u64;
            map.entry(lead).or_default().push((lead_t, lead_budget));
            let others: Vec<i32> = writers.iter().copied().filter(|w| *w != lead).collect();
            let rest = f.bytes - lead_budget;
            for (i, t) in (0..world).filter(|t| *t != lead_t).enumerate() {
                let own = sources[(t % r) as usize];
                let pattern = if own != lead && f.traced_writers.contains_key(&own) {
                    own
                } else {
                    others[i % others.len()]
                };
                let budget = split(rest, world - 1, i as u32);
                map.entry(pattern).or_default().push((t, budget));
            }
        }
        CheckpointLayout::RankZero => {
            let w = writers[0];
            let t = shares[source_index[&w]][0];
            map.entry(w).or_default().push((t, f.bytes));
        }
        CheckpointLayout::Replicated => {
            let mut total = 0;
            for (s, b) in &f.traced_writers {
                let b = (*b as u128 * f.bytes as u128 / f.traced_bytes.max(1) as u128) as u64;
                for &t in &clones[source_index[s]] {
                    map.entry(*s).or_default().push((t, b));
                    total += b;
                }
            }
            f.bytes = total;
        }
    }
    map
}

impl Model {
    pub fn source_index(&self, source: i32) -> Option<usize> {
        self.source_index.get(&source).copied()
    }

    /// The target ranks source rank `source`'s calls on family `f` go to,
    /// with each one's byte budget.
    pub fn pattern_targets(&self, f: u32, source: i32) -> &[(u32, u64)] {
        self.by_pattern[f as usize]
            .get(&source)
            .map_or(&[], |v| v.as_slice())
    }

    /// The model of `survey`'s trace replayed by `world` ranks.
    pub fn build(
        trace: &Path,
        survey: &Survey,
        world: u32,
        options: &ScaleOptions,
    ) -> ReplayResult<Model> {
        options.cache.check(&survey.phases)?;
        let sources = survey.sources.clone();
        let r = sources.len() as u32;
        let source_index: HashMap<i32, usize> =
            sources.iter().enumerate().map(|(i, s)| (*s, i)).collect();
        let clones: Vec<Vec<u32>> = (0..r)
            .map(|s| (s..world).step_by(r as usize).collect())
            .collect();
        let shares: Vec<Vec<u32>> = clones
            .iter()
            .enumerate()
            .map(|(s, c)| {
                if c.is_empty() {
                    vec![s as u32 % world]
                } else {
                    c.clone()
                }
            })
            .collect();

        let traced = TracedWrites::count(trace, survey)?;
        let (mut families, members) = families_of(survey, &traced.written, r, options);
        let mut roles: Vec<PathRole> = survey
            .paths
            .iter()
            .map(|p| match file_role(p) {
                FileRole::Dataset => PathRole::Dataset,
                _ => PathRole::Other,
            })
            .collect();
        for (n, ids) in members.iter().enumerate() {
            for id in ids {
                roles[*id as usize] = PathRole::Family(n as u32);
            }
        }
        if let Some(size) = options.checkpoint_bytes {
            resize_checkpoints(&mut families, size);
        }

        let dataset_files = survey
            .paths
            .iter()
            .filter(|p| file_role(p) == FileRole::Dataset)
            .count() as u64;
        let saves = Saves::judge(
            &families,
            &traced.visits,
            dataset_files,
            r,
            world,
            options.data,
            options.batch,
        );
        for f in &mut families {
            f.dropped = saves.dropped.contains(&f.phase);
        }

        let by_pattern = families
            .iter_mut()
            .map(|f| assign_writers(f, world, &sources, &source_index, &clones, &shares))
            .collect();

        Ok(Model {
            world,
            sources,
            options: options.clone(),
            saves,
            roles,
            families,
            clones,
            shares,
            source_index,
            by_pattern,
        })
    }

    /// For tests: one source rank (0) whose paths are all dataset files,
    /// its reads shared out among `world` ranks.
    #[cfg(test)]
    pub fn sharing(world: u32) -> Model {
        let all: Vec<u32> = (0..world).collect();
        Model {
            world,
            sources: vec![0],
            options: ScaleOptions::default(),
            saves: Saves::default(),
            roles: vec![PathRole::Dataset; 16],
            families: Vec::new(),
            clones: vec![all.clone()],
            shares: vec![all],
            source_index: HashMap::from([(0, 0)]),
            by_pattern: Vec::new(),
        }
    }

    pub fn role(&self, path: u32) -> PathRole {
        self.roles
            .get(path as usize)
            .copied()
            .unwrap_or(PathRole::Other)
    }

    pub fn data_mode(&self) -> DataMode {
        self.options.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A family as a DDP job's distributed checkpoint writes it at 2
    /// ranks: rank 0 the model, 48 MiB; rank 1 its 1.6 MB.
    fn ddp_family() -> Family {
        let traced_writers = BTreeMap::from([(0, 48 << 20), (1, 1_636_321)]);
        let traced_bytes = traced_writers.values().sum();
        Family {
            dir: "/ckpt/epoch_0".into(),
            name: "__{rank}_0.distcp".into(),
            layout: CheckpointLayout::Lead,
            by_name: false,
            traced_writers,
            traced_bytes,
            bytes: traced_bytes,
            phase: 3,
            last_phase: 3,
            dropped: false,
        }
    }

    #[test]
    fn a_lead_writer_keeps_its_bulk_and_the_others_share_the_rest() {
        assert_eq!(
            lead_writer(&ddp_family().traced_writers),
            Some((0, 48 << 20))
        );
        // Even shards have no lead.
        assert_eq!(
            lead_writer(&BTreeMap::from([(0, 100), (1, 90), (2, 110)])),
            None
        );
        let mut f = ddp_family();
        let sources = [0, 1];
        let index = HashMap::from([(0, 0), (1, 1)]);
        let clones = vec![vec![0, 2], vec![1, 3]];
        let by_pattern = assign_writers(&mut f, 4, &sources, &index, &clones, &clones);
        // At 4 ranks, as the job at 4 writes it: rank 0 the model, the
        // other three a third of rank 1's bytes each, with its calls.
        let third = 1_636_321 / 3;
        assert_eq!(by_pattern[&0], vec![(0, 48 << 20)]);
        assert_eq!(by_pattern[&1], vec![(1, third + 1), (2, third), (3, third)]);
        let written: u64 = by_pattern.values().flatten().map(|w| w.1).sum();
        assert_eq!(written, f.traced_bytes);
    }

    #[test]
    fn splits_add_up() {
        for (total, n) in [(10u64, 3u32), (7, 7), (3, 5), (1 << 40, 4096)] {
            let parts: Vec<u64> = (0..n).map(|i| split(total, n, i)).collect();
            assert_eq!(parts.iter().sum::<u64>(), total);
            assert!(parts.iter().max().unwrap() - parts.iter().min().unwrap() <= 1);
        }
    }
}
