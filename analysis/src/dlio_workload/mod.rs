//! A captured job as a DLIO workload: the settings of DLIO's workload YAML
//! (dataset, reader, train, checkpoint, the number of processes) told from
//! the trace, each with how it was told and how sure that is: measured
//! (read off the rows), inferred (from the rows' rhythm or names), or a
//! default (the trace cannot tell; the note says which and why).
//!
//! The dataset's files and the checkpoints are the files' roles
//! ([`crate::roles`]); the epochs are passes over the dataset's files; the
//! batch, the loader's workers and the step time come from the rhythm of
//! the visits ([`bursts`]); the saves from the checkpoint phases and the
//! files' names ([`saves`]). [`render`] writes the YAML and the note.

mod bursts;
mod observe;
pub mod render;
mod saves;

use iorepro_format::error::TraceResult;
use iorepro_format::reader::TraceReader;

use crate::overview::Overview;
use crate::roles::FileRoles;

pub use saves::{Cadence, TORCH_SAVE_BYTES};

/// How a setting was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sure {
    /// Read off the rows (a count, a size, a name).
    Measured,
    /// Told from the rows' rhythm or shape, as the note explains.
    Inferred,
    /// The trace cannot tell: DLIO's default or a stated choice.
    Default,
}

/// A setting's value.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum Value {
    Int(u64),
    Float(f64),
    Str(String),
    Bool(bool),
    List(Vec<u64>),
}

/// One setting of the workload.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Field {
    /// Its section and key, as DLIO's YAML nests them (`reader.batch_size`).
    pub key: &'static str,
    pub value: Value,
    pub sure: Sure,
    /// How it was told, or why the default.
    pub how: String,
}

/// The workload told from a trace.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Workload {
    /// The workload's name (`workload=NAME`).
    pub name: String,
    /// The processes DLIO runs with (`mpirun -np`), and those traced.
    pub processes: u64,
    pub traced_processes: u64,
    pub fields: Vec<Field>,
    /// What the job did that DLIO cannot express.
    pub cannot: Vec<String>,
}

impl Workload {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|f| f.key == key).map(|f| &f.value)
    }
}

/// A workload name from the trace directory's name: letters, digits and
/// `_` (Hydra takes it as a file name and a config key).
pub fn name_from(trace: &std::path::Path) -> String {
    let base = trace
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
        .unwrap_or_default();
    let name: String = base
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if name.is_empty() {
        "traced".into()
    } else {
        name
    }
}

/// What [`infer`] is asked for.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    /// The workload's name.
    pub name: String,
    /// Processes to run at (`--ranks`); the traced count where `None`.
    pub ranks: Option<u64>,
    /// DLIO's own time per step on the machine that will run it, seconds:
    /// taken from the traced step time to give `computation_time`.
    pub step_overhead_s: f64,
}

/// A format DLIO names, by a file's extension, and its loader.
fn format_of(ext: &str) -> Option<(&'static str, &'static str)> {
    Some(match ext.to_ascii_lowercase().as_str() {
        "npz" => ("npz", "pytorch"),
        "npy" => ("npy", "pytorch"),
        "h5" | "hdf5" => ("hdf5", "pytorch"),
        "jpg" | "jpeg" => ("jpeg", "pytorch"),
        "png" => ("png", "pytorch"),
        "csv" => ("csv", "pytorch"),
        "tfrecord" | "tfrecords" => ("tfrecord", "tensorflow"),
        _ => return None,
    })
}

/// What `np.savez` adds around DLIO's one-sample record (the zip container
/// and the label array), in bytes.
const NPZ_ONE_SAMPLE_BYTES: u64 = 498;

/// Tells the workload of `reader`.
pub fn infer(reader: &TraceReader, ask: &Ask) -> TraceResult<Workload> {
    let roles = FileRoles::compute(reader)?;
    let overview = Overview::compute_with_startup(reader)?;
    let o = observe::observe(reader, &roles)?;
    let mut w = Workload {
        name: ask.name.clone(),
        processes: 0,
        traced_processes: 0,
        fields: Vec::new(),
        cannot: Vec::new(),
    };
    let ranks: Vec<i32> = o
        .first_process
        .keys()
        .copied()
        .filter(|&r| r >= 0)
        .collect();
    w.traced_processes = ranks.len().max(1) as u64;
    w.processes = ask.ranks.unwrap_or(w.traced_processes);
    let mut add = |key, value, sure, how: String| {
        w.fields.push(Field {
            key,
            value,
            sure,
            how,
        })
    };
    add(
        "model",
        Value::Str(ask.name.clone()),
        Sure::Default,
        "the workload's name".into(),
    );
    // The dataset.
    let files = o.dataset.len() as u64;
    let layout = dlio_layout(o.dataset.keys());
    let ext = o
        .dataset
        .keys()
        .next()
        .and_then(|p| p.rsplit_once('.'))
        .map_or("", |(_, e)| e)
        .to_string();
    let (format, loader) = format_of(&ext).unwrap_or(("npy", "pytorch"));
    let format_sure = if format_of(&ext).is_some() {
        (Sure::Measured, format!("the dataset's files end in .{ext}"))
    } else {
        (
            Sure::Default,
            format!(
                "the dataset's files end in `.{ext}`, no format DLIO names: npy (an array \
                 read whole) taken"
            ),
        )
    };
    add(
        "framework",
        Value::Str(
            if loader == "tensorflow" {
                "tensorflow"
            } else {
                "pytorch"
            }
            .into(),
        ),
        Sure::Inferred,
        format!("DLIO's loader for {format}"),
    );
    add(
        "workflow.generate_data",
        Value::Bool(false),
        Sure::Default,
        "run DLIO once with ++workload.workflow.generate_data=True \
         ++workload.workflow.train=False to make the dataset"
            .into(),
    );
    add(
        "workflow.train",
        Value::Bool(true),
        Sure::Default,
        "the job trains".into(),
    );
    let (folder, folder_how) = match &layout {
        Some(l) => (
            l.folder.clone(),
            "DLIO's own layout (FOLDER/train/PREFIX_I_of_N.EXT): the traced folder".to_string(),
        ),
        None => (
            format!("data/{}", ask.name),
            format!(
                "the job's files are under {}, not in DLIO's layout: DLIO makes its own \
                 dataset here",
                saves::common_folder(o.dataset.keys())
            ),
        ),
    };
    add(
        "dataset.data_folder",
        Value::Str(folder),
        if layout.is_some() {
            Sure::Measured
        } else {
            Sure::Default
        },
        folder_how,
    );
    add(
        "dataset.format",
        Value::Str(format.into()),
        format_sure.0,
        format_sure.1,
    );
    let (num_files, files_how) = match &layout {
        Some(l) if l.of == files => (l.of, format!("{files} files read, named `_of_{}`", l.of)),
        Some(l) => (l.of, format!("named `_of_{}`; {files} of them read", l.of)),
        None => (files, format!("{files} dataset files read")),
    };
    add(
        "dataset.num_files_train",
        Value::Int(num_files),
        Sure::Measured,
        files_how,
    );
    if let Some(l) = &layout {
        add(
            "dataset.file_prefix",
            Value::Str(l.prefix.clone()),
            Sure::Measured,
            "the files' names".into(),
        );
        if l.subfolders > 0 {
            add(
                "dataset.num_subfolders_train",
                Value::Int(l.subfolders),
                Sure::Measured,
                "the files' folders".into(),
            );
        }
    }
    add(
        "dataset.num_samples_per_file",
        Value::Int(1),
        Sure::Default,
        "a sample inside a file cannot be told from a read of it: 1 taken (DLIO's default)".into(),
    );
    let sizes: Vec<u64> = o.dataset.values().map(|f| f.extent).collect();
    let overhead = if format == "npz" && layout.is_some() {
        NPZ_ONE_SAMPLE_BYTES
    } else {
        0
    };
    let mean = sizes.iter().sum::<u64>() as f64 / sizes.len().max(1) as f64;
    let stdev = (sizes
        .iter()
        .map(|&s| (s as f64 - mean).powi(2))
        .sum::<f64>()
        / sizes.len().max(1) as f64)
        .sqrt();
    add(
        "dataset.record_length",
        Value::Int((mean as u64).saturating_sub(overhead)),
        Sure::Measured,
        if overhead > 0 {
            format!(
                "the files' mean size, {mean:.0} bytes (the furthest byte read), less \
                 {overhead} bytes of np.savez's container"
            )
        } else {
            "the files' mean size (the furthest byte read), container included".to_string()
        },
    );
    add(
        "dataset.record_length_stdev",
        Value::Int(stdev.round() as u64),
        Sure::Measured,
        "the spread of the files' sizes".into(),
    );
    if stdev > 0.25 * mean {
        w.cannot.push(format!(
            "the files' sizes spread more than a normal law of mean {mean:.0} and spread \
             {stdev:.0} bytes holds (DLIO draws sizes from one)"
        ));
    }
    // The reader.
    let family = bursts::Family {
        processes: &o.processes,
        parents: &o.parents,
        first_process: &o.first_process,
    };
    let rhythm = bursts::rhythm(&o.visits, &family);
    add(
        "reader.data_loader",
        Value::Str(loader.into()),
        Sure::Inferred,
        format!("DLIO's loader for {format}"),
    );
    let batch = rhythm.as_ref().map_or(1, |r| r.batch_files);
    add(
        "reader.batch_size",
        Value::Int(batch),
        if rhythm.is_some() {
            Sure::Inferred
        } else {
            Sure::Default
        },
        match &rhythm {
            Some(r) => format!(
                "each loader reads a batch's files back to back and waits: {} files in the \
                 most common of its bursts ({} bursts)",
                r.batch_files, r.bursts
            ),
            None => "no visits of the dataset's files: 1 taken".into(),
        },
    );
    let workers = rhythm.as_ref().map_or(0, |r| r.workers);
    add(
        "reader.read_threads",
        Value::Int(workers),
        if rhythm.is_some() {
            Sure::Measured
        } else {
            Sure::Default
        },
        match &rhythm {
            Some(r) if r.threads => format!("{workers} threads of one process read a rank's files"),
            Some(_) if workers == 0 => "each rank's training loop read its files itself".into(),
            Some(_) => format!("{workers} processes besides the training loop read a rank's files"),
            None => "no visits: 0 taken".into(),
        },
    );
    let shuffled = shuffled(&o);
    add(
        "reader.file_shuffle",
        Value::Str(if shuffled { "seed" } else { "off" }.into()),
        Sure::Inferred,
        if shuffled {
            "the files were not read in the order of their names".into()
        } else {
            "the files were read in the order of their names".into()
        },
    );
    add(
        "reader.sample_shuffle",
        Value::Str(if shuffled { "seed" } else { "off" }.into()),
        Sure::Inferred,
        "as the files' order (one sample a file)".into(),
    );
    // The training.
    let visits = o.visits.len() as u64;
    let epochs = ((visits as f64 / files.max(1) as f64).round() as u64).max(1);
    add(
        "train.epochs",
        Value::Int(epochs),
        Sure::Measured,
        format!("{visits} visits of {files} files"),
    );
    let by_rhythm = rhythm.as_ref().and_then(|r| r.step_s);
    let save_spans: Vec<(i64, i64)> = overview
        .phases
        .iter()
        .filter(|p| p.kind == crate::phases::PhaseKind::Checkpoint)
        .map(|p| (p.start_unix_ns, p.end_unix_ns))
        .collect();
    let steps_per_epoch = files / (batch * w.traced_processes).max(1);
    let by_epochs = bursts::step_from_epochs(&o.visits, files, steps_per_epoch, &save_spans);
    // A loader that read far ahead of its steps hides them from the
    // batches' rhythm; the epochs' time still holds them.
    let (step, step_how) = match (by_rhythm, by_epochs) {
        (r, Some(e)) if r.is_none_or(|r| r < 0.5 * e) => (
            Some(e),
            format!(
                "a rank's time an epoch less its saves, over its {steps_per_epoch} steps: \
                 {e:.4} s a step{}",
                match r {
                    Some(r) => format!(
                        " (its loader read ahead of its steps: {r:.4} s between the \
                         batches it read)"
                    ),
                    None => String::new(),
                }
            ),
        ),
        (Some(r), _) => (
            Some(r),
            format!(
                "a rank's median time from one batch to the next, {r:.4} s, where the \
                 loader kept up"
            ),
        ),
        (None, _) => (None, String::new()),
    };
    add(
        "train.computation_time",
        Value::Float(round_ms(
            step.map_or(0.0, |s| (s - ask.step_overhead_s).max(0.0)),
        )),
        if step.is_some() {
            Sure::Inferred
        } else {
            Sure::Default
        },
        match step {
            Some(_) => format!(
                "{step_how}, less --step-overhead {:.4} s (DLIO's own time a step): its \
                 compute and its framework's time",
                ask.step_overhead_s
            ),
            None => "no steps seen: 0 taken".into(),
        },
    );
    // The saves.
    let counting = saves::Steps {
        files,
        batch,
        processes: w.traced_processes,
        step_s: step,
    };
    let saves = saves::saves(&o, &overview.phases, counting);
    add(
        "workflow.checkpoint",
        Value::Bool(saves.is_some()),
        Sure::Measured,
        match &saves {
            Some(s) => format!("{} saves", s.count),
            None => "no checkpoint file written".into(),
        },
    );
    if let Some(s) = &saves {
        save_fields(&mut w, s, &ask.name);
        if let saves::Cadence::Steps { between } = s.cadence {
            // DLIO 2.0.0 counts the steps to a save from each epoch's start.
            let dlio_saves = steps_per_epoch / between.max(1) * epochs;
            if dlio_saves != s.count as u64 {
                w.cannot.push(format!(
                    "saves every {between} steps counted over the run ({} saves): DLIO \
                     counts them from each epoch's start ({dlio_saves} saves of \
                     {steps_per_epoch}-step epochs)",
                    s.count
                ));
            }
        }
    }
    w.cannot.push(
        "a step's compute that varies from step to step: DLIO sleeps the same time each \
         step (computation_time_stdev aside)"
            .into(),
    );
    if workers > 0 {
        w.cannot.push(
            "how the loader's workers start (forked at each epoch or kept): DLIO's PyTorch \
             loader keeps them"
                .into(),
        );
    }
    Ok(w)
}

/// The checkpoint section of `s`.
fn save_fields(w: &mut Workload, s: &saves::Saves, name: &str) {
    let mut add = |key, value, sure, how: String| {
        w.fields.push(Field {
            key,
            value,
            sure,
            how,
        })
    };
    let folder = match &s.dlio_parts {
        Some(_) => (
            s.folder.clone(),
            Sure::Measured,
            "the traced folder".to_string(),
        ),
        None => (
            format!("checkpoints/{name}"),
            Sure::Default,
            format!(
                "the job saved under {}; DLIO writes its own files here",
                s.folder
            ),
        ),
    };
    add(
        "checkpoint.checkpoint_folder",
        Value::Str(folder.0),
        folder.1,
        folder.2,
    );
    let one = s.writers.len() == 1;
    add(
        "checkpoint.type",
        Value::Str(if one { "rank_zero" } else { "all_ranks" }.into()),
        Sure::Measured,
        format!("{} rank(s) wrote checkpoint files", s.writers.len()),
    );
    match s.cadence {
        Cadence::Epochs { after, between } => {
            add(
                "checkpoint.checkpoint_after_epoch",
                Value::Int(after),
                Sure::Measured,
                "the first save came at that epoch's end".into(),
            );
            add(
                "checkpoint.epochs_between_checkpoints",
                Value::Int(between),
                Sure::Measured,
                "epochs from one save to the next".into(),
            );
        }
        Cadence::Steps { between } => add(
            "checkpoint.steps_between_checkpoints",
            Value::Int(between),
            Sure::Inferred,
            "a rank's steps from one save to the next: within what its steps over the \
             run and the saves allow (its files read / batch / ranks, read-ahead counted), \
             the count whose steps at the traced step time match the time between saves"
                .into(),
        ),
    }
    match &s.dlio_parts {
        Some(p) => {
            add(
                "checkpoint.model_size",
                Value::Int(p.model.unwrap_or(0)),
                Sure::Measured,
                format!("the model file's size less torch.save's {TORCH_SAVE_BYTES} bytes"),
            );
            add(
                "checkpoint.num_layers",
                Value::Int(p.layers),
                Sure::Measured,
                "layer files a save".into(),
            );
            add(
                "checkpoint.layer_parameters",
                Value::List(p.layer.into_iter().collect()),
                Sure::Inferred,
                "a layer file's size less torch.save's bytes, as one tensor (DLIO's list \
                 of tensors in it cannot be told apart)"
                    .into(),
            );
            add(
                "checkpoint.optimization_groups",
                Value::List(p.optimizer.map(|b| b / 3).into_iter().collect()),
                Sure::Inferred,
                "the optimizer file holds each group twice and their sum once: a third of \
                 its size as one group"
                    .into(),
            );
        }
        None => {
            add(
                "checkpoint.model_size",
                Value::Int(s.bytes_per_writer),
                Sure::Measured,
                format!(
                    "bytes a writer wrote in a save ({:.1} files a save: DLIO writes one)",
                    s.files_per_save
                ),
            );
            for (key, what) in [
                ("checkpoint.num_layers", Value::Int(0)),
                ("checkpoint.layer_parameters", Value::List(Vec::new())),
                ("checkpoint.optimization_groups", Value::List(Vec::new())),
            ] {
                add(
                    key,
                    what,
                    Sure::Default,
                    "the save is one model file".into(),
                );
            }
        }
    }
}

/// Whether the files were read out of their names' order: each reader's
/// visits, in time, go back in name order about once an epoch unless
/// shuffled (then about every other visit).
fn shuffled(o: &observe::Observed) -> bool {
    let mut by_reader: std::collections::BTreeMap<(i32, i32, i32), Vec<&str>> = Default::default();
    for v in &o.visits {
        let name = o.names[v.file as usize].as_str();
        by_reader
            .entry((v.rank, v.pid, v.tid))
            .or_default()
            .push(name);
    }
    let (mut back, mut steps) = (0usize, 0usize);
    for names in by_reader.values() {
        back += names.windows(2).filter(|w| w[1] < w[0]).count();
        steps += names.len().saturating_sub(1);
    }
    // Unshuffled, a reader goes back once per epoch; a reader's epoch has
    // at least a few visits, so a quarter of its steps is well above that.
    steps > 0 && back * 4 > steps
}

/// Seconds to the millisecond (a step's time is not known closer).
fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

/// DLIO's dataset layout (`FOLDER/train/[SUB/]PREFIX_I_of_N.EXT`), where
/// every file is so named.
struct Layout {
    folder: String,
    prefix: String,
    of: u64,
    subfolders: u64,
}

fn dlio_layout<'a>(paths: impl Iterator<Item = &'a String>) -> Option<Layout> {
    let mut layout: Option<Layout> = None;
    let mut subs = std::collections::BTreeSet::new();
    for p in paths {
        let (dir, name) = p.rsplit_once('/')?;
        let (train_dir, sub) = match dir.rsplit_once('/') {
            Some((d, "train")) => (d, None),
            Some((d, s)) if d.ends_with("/train") && s.parse::<u64>().is_ok() => {
                (d.strip_suffix("/train")?, Some(s))
            }
            _ => return None,
        };
        let stem = name.rsplit_once('.')?.0;
        let (head, of) = stem.rsplit_once("_of_")?;
        let (prefix, index) = head.rsplit_once('_')?;
        let (of, _) = (of.parse::<u64>().ok()?, index.parse::<u64>().ok()?);
        if let Some(s) = sub {
            subs.insert(s.to_string());
        }
        match &layout {
            None => {
                layout = Some(Layout {
                    folder: train_dir.to_string(),
                    prefix: prefix.to_string(),
                    of,
                    subfolders: 0,
                })
            }
            Some(l) if l.folder == train_dir && l.prefix == prefix && l.of == of => {}
            Some(_) => return None,
        }
    }
    layout.map(|mut l| {
        l.subfolders = subs.len() as u64;
        l
    })
}
