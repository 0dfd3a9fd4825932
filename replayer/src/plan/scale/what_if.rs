//! The what-if of `--plan-only --bandwidth B`: each epoch's time and AU at
//! N ranks on storage of that speed, from the same pacing the replay keeps
//! (see [`crate::plan::timing`]), without touching any storage.
//!
//! An epoch is the reading between two checkpoints, as in the report. At N
//! ranks sharing the traced reads, a rank makes 1/k of its traced rank's
//! steps (k = N/R), each with the traced compute: the epoch's compute per
//! rank is its traced time over k, taking the traced storage to have kept
//! the job fed (a trace does not show compute apart from waiting; where the
//! traced job stalled, its stalls count as compute here, and the forecast
//! errs towards "fed"). The loader overlaps reading with compute, all but
//! the last step: once the storage has given a rank its last batch, the
//! rank computes on it with nothing left to read. So an epoch takes the
//! longer of its compute and the time the storage needs for its bytes
//! followed by one step's compute L (the ranks' usual pause between
//! bursts of reading in the trace; with the global batch held, its share
//! at N): T = max(C, D / B + L), and the whole epoch's AU is C / T. It
//! falls below a threshold `a` once B < D / (C / a - L).
//!
//! MLPerf Storage leaves each rank's first step out of both sides of its AU
//! (see [`super::au`]): with s = C / L steps, the first takes its
//! batch's reading, D / s / B, then its compute L, so AU = (C - L) / (T -
//! D / (s B) - L), at most 100 %. The bandwidth for the threshold is the
//! whole epoch's: MLPerf's AU reaches it there or a little below.

use serde::Serialize;

use iorepro_analysis::phases::{Phase, PhaseKind};

#[derive(Debug, Clone, Serialize)]
pub struct EpochForecast {
    /// The trace's phases it spans (first, last).
    pub phases: (usize, usize),
    /// The traced job's time for it.
    pub traced_s: f64,
    /// Compute per rank at N.
    pub compute_s: f64,
    /// Of that, the last step's: it follows the epoch's last read.
    pub last_step_s: f64,
    /// Dataset bytes all N ranks read in it.
    pub read_bytes: u64,
    /// Of those, the bytes that reach the storage (see [`super::cache`]).
    pub storage_read_bytes: u64,
    /// Its time at N on storage of the given bandwidth, and the AU as
    /// MLPerf Storage computes it.
    pub seconds: f64,
    pub au_percent: f64,
    /// Compute over the whole epoch's time, the first step counted.
    pub au_whole_epoch_percent: f64,
    /// The bandwidth below which its AU drops under the threshold (GiB/s).
    pub au_threshold_gib_s: f64,
}

/// The epochs of a replay: the stretches of reading (load and read
/// phases, those `replayed`) between checkpoints, as (first, last) phase.
/// One epoch each for a job that saves at each epoch's end; the steps
/// between two saves for one that saves every K steps. A stretch without
/// reads between its last reading and its save (idle, or name-space calls
/// alone) is the stretch's: its last steps, computed on batches its loader
/// read ahead (a DataLoader whose workers prefetched all of a short
/// epoch), which the job's epoch holds.
pub fn stretches(phases: &[Phase], replayed: &[bool]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, usize)> = None;
    for (i, p) in phases.iter().enumerate() {
        let on = replayed.get(i).copied().unwrap_or(true);
        match p.kind {
            PhaseKind::Load | PhaseKind::Read if on => {
                open = Some(open.map_or((i, i), |(a, _)| (a, i)));
            }
            PhaseKind::Checkpoint => {
                if let Some((a, b)) = open.take() {
                    let no_reads = phases[b + 1..i]
                        .iter()
                        .all(|q| matches!(q.kind, PhaseKind::Idle | PhaseKind::Metadata));
                    out.push((a, if no_reads { i - 1 } else { b }));
                }
            }
            _ => {}
        }
    }
    out.extend(open);
    out
}

/// Each epoch at `bandwidth` (bytes/s), given the dataset bytes read at N
/// in each phase and those of them that reach the storage (`stored`), the
/// speed-up `k` of a rank's clock in read phases and a step's compute at N
/// (`last_step_s`).
pub fn epochs(
    phases: &[Phase],
    read_at_n: &[u64],
    stored: &[u64],
    k: f64,
    last_step_s: f64,
    bandwidth: f64,
    au_threshold: f64,
) -> Vec<EpochForecast> {
    stretches(phases, &[])
        .into_iter()
        // A stretch that reads none of the dataset at N is no epoch.
        .filter(|&(a, b)| read_at_n[a..=b].iter().sum::<u64>() > 0)
        .map(|(a, b)| {
            let traced_s: f64 = phases[a..=b]
                .iter()
                .map(|p| (p.end_s - p.start_s).max(0.0))
                .sum();
            let read_bytes: u64 = read_at_n[a..=b].iter().sum();
            let storage_read_bytes: u64 = stored[a..=b].iter().sum();
            let compute_s = traced_s / k.max(1.0);
            let last_step_s = last_step_s.clamp(0.0, compute_s);
            let io_s = storage_read_bytes as f64 / bandwidth;
            let seconds = compute_s.max(io_s + last_step_s);
            let whole = if seconds > 0.0 {
                100.0 * compute_s / seconds
            } else {
                100.0
            };
            EpochForecast {
                phases: (a, b),
                traced_s,
                compute_s,
                last_step_s,
                read_bytes,
                storage_read_bytes,
                seconds,
                au_percent: mlperf_au(compute_s, last_step_s, io_s, seconds).unwrap_or(whole),
                au_whole_epoch_percent: whole,
                // D / B + L = C / a: the reading may take C / a - L.
                au_threshold_gib_s: if compute_s > 0.0 {
                    let reading_s =
                        (compute_s * 100.0 / au_threshold - last_step_s).max(f64::MIN_POSITIVE);
                    storage_read_bytes as f64 / reading_s / iorepro_format::units::GIB
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// MLPerf Storage's AU of an epoch of `seconds` with `compute_s` of
/// compute in steps of `step_s`, its reading taking `io_s` in all: the
/// first step (its batch's reading, then its compute) out of both sides,
/// at most 100 %. `None` without at least two steps.
fn mlperf_au(compute_s: f64, step_s: f64, io_s: f64, seconds: f64) -> Option<f64> {
    if step_s <= 0.0 || compute_s < 2.0 * step_s {
        return None;
    }
    let steps = compute_s / step_s;
    let first_step_s = io_s / steps + step_s;
    let au = super::au::from_totals(seconds, first_step_s, compute_s - step_s);
    Some(if au > 0.0 { au.min(100.0) } else { 100.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(kind: PhaseKind, start_s: f64, end_s: f64) -> Phase {
        Phase {
            kind,
            start_s,
            end_s,
            read_bytes: 0,
            write_bytes: 0,
            max_writers: 0,
            metadata_calls: 0,
            storage_read_bytes: None,
            start_unix_ns: 0,
            end_unix_ns: 0,
        }
    }

    #[test]
    fn an_epoch_takes_the_longer_of_compute_and_reading() {
        let phases = vec![
            phase(PhaseKind::Read, 0.0, 2.0),
            phase(PhaseKind::Checkpoint, 2.0, 2.1),
            phase(PhaseKind::Read, 2.1, 4.1),
        ];
        let mib = iorepro_format::units::MIB_BYTES;
        let read = [128 * mib, 0, 128 * mib];
        // At twice the traced ranks, 1 s of compute per epoch; 128 MiB at
        // 80 MiB/s takes 1.6 s.
        let e = epochs(&phases, &read, &read, 2.0, 0.0, 80.0 * mib as f64, 90.0);
        assert_eq!(e.len(), 2);
        assert!((e[0].compute_s - 1.0).abs() < 1e-9);
        assert!((e[0].seconds - 1.6).abs() < 1e-9);
        assert!((e[0].au_percent - 62.5).abs() < 1e-9);
        // 90 % AU needs 128 MiB in 1/0.9 s: 115.2 MiB/s.
        assert!((e[0].au_threshold_gib_s * 1024.0 - 115.2).abs() < 1e-6);
        let fast = epochs(&phases, &read, &read, 2.0, 0.0, 1e12, 90.0);
        assert!((fast[1].seconds - 1.0).abs() < 1e-9 && fast[1].au_percent == 100.0);
    }

    #[test]
    fn the_last_steps_compute_follows_the_reading() {
        let phases = vec![
            phase(PhaseKind::Read, 0.0, 2.0),
            phase(PhaseKind::Checkpoint, 2.0, 2.1),
        ];
        let mib = iorepro_format::units::MIB_BYTES;
        let read = [64 * mib, 0];
        // At twice the ranks a rank computes 1 s an epoch, 0.2 s a step.
        let e = epochs(&phases, &read, &read, 2.0, 0.2, 80.0 * mib as f64, 90.0);
        // 64 MiB at 80 MiB/s is 0.8 s, then the last step: 1.0 s.
        assert!((e[0].seconds - 1.0).abs() < 1e-9, "{}", e[0].seconds);
        // Slower storage: 1.6 s of reading and 0.2 s after it.
        let slow = epochs(&phases, &read, &read, 2.0, 0.2, 40.0 * mib as f64, 90.0);
        assert!((slow[0].seconds - 1.8).abs() < 1e-9);
        assert!((slow[0].au_whole_epoch_percent - 100.0 / 1.8).abs() < 1e-9);
        // MLPerf's: 5 steps of 0.2 s, the first reading 0.32 s then
        // computing; 0.8 s of compute over 1.8 - 0.52 s.
        assert!((slow[0].au_percent - 100.0 * 0.8 / 1.28).abs() < 1e-9);
        // 90 % AU: the reading may take 1 / 0.9 - 0.2 s.
        let need = 64.0 / (1.0 / 0.9 - 0.2);
        assert!((slow[0].au_threshold_gib_s * 1024.0 - need).abs() < 1e-6);
        // Fast storage: compute bounds it.
        let fast = epochs(&phases, &read, &read, 2.0, 0.2, 1e12, 90.0);
        assert!((fast[0].seconds - 1.0).abs() < 1e-9);
    }
}
