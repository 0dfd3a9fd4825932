//! What a file is to the job, as far as scaling goes, and how a
//! checkpoint's files are laid out over the ranks.

use std::path::Path;

use iorepro_analysis::roles::Role;

use crate::plan::survey::PathInfo;

/// A file's part in the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole {
    /// Read and never changed: the data the job trains on.
    Dataset,
    /// Written by the job: checkpoints (and what else a job writes).
    Checkpoint,
    /// Directories, files only looked at: each rank's own, as traced.
    Other,
}

/// The one place a file's role is decided for scaling, from the role the
/// trace analysis gives it ([`iorepro_analysis::roles`]): dataset
/// files are shared out, checkpoint files the job wrote keep their layout,
/// and everything else (code, system and scratch files, a checkpoint only
/// read back on resume) is each rank's own, as traced. A path the analysis
/// gave no role falls back on what the replay saw: written is a
/// checkpoint, only read is the dataset.
pub fn file_role(info: &PathInfo) -> FileRole {
    if info.is_dir {
        return FileRole::Other;
    }
    match info.role {
        Some(Role::Dataset) => FileRole::Dataset,
        Some(Role::Checkpoint) if info.written => FileRole::Checkpoint,
        Some(_) => FileRole::Other,
        None if info.written => FileRole::Checkpoint,
        None if info.read_extent > 0 => FileRole::Dataset,
        None => FileRole::Other,
    }
}

/// The name of a file written by `rank` with that rank's number taken out
/// (`__1_0.distcp` by rank 1 is `__{rank}_0.distcp`), so the files the ranks
/// write of one checkpoint share one name; the name as it is when no digit
/// run in it is the rank's number.
pub fn rank_template(path: &str, rank: i32) -> (String, String) {
    let dir = Path::new(path)
        .parent()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default();
    (dir, replace_rank(&file_name(path), rank))
}

/// The last part of `path`.
pub fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn replace_rank(name: &str, rank: i32) -> String {
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if name[start..i].parse::<i64>().ok() == Some(rank as i64) {
                return format!("{}{{rank}}{}", &name[..start], &name[i..]);
            }
        } else {
            i += 1;
        }
    }
    name.to_string()
}

/// Whether a file name says it is one rank's shard of a checkpoint
/// (PyTorch DCP and Megatron dist-ckpt `__0_0.distcp`, DeepSpeed ZeRO
/// `zero_pp_rank_0_...`, names with `rank` and a number), for traces of one
/// rank, where which ranks wrote cannot tell.
pub fn names_a_shard(path: &str) -> bool {
    let name = Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if name.ends_with(".distcp") || name.contains("zero_pp_rank_") {
        return true;
    }
    let mut rest = name.as_str();
    while let Some(at) = rest.find("rank") {
        rest = &rest[at + 4..];
        let after = rest.trim_start_matches(['-', '_']);
        if after.starts_with(|c: char| c.is_ascii_digit()) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_numbers_come_out_of_shard_names() {
        assert_eq!(
            rank_template("/c/step_10/__1_0.distcp", 1),
            ("/c/step_10".into(), "__{rank}_0.distcp".into())
        );
        assert_eq!(rank_template("/c/s/__0_0.distcp", 0).1, "__{rank}_0.distcp");
        assert_eq!(rank_template("/c/rank-00003.pt", 3).1, "rank-{rank}.pt");
        assert_eq!(rank_template("/c/.metadata", 0).1, ".metadata");
        assert_eq!(rank_template("/c/model_e1.pt", 0).1, "model_e1.pt");
        assert!(names_a_shard("/c/__0_0.distcp"));
        assert!(names_a_shard(
            "/c/zero_pp_rank_0_mp_rank_00_optim_states.pt"
        ));
        assert!(names_a_shard("/c/rank-00000.pt"));
        assert!(!names_a_shard("/c/model.pt"));
        assert!(!names_a_shard("/c/.metadata"));
        assert!(!names_a_shard("/c/ranking.pt"));
    }
}
