//! What the replay at N will do, counted by routing every traced call
//! through the [`Router`] the replay uses (so the plan and the replay cannot
//! disagree), and printed before the replay: per-rank bytes, the dataset's
//! footprint, each checkpoint's bytes and writers, and the demand on the
//! storage at the traced pace.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use iorepro_analysis::phases::PhaseKind;
use iorepro_format::units::{fmt_bytes, GIB, MIB};
use iorepro_format::Op;
use serde::Serialize;

use super::model::{CheckpointLayout, Family, Model, PathRole};
use super::route::Router;
use super::{BatchMode, CheckpointMode, DataMode};
use crate::error::ReplayResult;
use crate::plan::ops::{for_each_op, PlannedOp};
use crate::plan::survey::Survey;

/// Smallest, mean and largest of a per-rank figure.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Range {
    pub min: u64,
    pub mean: f64,
    pub max: u64,
}

impl Range {
    fn of(v: &[u64]) -> Range {
        Range {
            min: v.iter().copied().min().unwrap_or(0),
            mean: v.iter().sum::<u64>() as f64 / v.len().max(1) as f64,
            max: v.iter().copied().max().unwrap_or(0),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DatasetPlan {
    pub files: usize,
    /// Bytes of the files the replay reads (what `prepare` stages, once per copy).
    pub footprint_bytes: u64,
    /// Copies staged: 1 with `--data shard`, one per replica with `replicate`.
    pub copies: u32,
    pub traced_read_bytes: u64,
    pub read_bytes: u64,
    /// File visits (an open and its reads) in the trace, and at N.
    pub traced_visits: u64,
    pub visits: u64,
}

/// One phase of the trace that writes, as the replay at N writes it.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointPlan {
    pub phase: usize,
    pub kind: PhaseKind,
    pub start_s: f64,
    pub traced_bytes: u64,
    pub traced_writers: usize,
    pub traced_files: usize,
    pub bytes: u64,
    pub writers: usize,
    pub files: usize,
    pub bytes_per_writer: Range,
    /// The traced save's time.
    pub traced_s: f64,
    /// Its time at N at the traced save's write rate: its own work as
    /// traced, then its bytes at N at the rate the traced one wrote at
    /// (what the plan takes without `--bandwidth`).
    pub seconds_at_traced_rate: f64,
    /// The traced time from the save's start to its first write (state
    /// serialised in memory first), which no storage shortens.
    pub before_first_write_s: f64,
    /// The traced time after the first write in which no rank wrote or
    /// synced (the save's own work between its writes), which no storage
    /// shortens either.
    pub between_writes_s: f64,
    /// The time the busiest writer at N takes in write calls that only copy
    /// its bytes into the page cache, a later sync flushing them: the
    /// traced time of such calls, in proportion to the bytes that writer
    /// writes at N against the busiest traced one. The caller's memory
    /// sets it, not the storage.
    pub into_page_cache_s: f64,
    /// Seconds it takes at `--write-bandwidth`, else `--bandwidth` (all
    /// writers together): `before_first_write_s`, `between_writes_s` and
    /// `into_page_cache_s`, then its bytes and those `besides` it at that
    /// rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds_at_bandwidth: Option<f64>,
    /// Where the phase writes a checkpoint's files: what else it writes
    /// (a log line, the run's record as it ends), apart from the save, so
    /// that a rank-0 save is said to be one writer's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub besides: Option<Besides>,
}

/// Writes in a save's phase to files that are not the save's.
#[derive(Debug, Clone, Serialize)]
pub struct Besides {
    pub traced_bytes: u64,
    pub bytes: u64,
    pub writers: usize,
    pub files: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Demand {
    /// The trace's per-rank read rate in its load and read phases.
    pub per_rank_read_gib_s: f64,
    /// N ranks at that pace.
    pub read_gib_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Forecast {
    pub trace_ranks: usize,
    pub ranks: u32,
    pub data: DataMode,
    pub checkpoint: CheckpointMode,
    pub batch: BatchMode,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub per_rank_read_bytes: Range,
    pub per_rank_write_bytes: Range,
    pub dataset: DatasetPlan,
    pub checkpoints: Vec<CheckpointPlan>,
    pub families: Vec<Family>,
    pub demand: Demand,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth_gib_s: Option<f64>,
    /// The write bandwidth checkpoints are timed at, where it is not
    /// `bandwidth_gib_s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_bandwidth_gib_s: Option<f64>,
    /// With `--bandwidth`: each epoch's time and AU at N on storage of
    /// that speed (see [`super::what_if`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub epochs_at_bandwidth: Vec<super::what_if::EpochForecast>,
    /// The AU `--au` asks for, and the lowest bandwidth (GiB/s) that keeps
    /// every epoch at it.
    pub au_threshold_percent: f64,
    pub bandwidth_for_au_gib_s: Option<f64>,
    /// What the page cache spares the storage (`--cache`), and the
    /// verdict's line on it.
    pub cache: super::cache::CacheMode,
    pub reads_from: String,
    /// The share of the traced job's reads its storage served (percent),
    /// where the trace says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traced_storage_percent: Option<f64>,
    /// Each epoch's time at N on storage that keeps the job fed.
    pub epochs_fed_s: Vec<f64>,
    /// When checkpoints happen.
    pub checkpoint_timing: String,
    pub saves: super::model::Saves,
    /// Whether the replay's ranks meet at each save (see
    /// [`crate::plan::meetings`]).
    pub meetings: crate::plan::meetings::Meetings,
    /// What the model assumed and the flag that says otherwise.
    pub assumptions: Vec<String>,
    /// Times the traced job read its dataset: file visits over files.
    pub epochs: Option<u32>,
    /// Calls each target rank makes (for progress).
    #[serde(skip)]
    pub ops_per_rank: Vec<u64>,
}

#[derive(Default)]
struct PhaseCount {
    /// Dataset bytes read (at N).
    read: u64,
    /// Writes to a checkpoint's files.
    saved: Writes,
    /// Writes to any other file.
    other: Writes,
}

/// Bytes written, by writer, and the (writer, path) files written.
#[derive(Default)]
struct Writes {
    bytes: u64,
    writers: ByWriter,
    files: HashSet<(u32, u32)>,
}

impl Writes {
    fn add(&mut self, writer: u32, file: (u32, u32), bytes: u64) {
        self.bytes += bytes;
        self.writers.add(writer, bytes);
        self.files.insert(file);
    }
}

/// Bytes by writer.
enum ByWriter {
    /// Any numbers (the trace's source ranks).
    Sparse(BTreeMap<u32, u64>),
    /// The target ranks `0..world`, a slot each, made at the first write:
    /// the rank's bytes plus one, 0 where it wrote nothing. Every save of a
    /// long trace keeps one, so 8 bytes a rank, not a map's ~21.
    Dense { world: u32, slots: Vec<u64> },
}

impl Default for ByWriter {
    fn default() -> Self {
        ByWriter::Sparse(BTreeMap::new())
    }
}

impl ByWriter {
    fn add(&mut self, writer: u32, bytes: u64) {
        match self {
            ByWriter::Sparse(m) => *m.entry(writer).or_default() += bytes,
            ByWriter::Dense { world, slots } => {
                if slots.is_empty() {
                    slots.resize(*world as usize, 0);
                }
                let slot = &mut slots[writer as usize];
                *slot = (*slot).max(1) + bytes;
            }
        }
    }

    /// What each writer wrote, in writer order.
    fn bytes(&self) -> Vec<u64> {
        match self {
            ByWriter::Sparse(m) => m.values().copied().collect(),
            ByWriter::Dense { slots, .. } => {
                slots.iter().filter(|&&b| b > 0).map(|b| b - 1).collect()
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            ByWriter::Sparse(m) => m.len(),
            ByWriter::Dense { slots, .. } => slots.iter().filter(|&&b| b > 0).count(),
        }
    }
}

impl PhaseCount {
    /// A phase's count at N, its writers being target ranks below `world`.
    fn at_world(world: u32) -> PhaseCount {
        let writes = || Writes {
            writers: ByWriter::Dense {
                world,
                slots: Vec::new(),
            },
            ..Writes::default()
        };
        PhaseCount {
            read: 0,
            saved: writes(),
            other: writes(),
        }
    }

    fn writes(&mut self, saved: bool) -> &mut Writes {
        match saved {
            true => &mut self.saved,
            false => &mut self.other,
        }
    }
}

/// What routing every traced call through the replay's router counts: per
/// target rank, per phase (as traced and at N), and of the dataset.
/// Every traced call routed for one world, counted: the one pass over the
/// trace a forecast needs.
pub struct Counted(Counts);

impl Counted {
    pub fn of(
        trace: &Path,
        survey: &Survey,
        model: &Model,
        phase_selected: &[bool],
    ) -> ReplayResult<Counted> {
        Counts::of(trace, survey, model, phase_selected).map(Counted)
    }
}

struct Counts {
    ops: Vec<u64>,
    read: Vec<u64>,
    write: Vec<u64>,
    traced_phase: Vec<PhaseCount>,
    at_n: Vec<PhaseCount>,
    traced_data: u64,
    data_at_n: u64,
    traced_visits: u64,
    visits: u64,
}

impl Counts {
    fn of(
        trace: &Path,
        survey: &Survey,
        model: &Model,
        phase_selected: &[bool],
    ) -> ReplayResult<Counts> {
        let n = model.world as usize;
        let phases = survey.phases.len();
        let mut c = Counts {
            ops: vec![0; n],
            read: vec![0; n],
            write: vec![0; n],
            traced_phase: (0..phases).map(|_| PhaseCount::default()).collect(),
            at_n: (0..phases)
                .map(|_| PhaseCount::at_world(model.world))
                .collect(),
            traced_data: 0,
            data_at_n: 0,
            traced_visits: 0,
            visits: 0,
        };
        let mut router = Router::new(model, survey.stretches());
        let mut routed = Vec::new();
        for_each_op(trace, survey, phase_selected, |source, op| {
            let role = model.role(op.path);
            let dataset = role == PathRole::Dataset;
            let saved = matches!(role, PathRole::Family(_));
            c.traced(source, &op, dataset, saved);
            routed.clear();
            router.route(source, &op, &mut routed);
            for (t, call) in &routed {
                c.at_n(*t as usize, call, dataset, saved);
            }
        })?;
        Ok(c)
    }

    /// A call as traced, by source rank `source`; `saved` if its file is a
    /// checkpoint's.
    fn traced(&mut self, source: i32, op: &PlannedOp, dataset: bool, saved: bool) {
        if dataset && op.op.reads_file() {
            self.traced_data += op.bytes as u64;
        }
        if dataset && op.op == Op::Open && !op.failed {
            self.traced_visits += 1;
        }
        if op.op == Op::Write {
            self.traced_phase[op.phase as usize].writes(saved).add(
                source as u32,
                (0, op.path),
                op.bytes as u64,
            );
        }
    }

    /// A call made at N by target rank `t`.
    fn at_n(&mut self, t: usize, call: &PlannedOp, dataset: bool, saved: bool) {
        self.ops[t] += 1;
        match call.op {
            _ if call.op.reads_file() => {
                self.read[t] += call.bytes as u64;
                if dataset {
                    self.data_at_n += call.bytes as u64;
                    self.at_n[call.phase as usize].read += call.bytes as u64;
                }
            }
            Op::Write => {
                self.write[t] += call.bytes as u64;
                self.at_n[call.phase as usize].writes(saved).add(
                    t as u32,
                    (t as u32, call.path),
                    call.bytes as u64,
                );
            }
            Op::Open if dataset && !call.failed => self.visits += 1,
            _ => {}
        }
    }

    /// Each phase that writes, as traced and at N.
    fn checkpoints(&self, survey: &Survey, bandwidth: Option<f64>) -> Vec<CheckpointPlan> {
        let mut checkpoints = Vec::new();
        for (i, (traced_phase, phase_at_n)) in self.traced_phase.iter().zip(&self.at_n).enumerate()
        {
            // A phase's save is its checkpoint files' writes; a phase that
            // writes none is told by all it writes.
            let saves = traced_phase.saved.bytes > 0 || phase_at_n.saved.bytes > 0;
            let (traced, scaled) = match saves {
                true => (&traced_phase.saved, &phase_at_n.saved),
                false => (&traced_phase.other, &phase_at_n.other),
            };
            if traced.bytes == 0 && scaled.bytes == 0 {
                continue;
            }
            let other = &phase_at_n.other;
            let besides =
                (saves && (traced_phase.other.bytes > 0 || other.bytes > 0)).then_some(Besides {
                    traced_bytes: traced_phase.other.bytes,
                    bytes: other.bytes,
                    writers: other.writers.len(),
                    files: other.files.len(),
                });
            // Every byte the phase writes takes the storage's time.
            let written = phase_at_n.saved.bytes + other.bytes;
            let phase = &survey.phases[i];
            let traced_time = survey.saves.get(i).copied().unwrap_or_default();
            let bytes_per_writer = Range::of(&scaled.writers.bytes());
            let busiest_traced = traced.writers.bytes().into_iter().max().unwrap_or(0);
            let copy_s = if busiest_traced > 0 {
                traced_time.copy_s * bytes_per_writer.max as f64 / busiest_traced as f64
            } else {
                0.0
            };
            let (lead_s, work_s) = (traced_time.lead_s, traced_time.work_s);
            let traced_s = (phase.end_s - phase.start_s).max(0.0);
            let traced_fixed = lead_s + work_s + traced_time.copy_s;
            let traced_writing_s = (traced_s - traced_fixed).max(0.0);
            let at_traced_rate = lead_s
                + work_s
                + copy_s
                + match traced.bytes {
                    0 => 0.0,
                    b => traced_writing_s * written as f64 / b as f64,
                };
            checkpoints.push(CheckpointPlan {
                phase: i,
                kind: phase.kind,
                start_s: phase.start_s,
                traced_bytes: traced.bytes,
                traced_writers: traced.writers.len(),
                traced_files: traced.files.len(),
                bytes: scaled.bytes,
                writers: scaled.writers.len(),
                files: scaled.files.len(),
                bytes_per_writer,
                traced_s,
                seconds_at_traced_rate: at_traced_rate,
                before_first_write_s: lead_s,
                between_writes_s: work_s,
                into_page_cache_s: copy_s,
                seconds_at_bandwidth: bandwidth
                    .map(|b| lead_s + work_s + copy_s + written as f64 / b),
                besides,
            });
        }
        checkpoints
    }
}

/// The trace's read rate per rank in its load and read phases (GiB/s).
fn traced_read_rate_per_rank(survey: &Survey, ranks: usize) -> f64 {
    let (bytes, secs) = survey
        .phases
        .iter()
        .filter(|p| matches!(p.kind, PhaseKind::Load | PhaseKind::Read))
        .fold((0u64, 0f64), |(b, d), p| {
            (b + p.read_bytes, d + (p.end_s - p.start_s).max(0.0))
        });
    if secs > 0.0 {
        bytes as f64 / secs / ranks as f64 / GIB
    } else {
        0.0
    }
}

/// What the model took from names where the trace could not show it, and
/// the flag that says otherwise.
fn assumptions(model: &Model) -> Vec<String> {
    let mut assumptions = Vec::new();
    for f in model.families.iter().filter(|f| f.by_name) {
        let (what, other) = match f.layout {
            CheckpointLayout::Sharded => ("one shard per rank", "--checkpoint rank0"),
            _ => ("written by one rank", "--checkpoint sharded"),
        };
        assumptions.push(format!(
            "{}/{}: a trace of one rank cannot show the layout; by its name, {what} ({other} says otherwise)",
            f.dir, f.name
        ));
    }
    assumptions
}

impl Forecast {
    pub fn count(
        trace: &Path,
        survey: &Survey,
        model: &Model,
        phase_selected: &[bool],
    ) -> ReplayResult<Forecast> {
        let counted = Counted::of(trace, survey, model, phase_selected)?;
        Ok(Forecast::of(&counted, survey, model))
    }

    /// The forecast from the calls already counted for `model`'s world:
    /// a sizing sweep counts once per N and asks this for each bandwidth
    /// (only `model`'s bandwidths may differ from the counting's).
    pub fn of(counted: &Counted, survey: &Survey, model: &Model) -> Forecast {
        let c = &counted.0;
        let bandwidth = model.options.bandwidth;
        let dataset_ids: Vec<usize> = (0..survey.paths.len())
            .filter(|&i| model.roles[i] == PathRole::Dataset)
            .collect();
        let footprint: u64 = dataset_ids
            .iter()
            .map(|&i| survey.paths[i].read_extent)
            .sum();
        let copies = match model.options.data {
            DataMode::Shard => 1,
            DataMode::Replicate => model.clones.iter().map(Vec::len).max().unwrap_or(1) as u32,
        };
        let r = model.sources.len();
        // A rank's clock in read phases runs as many times as fast as there
        // are ranks sharing its traced rank's reads.
        let speedup = match model.options.data {
            DataMode::Shard => model.world as f64 / r as f64,
            DataMode::Replicate => 1.0,
        };
        let reads: Vec<u64> = c.at_n.iter().map(|p| p.read).collect();
        // The last step's compute at N: the traced step's, or, with the
        // global batch held, its share of it (a rank's batch is R/N).
        let last_step_s = match model.options.batch {
            BatchMode::PerRank => survey.step_compute_s,
            BatchMode::Global => survey.step_compute_s / speedup.max(1.0),
        };
        let phases = survey.phases_from_first_data();
        // What of the reads at N reaches the storage (`--cache`).
        let first_epoch = super::what_if::stretches(&phases, &[]).into_iter().next();
        let stored = model
            .options
            .cache
            .from_storage(&phases, &reads, first_epoch);
        let at = |b: f64| {
            let au = model.options.au_threshold;
            super::what_if::epochs(&phases, &reads, &stored, speedup, last_step_s, b, au)
        };
        // The epochs on storage that keeps up: their compute, and the
        // bandwidth each needs for the AU asked for, which no bandwidth
        // given changes.
        let fed = at(f64::INFINITY);
        let epochs_at_bandwidth = bandwidth.map_or_else(Vec::new, at);
        let per_rank = traced_read_rate_per_rank(survey, r);
        Forecast {
            trace_ranks: r,
            ranks: model.world,
            data: model.options.data,
            checkpoint: model.options.checkpoint,
            batch: model.options.batch,
            read_bytes: c.read.iter().sum(),
            write_bytes: c.write.iter().sum(),
            per_rank_read_bytes: Range::of(&c.read),
            per_rank_write_bytes: Range::of(&c.write),
            dataset: DatasetPlan {
                files: dataset_ids.len(),
                footprint_bytes: footprint,
                copies,
                traced_read_bytes: c.traced_data,
                read_bytes: c.data_at_n,
                traced_visits: c.traced_visits,
                visits: c.visits,
            },
            checkpoints: c.checkpoints(survey, model.options.write_bandwidth.or(bandwidth)),
            families: model.families.clone(),
            demand: Demand {
                per_rank_read_gib_s: per_rank,
                read_gib_s: per_rank * model.world as f64,
            },
            bandwidth_gib_s: bandwidth.map(|b| b / GIB),
            write_bandwidth_gib_s: model.options.write_bandwidth.map(|b| b / GIB),
            bandwidth_for_au_gib_s: fed.iter().map(|e| e.au_threshold_gib_s).reduce(f64::max),
            epochs_fed_s: fed.iter().map(|e| e.seconds).collect(),
            epochs_at_bandwidth,
            au_threshold_percent: model.options.au_threshold,
            cache: model.options.cache,
            reads_from: model.options.cache.reads_from(&phases),
            traced_storage_percent: super::cache::traced_percent(&phases),
            checkpoint_timing: timing_note(model),
            saves: model.saves.clone(),
            meetings: survey.meetings.clone(),
            assumptions: assumptions(model),
            epochs: (c.traced_visits > 0 && !dataset_ids.is_empty()).then(|| {
                ((c.traced_visits as f64 / dataset_ids.len() as f64).round() as u32).max(1)
            }),
            ops_per_rank: c.ops.clone(),
        }
    }

    /// The plan for people.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let g = |b: u64| fmt_bytes(b as f64);
        let _ = writeln!(
            s,
            "Scaling model: a trace of {} rank(s) replayed as {} (--data {}, --checkpoint {}, --batch {})",
            self.trace_ranks,
            self.ranks,
            mode(&self.data),
            mode(&self.checkpoint),
            mode(&self.batch)
        );
        let d = &self.dataset;
        let _ = writeln!(
            s,
            "  dataset: {} file(s), footprint {} x {} cop{} staged; traced reads {} in {} visit(s) -> {} in {} at N",
            d.files,
            g(d.footprint_bytes),
            d.copies,
            if d.copies == 1 { "y" } else { "ies" },
            g(d.traced_read_bytes),
            d.traced_visits,
            g(d.read_bytes),
            d.visits
        );
        let _ = writeln!(
            s,
            "  per rank: read {} (min {}, max {}), written {} (min {}, max {}); in all read {}, written {}",
            g(self.per_rank_read_bytes.mean as u64),
            g(self.per_rank_read_bytes.min),
            g(self.per_rank_read_bytes.max),
            g(self.per_rank_write_bytes.mean as u64),
            g(self.per_rank_write_bytes.min),
            g(self.per_rank_write_bytes.max),
            g(self.read_bytes),
            g(self.write_bytes)
        );
        let _ = writeln!(
            s,
            "  demand at the traced pace: {:.3} GiB/s per rank in read phases, {:.3} GiB/s for {} ranks",
            self.demand.per_rank_read_gib_s, self.demand.read_gib_s, self.ranks
        );
        for c in &self.checkpoints {
            s.push_str(&self.render_checkpoint(c));
        }
        s.push_str(&self.render_families());
        s.push_str(&self.render_epochs());
        let _ = writeln!(s, "  checkpoint timing: {}", self.checkpoint_timing);
        let _ = writeln!(s, "  at saves: {}", self.meetings.describe());
        for a in &self.assumptions {
            let _ = writeln!(s, "  assumed: {a}");
        }
        s
    }

    /// One phase that writes: as traced, at N, and the files of its save.
    fn render_checkpoint(&self, c: &CheckpointPlan) -> String {
        let mut s = String::new();
        let g = |b: u64| fmt_bytes(b as f64);
        if self.saves.dropped.contains(&c.phase) {
            let _ = writeln!(
                s,
                "  {} at {:.1}s: traced {}; not made at N (see checkpoint timing)",
                c.kind.as_str(),
                c.start_s,
                g(c.traced_bytes)
            );
            return s;
        }
        let _ = write!(
            s,
            "  {} at {:.1}s: traced {} by {} writer(s) in {} file(s) -> {} by {} writer(s) in {} file(s), {} per writer (max {})",
            c.kind.as_str(),
            c.start_s,
            g(c.traced_bytes),
            c.traced_writers,
            c.traced_files,
            g(c.bytes),
            c.writers,
            c.files,
            g(c.bytes_per_writer.mean as u64),
            g(c.bytes_per_writer.max)
        );
        if let Some(o) = &c.besides {
            let _ = write!(
                s,
                "; and {} by {} writer(s) in {} other file(s)",
                g(o.bytes),
                o.writers,
                o.files
            );
        }
        let write_gib_s = self.write_bandwidth_gib_s.or(self.bandwidth_gib_s);
        if let (Some(t), Some(b)) = (c.seconds_at_bandwidth, write_gib_s) {
            let _ = write!(s, "; {t:.2} s at {b:.1} GiB/s");
        }
        // The files counted as this save, so a user sees what was taken
        // for the job's state.
        let files: Vec<String> = self
            .families
            .iter()
            .filter(|f| f.phase == c.phase)
            .map(|f| format!("{}/{}", f.dir, f.name))
            .collect();
        const NAMED: usize = 3;
        let _ = write!(s, "; saves {}", files[..files.len().min(NAMED)].join(", "));
        if files.len() > NAMED {
            let _ = write!(s, " and {} more", files.len() - NAMED);
        }
        s.push('\n');
        s
    }

    /// Each checkpoint family's layout at N.
    fn render_families(&self) -> String {
        let mut s = String::new();
        let g = |b: u64| fmt_bytes(b as f64);
        for f in &self.families {
            if f.dropped {
                let _ = writeln!(s, "  files {}/{}: not written at N", f.dir, f.name);
                continue;
            }
            let _ = writeln!(
                s,
                "  files {}/{}: {} ({} traced writer(s), {}) -> {} at N",
                f.dir,
                f.name,
                layout_name(f.layout),
                f.traced_writers.len(),
                g(f.traced_bytes),
                g(f.bytes)
            );
        }
        s
    }

    /// With `--bandwidth`: each epoch's time and AU, and the bandwidth the
    /// AU asked for needs.
    fn render_epochs(&self) -> String {
        let mut s = String::new();
        if let Some(b) = self.bandwidth_gib_s {
            for (i, e) in self.epochs_at_bandwidth.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "  epoch {} at {b:.3} GiB/s: {:.2} s (traced {:.2} s; compute {:.2} s a rank, {:.2} s of it after the last read; reads {}), AU {:.1} %",
                    i + 1,
                    e.seconds,
                    e.traced_s,
                    e.compute_s,
                    e.last_step_s,
                    fmt_bytes(e.read_bytes as f64),
                    e.au_percent
                );
            }
        }
        if let Some(need) = self.bandwidth_for_au_gib_s {
            let _ = writeln!(
                s,
                "  AU stays at {:.0} % or more down to {need:.3} GiB/s ({:.1} MiB/s) of read bandwidth",
                self.au_threshold_percent,
                need * GIB / MIB
            );
        }
        s
    }
}

fn timing_note(model: &Model) -> String {
    let s = &model.saves;
    let c = s.traced.len();
    match s.bound {
        "epoch" => format!(
            "epoch-bound: the trace's {c} save(s) come at the end of an epoch; the job at N saves as often, at the same points"
        ),
        "steps" if model.world > model.sources.len() as u32
            && model.options.data == DataMode::Shard
            && model.options.batch == BatchMode::Global => format!(
            "step-bound: the trace saves every so many steps ({c} save(s)); with the global batch held \
             (--batch global) the job at N makes the traced steps, each rank reading R/N of its traced rank's \
             samples a step, so all {c} are made"
        ),
        "steps" if model.world > model.sources.len() as u32 && model.options.data == DataMode::Shard => format!(
            "step-bound: the trace saves every so many steps ({c} save(s)); with each rank's batch held \
             (--batch per-rank) at N each rank makes R/N of the traced steps, so {} of them are \
             made (the last of every N/R); the default, --batch global, makes all {c}",
            c - s.dropped.len()
        ),
        "steps" if model.options.data == DataMode::Replicate => format!(
            "step-bound: the trace's {c} save(s) are kept, as every rank replays all its traced rank's steps"
        ),
        "steps" => format!(
            "step-bound: the trace's {c} save(s) are kept as traced (at fewer ranks than traced the job would save \
             more often; that is not modelled)"
        ),
        _ if c == 0 => "no checkpoint in the trace".to_string(),
        _ => format!(
            "cannot tell whether the {c} save(s) follow epochs or steps (the trace reads no dataset \
             in whole epochs): every traced save is kept"
        ),
    }
}

fn mode<T: Serialize>(m: &T) -> String {
    serde_json::to_value(m)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn layout_name(l: CheckpointLayout) -> &'static str {
    match l {
        CheckpointLayout::Sharded => "sharded over all ranks",
        CheckpointLayout::RankZero => "one writer",
        CheckpointLayout::Lead => "one writer's bulk, the rest sharded over the others",
        CheckpointLayout::Replicated => "each rank its own copy",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers_counted_by_slot_are_the_writers_a_map_counts() {
        let writes = [(3u32, 10u64), (0, 0), (3, 5), (7, 1), (0, 2)];
        let mut map = ByWriter::default();
        let mut dense = ByWriter::Dense {
            world: 8,
            slots: Vec::new(),
        };
        for (w, b) in writes {
            map.add(w, b);
            dense.add(w, b);
        }
        // A writer whose only write moved nothing is still a writer.
        assert_eq!(dense.len(), 3);
        assert_eq!(dense.len(), map.len());
        assert_eq!(dense.bytes(), vec![2, 15, 1]);
        assert_eq!(dense.bytes(), map.bytes());
        let none = ByWriter::Dense {
            world: 8,
            slots: Vec::new(),
        };
        assert_eq!((none.len(), none.bytes()), (0, vec![]));
    }
}
