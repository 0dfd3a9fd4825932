//! The small real traces bundled in `traces/samples/`.

use std::path::PathBuf;

use crate::bins::workspace_root;

/// The DDP training job captured by the end-to-end test (see its NOTE.md).
pub const TORCH_DDP: &str = "torch-ddp-dcp";

/// The trace directory of a bundled sample.
pub fn sample(name: &str) -> PathBuf {
    let p = workspace_root().join("traces/samples").join(name);
    assert!(
        p.join("manifest.json").is_file(),
        "{}: bundled sample trace missing",
        p.display()
    );
    p
}
