//! The manifest of an anonymized trace: host names and mount points hashed
//! as the rows' are, the command line dropped (its program's name kept only
//! when the user asks), and of the other keys only those that hold figures,
//! never names. Environment values are never in a manifest.

use serde_json::{json, Map, Value};

use super::{Anonymizer, SCHEME};
use crate::manifest::{Anonymized, Manifest};
use crate::mounts::Mount;
use crate::processes::{self, ProcessStart};

/// Keys that hold figures and fixed words only (what the kernel let the
/// collector capture, what it cost, what was lost): kept as they are.
const FIGURES: [&str; 6] = [
    "capabilities",
    "collector_usage",
    "dropped_by_op",
    "dropped_process_events",
    "stopped_by_signal",
    "no_process_seen",
];

/// Where the names were hashed: see [`Anonymized::at`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    Capture,
    Trace,
}

impl At {
    fn as_str(self) -> &'static str {
        match self {
            At::Capture => "capture",
            At::Trace => "trace",
        }
    }
}

/// What an anonymized trace's manifest says of how it was made.
pub fn anonymized(at: At, program_name_kept: bool, dropped_keys: Vec<String>) -> Anonymized {
    Anonymized {
        scheme: SCHEME.to_string(),
        at: at.as_str().to_string(),
        program_name_kept,
        dropped_keys,
    }
}

/// The command line as an anonymized trace keeps it: nothing, or with
/// `keep_program` the file name of its program alone (`python3`,
/// `torchrun`): arguments carry paths, and often tokens and keys.
pub fn command(cmd: Option<&[String]>, keep_program: bool) -> Option<Vec<String>> {
    let program = cmd?.first()?;
    let name = program.rsplit('/').next().unwrap_or(program);
    (keep_program && !name.is_empty()).then(|| vec![name.to_string()])
}

/// A manifest key as an anonymized trace keeps it, or `None` to leave it out.
pub fn extra(key: &str, value: &Value) -> Option<Value> {
    if FIGURES.contains(&key) {
        return Some(value.clone());
    }
    match key {
        // The probes and the load time; of the target only its kind (its
        // command line or cgroup path would name the job).
        "collector" => {
            let mut kept: Map<String, Value> = ["hooks", "load_s"]
                .into_iter()
                .filter_map(|k| Some((k.to_string(), value.get(k)?.clone())))
                .collect();
            if let Some(target) = value.get("target").and_then(Value::as_str) {
                let kind = target.split('(').next().unwrap_or("").to_ascii_lowercase();
                kept.insert("target".into(), Value::String(kind));
            }
            Some(Value::Object(kept))
        }
        // That the capture stopped, and the fixed cause; the error's own
        // text may name files.
        "capture_stopped" => {
            let error = value.get("error").and_then(Value::as_str).unwrap_or("");
            let fixed = ["trace disk full", "disk quota exceeded"];
            let cause = fixed
                .iter()
                .find(|f| error.starts_with(*f))
                .map_or("writing the trace failed", |f| f);
            Some(json!({ "error": cause }))
        }
        _ => None,
    }
}

/// What an anonymized trace carries of its original's manifest; the rows'
/// own counts, hosts and time range the writer takes from the rows.
pub struct Carried {
    pub command: Option<Vec<String>>,
    pub mounts: Option<Vec<Mount>>,
    /// Pids and times are figures; the host is a name, hashed.
    pub process_starts: Vec<ProcessStart>,
    pub extra: Map<String, Value>,
    pub anonymized: Anonymized,
}

/// The manifest `m` anonymized with `a` (see the module's rules).
pub fn carried(a: &Anonymizer, m: &Manifest, keep_program: bool) -> Carried {
    let mut kept = Map::new();
    let mut dropped = Vec::new();
    for (k, v) in &m.extra {
        match extra(k, v) {
            Some(v) => {
                kept.insert(k.clone(), v);
            }
            None => dropped.push(k.clone()),
        }
    }
    let command = command(m.command.as_deref(), keep_program);
    Carried {
        anonymized: anonymized(At::Trace, command.is_some(), dropped),
        command,
        mounts: m
            .mounts
            .as_ref()
            .map(|ms| ms.iter().map(|x| a.mount(x)).collect()),
        process_starts: processes::with_hosts(&m.hosts, &m.process_starts)
            .map(|s| ProcessStart {
                host: s.host.map(|h| a.host(&h)),
                ..s
            })
            .collect(),
        extra: kept,
    }
}
