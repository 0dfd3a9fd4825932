//! The small real traces bundled in `traces/samples/`.

use std::path::PathBuf;

use crate::bins::workspace_root;

/// The DDP training job captured by the end-to-end test (see its NOTE.md).
pub const TORCH_DDP: &str = "torch-ddp-dcp";
/// The same job restarted from its newest checkpoint.
pub const TORCH_DDP_RESUME: &str = "torch-ddp-dcp-resume";
/// The same job with batches of 4: each epoch read ahead in one burst.
pub const TORCH_DDP_BATCH4: &str = "torch-ddp-dcp-batch4";
/// A job reading a sharded dataset: big shard files, read in 1 MiB calls.
pub const TORCH_DDP_SHARDS: &str = "torch-ddp-shards";
/// Every bundled sample of the DDP job reading one file per sample.
pub const ALL: [&str; 3] = [TORCH_DDP, TORCH_DDP_RESUME, TORCH_DDP_BATCH4];

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
