//! A [`Workload`] written out: DLIO's workload YAML (the Hydra document
//! `dlio_benchmark --config-dir DIR workload=NAME` reads from
//! `DIR/workload/NAME.yaml`) and a note of how each setting was told.

use std::fmt::Write;

use super::{Sure, Value, Workload};

/// DLIO's sections, in its documents' order (top-level keys first).
const SECTIONS: [&str; 7] = [
    "",
    "workflow",
    "dataset",
    "reader",
    "train",
    "checkpoint",
    "metric",
];

/// The AU MLPerf Storage asks of a run.
const AU_BAR: f64 = 0.90;

fn scalar(v: &Value) -> String {
    match v {
        Value::Int(n) => n.to_string(),
        Value::Float(x) => format!("{x}"),
        Value::Bool(b) => b.to_string(),
        Value::Str(s) => quoted(s),
        Value::List(l) => format!(
            "[{}]",
            l.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// A string as a YAML scalar: plain where it is safe, else double-quoted.
fn quoted(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
        && !matches!(s, "true" | "false" | "null" | "yes" | "no" | "on" | "off")
        && s.parse::<f64>().is_err();
    if plain {
        s.to_string()
    } else {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// The workload YAML: the settings by section, in DLIO's order.
pub fn yaml(w: &Workload) -> String {
    let mut s = format!(
        "# DLIO workload told from an iorepro trace ({} processes traced); how each \
         setting was told: the note beside this file.\n# Run: mpirun -np {} dlio_benchmark \
         --config-dir DIR workload={}\n",
        w.traced_processes, w.processes, w.name
    );
    // By section, in DLIO's order; a section's settings in the order told.
    let rank = |key: &str| {
        let sec = key.split_once('.').map_or("", |(s, _)| s);
        SECTIONS
            .iter()
            .position(|&s| s == sec)
            .unwrap_or(SECTIONS.len())
    };
    let mut fields: Vec<&super::Field> = w.fields.iter().collect();
    fields.sort_by_key(|f| rank(f.key));
    let mut section = "";
    for f in fields {
        match f.key.split_once('.') {
            None => {
                let _ = writeln!(s, "{}: {}", f.key, scalar(&f.value));
            }
            Some((sec, key)) => {
                if sec != section {
                    let _ = writeln!(s, "\n{sec}:");
                    section = sec;
                }
                if f.key == "reader.file_shuffle" && f.value == Value::Str("off".into()) {
                    // DLIO 2.0.0 keeps this key's value as a string, which
                    // is never its `Shuffle.OFF`: set at all, it shuffles.
                    let _ = writeln!(
                        s,
                        "  # file_shuffle: off (DLIO's default; set, it shuffles)"
                    );
                    continue;
                }
                let _ = writeln!(s, "  {key}: {}", scalar(&f.value));
            }
        }
    }
    let _ = writeln!(s, "\nmetric:\n  au: {AU_BAR:.2}");
    s
}

/// The workload as MLPerf Storage's report generator reads a run's
/// `dlio_config/config.yaml`: every setting under `workload:`, the model as
/// `model.name`, and the record's length also as `record_length_bytes`
/// (MLPerf Storage 2.0's forms, which its rules read; DLIO 2.0.0's own
/// workload files give a plain name and `record_length`).
pub fn mlperf_config(w: &Workload) -> String {
    let mut s = String::from("workload:\n");
    // The header's comments say how to run the file alone; not this one's.
    for line in yaml(w).lines().filter(|l| !l.starts_with('#')) {
        if let Some(name) = line.strip_prefix("model: ") {
            let _ = writeln!(s, "  model:\n    name: {name}");
            continue;
        }
        if line.is_empty() {
            s.push('\n');
            continue;
        }
        let _ = writeln!(s, "  {line}");
        for (dlio, mlperf) in [
            ("  record_length: ", "record_length_bytes"),
            ("  record_length_stdev: ", "record_length_bytes_stdev"),
        ] {
            if let Some(value) = line.strip_prefix(dlio) {
                let _ = writeln!(s, "    {mlperf}: {value}");
            }
        }
    }
    s
}

/// The note: how each setting was told, and what DLIO cannot express.
pub fn note(w: &Workload) -> String {
    let mut s = format!(
        "# How the workload `{}` was told from the trace\n\n{} processes traced; the \
         workload runs at {}.\n\n| setting | value | how sure | how |\n|---|---|---|---|\n",
        w.name, w.traced_processes, w.processes
    );
    for f in &w.fields {
        let sure = match f.sure {
            Sure::Measured => "measured",
            Sure::Inferred => "inferred",
            Sure::Default => "default",
        };
        let _ = writeln!(
            s,
            "| `{}` | `{}` | {sure} | {} |",
            f.key,
            scalar(&f.value),
            f.how.replace('|', "\\|")
        );
    }
    if !w.cannot.is_empty() {
        s.push_str("\n## What DLIO cannot express of this job\n\n");
        for c in &w.cannot {
            let _ = writeln!(s, "- {c}");
        }
    }
    if w.processes != w.traced_processes {
        let _ = write!(
            s,
            "\n## At {} processes\n\nEach rank keeps the traced rank's batch, loader and \
             step, as DLIO and MLPerf Storage keep the batch per accelerator; the dataset \
             is the same, so each rank reads {}/{} of what a traced rank read. A save \
             written by every rank keeps each rank's bytes.\n",
            w.processes, w.traced_processes, w.processes
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::Field;
    use super::*;

    #[test]
    fn sections_nest_and_strings_are_quoted_where_yaml_needs_it() {
        let f = |key, value| Field {
            key,
            value,
            sure: Sure::Measured,
            how: "x | y".into(),
        };
        let w = Workload {
            name: "job".into(),
            processes: 4,
            traced_processes: 2,
            fields: vec![
                f("model", Value::Str("job".into())),
                f("dataset.data_folder", Value::Str("/d/a b".into())),
                f("dataset.num_files_train", Value::Int(32)),
                f("reader.file_shuffle", Value::Str("off".into())),
                f("train.computation_time", Value::Float(0.05)),
                f("checkpoint.layer_parameters", Value::List(vec![1, 2])),
            ],
            cannot: vec!["this".into()],
        };
        let y = yaml(&w);
        assert!(y.contains("model: job\n"), "{y}");
        assert!(
            y.contains("\ndataset:\n  data_folder: \"/d/a b\"\n  num_files_train: 32\n"),
            "{y}"
        );
        assert!(y.contains("  # file_shuffle: off"), "{y}");
        assert!(y.contains("  computation_time: 0.05\n"), "{y}");
        assert!(y.contains("  layer_parameters: [1, 2]\n"), "{y}");
        assert!(y.contains("mpirun -np 4"), "{y}");
        let n = note(&w);
        assert!(
            n.contains("| `dataset.num_files_train` | `32` | measured | x \\| y |"),
            "{n}"
        );
        assert!(n.contains("## At 4 processes"), "{n}");
        let c = mlperf_config(&w);
        assert!(
            c.starts_with("workload:\n  model:\n    name: job\n\n  dataset:\n    data_folder:"),
            "{c}"
        );
        assert!(c.contains("\n  metric:\n    au: 0.90\n"), "{c}");
        let w = Workload {
            fields: vec![f("dataset.record_length", Value::Int(4096))],
            ..w
        };
        let c = mlperf_config(&w);
        assert!(
            c.contains("    record_length: 4096\n    record_length_bytes: 4096\n"),
            "{c}"
        );
    }
}
