//! What a path's name alone says about a file: code, a checkpoint, a log,
//! a run record. What the job did with it decides among these (see the
//! rules in [`super`]). The rules on a name's words are the format's
//! ([`iorepro_format::path_traits::names`]), which the collector reads from
//! names before it hashes them; only how names group into families is the
//! analysis's own.

pub use iorepro_format::path_traits::names::{looks_like_checkpoint, looks_like_code, under};

/// The name of a file with every run of digits made one `#`: the files of
/// one family (`step_100/rank_0.pt`, `step_200/rank_1.pt`) share it.
pub(super) fn family_of(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut in_digits = false;
    for ch in p.chars() {
        if ch.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(ch);
            in_digits = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_share_a_name_but_its_numbers() {
        assert_eq!(family_of("/c/step_100/rank_0.pt"), "/c/step_#/rank_#.pt");
    }
}
