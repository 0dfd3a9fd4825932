//! What a capture records on this kernel, gathered while the programs are
//! attached: the manifest says it (`capabilities`) and stderr warns once, so
//! a trace from an older kernel is never mistaken for a complete one.

/// What a capture records on this kernel: the hooks attached, and the
/// optional ones left out with the reason (written to the manifest as
/// `capabilities`, and said once on stderr).
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    /// `uname -r`.
    pub kernel: String,
    pub hooks: Vec<&'static str>,
    pub missing: Vec<Missing>,
}

/// An optional part of the capture this kernel does not allow.
#[derive(Debug, Clone)]
pub struct Missing {
    /// A short name: `io_uring`, `page_faults`.
    pub what: &'static str,
    /// What the trace lacks, in a user's words.
    pub effect: &'static str,
    /// Why: what the kernel lacks.
    pub why: String,
}

impl Capabilities {
    pub fn to_json(&self) -> serde_json::Value {
        let missing: Vec<_> = self
            .missing
            .iter()
            .map(|m| serde_json::json!({ "what": m.what, "effect": m.effect, "why": m.why }))
            .collect();
        serde_json::json!({ "kernel": self.kernel, "hooks": self.hooks, "missing": missing })
    }

    /// One line per missing part, for stderr.
    pub fn warnings(&self) -> Vec<String> {
        self.missing
            .iter()
            .map(|m| format!("{}: {}", m.effect, m.why))
            .collect()
    }
}
