//! Where the replay runs and at how many ranks: `--target` (a directory, or
//! a bucket as `s3://BUCKET/PREFIX` with [`super::object_storage`]'s
//! settings) and the worlds `--ranks`, `--nodes` and `--ranks-per-node`
//! ask for.

use std::path::{Path, PathBuf};

use clap::Args;

use super::object_storage::ObjectStorageArgs;
use crate::error::{ReplayError, ReplayResult};
use crate::io::target::Target;
use crate::ranks::layout::Asked;

#[derive(Debug, Args)]
#[command(next_help_heading = "Target and ranks")]
pub struct TargetArgs {
    /// Directory to replay into; nothing outside it is touched. Or object
    /// storage, s3://BUCKET/PREFIX: endpoint, region and credentials from
    /// the AWS environment variables and profile files, as the AWS CLI.
    #[arg(long, required_unless_present = "plan_only")]
    pub target: Option<PathBuf>,
    /// Ranks to replay (default: the trace's rank count, or the launcher's
    /// world size). With --plan-only, a list (64,512,4096): a sizing sweep.
    #[arg(long, value_delimiter = ',', value_name = "N")]
    pub ranks: Vec<u32>,
    /// Nodes the ranks are spread over (for reports when ranks run as
    /// threads); a list in a sweep, one per --ranks entry or one for all.
    #[arg(long, value_delimiter = ',', value_name = "M")]
    pub nodes: Vec<u32>,
    /// Ranks on each node; a list in a sweep, as --nodes.
    #[arg(long, value_delimiter = ',', value_name = "K")]
    pub ranks_per_node: Vec<u32>,
}

/// The scheme of a target written as a URL (`s3://bucket/prefix`,
/// `gs://...`, `file://...`): a name of letters, digits, `+`, `-` or `.`
/// starting with a letter, then `://`.
pub(super) fn url_scheme(target: &Path) -> Option<&str> {
    let t = target.to_str()?;
    let (scheme, _) = t.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

impl TargetArgs {
    /// What `--target` names, if given: a bucket for `s3://`, else a
    /// directory. Any other URL is refused (`s3://bench/run1` taken as a
    /// path would be a relative directory named `s3:`, and the replay would
    /// "succeed" on the local disk).
    pub fn target(&self, s3: &ObjectStorageArgs) -> ReplayResult<Option<Target>> {
        let Some(target) = self.target.as_deref() else {
            return Ok(None);
        };
        let Some(scheme) = url_scheme(target) else {
            return Ok(Some(Target::Dir(target.to_path_buf())));
        };
        if scheme != "s3" {
            return Err(ReplayError::Usage(format!(
                "--target {}: `{scheme}://` targets are not served; give s3://BUCKET/PREFIX \
                 or a directory on the storage to measure",
                target.display()
            )));
        }
        Ok(Some(Target::Bucket(s3.object_target(target)?)))
    }

    /// The worlds `--ranks`, `--nodes` and `--ranks-per-node` ask for: one
    /// each, or lists of one entry per rank count (a single entry of
    /// `--nodes` or `--ranks-per-node` goes with every one).
    pub fn worlds(&self) -> ReplayResult<Vec<Asked>> {
        let usage = ReplayError::Usage;
        if self.ranks.contains(&0) || self.nodes.contains(&0) || self.ranks_per_node.contains(&0) {
            return Err(usage(
                "--ranks, --nodes and --ranks-per-node must be positive".into(),
            ));
        }
        let count = self.ranks.len().max(1);
        let nth = |flag: &str, v: &[u32], i: usize| -> ReplayResult<Option<u32>> {
            match v.len() {
                0 => Ok(None),
                1 => Ok(Some(v[0])),
                n if n == count => Ok(Some(v[i])),
                n => Err(usage(format!(
                    "{flag} lists {n} values for {count} rank count(s): give one, or one per --ranks entry"
                ))),
            }
        };
        (0..count)
            .map(|i| {
                Ok(Asked {
                    ranks: self.ranks.get(i).copied(),
                    nodes: nth("--nodes", &self.nodes, i)?,
                    ranks_per_node: nth("--ranks-per-node", &self.ranks_per_node, i)?,
                })
            })
            .collect()
    }
}
