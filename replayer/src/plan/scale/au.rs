//! Accelerator utilisation (AU) as MLPerf Storage's benchmark (DLIO)
//! computes it, so a replay's AU and a DLIO run's `summary.json` can be
//! set side by side.
//!
//! DLIO's statistics counter times each rank's block of training steps
//! (an epoch, for a job without evaluation blocks) from the block's start
//! to its end, and each step from the start of its batch's loading to the
//! end of its compute. Its AU for the block leaves the first step out of
//! both sides: the compute of steps 2..n over the block's time less the
//! first step's. The first step waits for the loader's first batch (the
//! workers starting, their read-ahead filling), which would otherwise count
//! against the storage at every epoch's start. The epoch's AU is the
//! mean over ranks.
//!
//! The whole epoch's compute over its time, which counts the first step,
//! is the replay's other figure (`au_whole_epoch_percent`): lower where
//! the first batch waits long (a throttled start), equal where the storage
//! keeps up.

/// DLIO's AU, in percent, of one rank's block, from its per-step record:
/// `proc_s[i]` the time of step i from its batch's loading to the end of
/// its compute, `compute_s[i]` its compute. With no compute after the
/// first step, 0, as DLIO gives it.
pub fn from_steps(block_s: f64, proc_s: &[f64], compute_s: &[f64]) -> f64 {
    let compute: f64 = compute_s.iter().skip(1).sum();
    let first = proc_s.first().copied().unwrap_or(0.0);
    from_totals(block_s, first, compute)
}

/// The same from totals: the block's time, its first step's time and the
/// compute of its other steps.
pub fn from_totals(block_s: f64, first_step_s: f64, later_compute_s: f64) -> f64 {
    let time = block_s - first_step_s;
    if later_compute_s <= 0.0 || time <= 0.0 {
        return 0.0;
    }
    100.0 * later_compute_s / time
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_step_is_left_out_of_both_sides() {
        // Four steps of 1 s compute; the first waits 3 s for its batch, the
        // others 0.25 s each. The block: 4 + 1 + 3 * 1.25 = 8.75 s.
        let proc_s = [4.0, 1.25, 1.25, 1.25];
        let compute_s = [1.0, 1.0, 1.0, 1.0];
        let au = from_steps(8.75, &proc_s, &compute_s);
        // DLIO: 3 s of compute over 8.75 - 4 s.
        assert!((au - 100.0 * 3.0 / 4.75).abs() < 1e-9, "{au}");
        // The whole block's figure counts the slow start: 4 / 8.75.
        let whole = 100.0 * compute_s.iter().sum::<f64>() / 8.75;
        assert!(au > whole + 17.0, "{au} vs {whole}");
        assert_eq!(from_totals(8.75, 4.0, 3.0), au);
    }

    #[test]
    fn on_storage_that_keeps_up_it_is_the_whole_blocks() {
        let proc_s = [1.1; 10];
        let compute_s = [1.0; 10];
        let au = from_steps(11.0, &proc_s, &compute_s);
        assert!((au - 100.0 / 1.1).abs() < 1e-9, "{au}");
    }

    #[test]
    fn nothing_computed_after_the_first_step_is_zero() {
        assert_eq!(from_steps(2.0, &[2.0], &[1.0]), 0.0);
        assert_eq!(from_totals(1.0, 1.0, 0.5), 0.0);
        assert_eq!(from_steps(1.0, &[], &[]), 0.0);
    }
}
