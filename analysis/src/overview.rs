//! The shape of a trace over time: how long it ran, the bytes it moved, its
//! bandwidth per window and peaks, and its phases. This is what `phases`,
//! `plot` and `compare` need, read from six columns; `summary` computes the
//! same from its own fuller pass, and `phases` counts the files' roles in
//! its pass (the job's start-up ends at its first data call). All run the trace through
//! [`iorepro_format::scan`]: row groups tallied on every core, merged in time
//! order.

use serde::Serialize;

use crate::activity::Activity;
use crate::by_op::by_op;
use crate::part_counters::{Depth, Tally, PID_WHERE_NO_RANK};
use crate::phases::{self, Phase};
use crate::roles::{FileRoles, Hot, RolesBuilder, ROLE_COLUMNS};
use crate::timeline::{Timeline, BASE_WINDOW_NS};
use iorepro_format::error::TraceResult;
use iorepro_format::reader::TraceReader;
use iorepro_format::runs::CallsOf;
use iorepro_format::scan::{scan, scan_sparing, Fold, ScanBatch};
use iorepro_format::schema::{Op, COL_RANK, COL_TS};

/// What a trace did over time.
#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    pub events: u64,
    /// From the first call's start to the last call's end.
    pub duration_s: f64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Over 1 s windows aligned to the first event.
    pub peak_read_gib_s: f64,
    pub peak_write_gib_s: f64,
    /// Over 100 ms windows.
    pub peak_read_gib_s_100ms: f64,
    pub peak_write_gib_s_100ms: f64,
    /// Name-space calls (stat, open, access, mkdir, rmdir, unlink, rename,
    /// link, symlink, listings; not close): what a metadata server serves.
    pub metadata_calls: u64,
    /// Of those, per second over the whole trace ...
    pub metadata_calls_per_s: f64,
    /// ... and in its busiest 1 s window (aligned to the first call).
    pub peak_metadata_calls_per_s: f64,
    pub phases: Vec<Phase>,
    /// Of the bytes read, those the storage served (see
    /// `iorepro_format::schema::COL_STORAGE_BYTES`); absent where the trace
    /// does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_read_bytes: Option<u64>,
    /// Of the bytes written, those the job's own writes and syncs sent to
    /// the device; absent where the trace does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_write_bytes: Option<u64>,
    /// Of the bytes written, those the kernel wrote back to the device later,
    /// outside the job's calls (`writeback` rows); absent where the capture
    /// did not follow write-back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_written_back_bytes: Option<u64>,
    /// Bytes per 100 ms window, for plots.
    #[serde(skip)]
    pub timeline: Timeline,
}

impl Overview {
    /// One parallel pass over the columns the overview needs.
    pub fn compute(reader: &TraceReader) -> TraceResult<Overview> {
        Self::compute_with_window(reader, BASE_WINDOW_NS)
    }

    /// The same with a timeline of `window_ns` windows (a divisor of 100 ms,
    /// so the peaks stay those of 100 ms and 1 s windows), for plots of
    /// short traces.
    pub fn compute_with_window(reader: &TraceReader, window_ns: i64) -> TraceResult<Overview> {
        let mut t = tally(reader, Depth::Overview, window_ns)?;
        Ok(Overview::from_tally(&mut t))
    }

    /// One parallel pass over the columns the overview and the files'
    /// roles need, with the job's start-up folded into one phase (see
    /// [`phases::fold_startup`]): what `phases` reports.
    pub fn compute_with_startup(reader: &TraceReader) -> TraceResult<Overview> {
        let (mut t, roles) = tally_with_roles(reader, Depth::Overview, BASE_WINDOW_NS)?;
        Ok(Overview::with_startup(&mut t, &roles))
    }

    /// The overview of a merged tally, its phases as the job ran them (see
    /// [`phases::as_the_job_ran`]).
    pub fn with_startup(t: &mut Tally, roles: &FileRoles) -> Overview {
        let mut o = Overview::from_tally(t);
        o.phases = phases::as_the_job_ran(
            std::mem::take(&mut o.phases),
            t.activity.reads.runs(),
            roles.first_data_ns(),
            &roles.checkpoints_named(),
        );
        o
    }

    /// The overview of a merged tally (it pads the tally's timeline to the
    /// trace's end and finishes its activity).
    pub fn from_tally(t: &mut Tally) -> Overview {
        t.activity.finish();
        let phases = phases::detect(&t.activity);
        let (first, end) = if t.activity.is_empty() {
            (t.timeline.origin_ns, t.timeline.origin_ns)
        } else {
            (t.activity.first_ns, t.activity.end_ns)
        };
        if t.events > 0 {
            t.timeline.close(end);
        }
        let windows_in = |ns: i64| (ns / t.timeline.window_ns).max(1) as usize;
        let (peak_read_100ms, peak_write_100ms) =
            t.timeline.peaks_gib_s(windows_in(BASE_WINDOW_NS));
        let (peak_read, peak_write) = t.timeline.peaks_gib_s(windows_in(1_000_000_000));
        let (metadata_calls, peak_metadata) = metadata_rate(&t.activity, first);
        let duration_ns = (end - first).max(0);
        Overview {
            events: t.events,
            duration_s: duration_ns as f64 / 1e9,
            read_bytes: t.op(Op::Read).bytes,
            write_bytes: t.op(Op::Write).bytes,
            peak_read_gib_s: peak_read,
            peak_write_gib_s: peak_write,
            peak_read_gib_s_100ms: peak_read_100ms,
            peak_write_gib_s_100ms: peak_write_100ms,
            metadata_calls,
            metadata_calls_per_s: if duration_ns > 0 {
                metadata_calls as f64 * 1e9 / duration_ns as f64
            } else {
                0.0
            },
            peak_metadata_calls_per_s: peak_metadata,
            phases,
            storage_read_bytes: t.activity.storage_read_total(),
            storage_write_bytes: t.activity.storage_write_total(),
            storage_written_back_bytes: t.activity.written_back_total(),
            timeline: t.timeline.clone(),
        }
    }
}

/// Name-space calls in all, and the most that started in one second (1 s
/// windows from `origin`). Runs of such calls last at most 10 ms, so
/// counting a run in the window it starts in moves at most 10 ms of calls
/// across an edge.
fn metadata_rate(activity: &Activity, origin: i64) -> (u64, f64) {
    let mut total = 0u64;
    let (mut window, mut in_window, mut peak) = (i64::MIN, 0u64, 0u64);
    for r in activity.metadata.runs() {
        total += r.bytes;
        let w = (r.start - origin).max(0) / 1_000_000_000;
        if w != window {
            (window, in_window) = (w, 0);
        }
        in_window += r.bytes;
        peak = peak.max(in_window);
    }
    (total, peak as f64)
}

/// The first and last `ts` of the trace: from the segment footers, or (a
/// foreign trace without statistics) from a scan of the `ts` column.
pub fn span_ns(reader: &TraceReader) -> TraceResult<(i64, i64)> {
    if let Some(span) = reader.ts_span_ns() {
        return Ok(span);
    }
    struct Span(i64, i64);
    impl Fold for Span {
        fn add(&mut self, b: &ScanBatch) {
            for &t in b.ts() {
                self.0 = self.0.min(t);
                self.1 = self.1.max(t);
            }
        }
    }
    let mut span = Span(i64::MAX, i64::MIN);
    scan(
        reader,
        &[COL_TS],
        || Span(i64::MAX, i64::MIN),
        |p| {
            span.0 = span.0.min(p.0);
            span.1 = span.1.max(p.1);
        },
    )?;
    Ok(if span.0 > span.1 {
        (0, 0)
    } else {
        (span.0, span.1)
    })
}

/// How many distinct ranks the rows name (0 when none names one), from the
/// `rank` column alone.
pub fn rank_count(reader: &TraceReader) -> TraceResult<usize> {
    #[derive(Default)]
    struct Ranks(std::collections::BTreeSet<i32>);
    impl Fold for Ranks {
        fn add(&mut self, b: &ScanBatch) {
            self.0.extend(b.rank().iter().flatten());
        }
    }
    let mut all = Ranks::default();
    scan(reader, &[COL_RANK], Ranks::default, |p| all.0.extend(p.0))?;
    Ok(all.0.len())
}

/// Every row group of the trace tallied at `depth` on every core, merged in
/// time order; timeline windows of `window_ns` aligned to the first call.
pub fn tally(reader: &TraceReader, depth: Depth, window_ns: i64) -> TraceResult<Tally> {
    let (origin, _) = span_ns(reader)?;
    let mut total = Tally::new(depth, origin, window_ns);
    scan_sparing(
        reader,
        &depth.columns_for(reader),
        &[PID_WHERE_NO_RANK],
        || Tally::new(depth, origin, window_ns),
        |part| total.merge(part),
    )?;
    Ok(total)
}

/// What one row group folds into when the roles are counted with the tally.
struct WithRoles {
    tally: Tally,
    roles: RolesBuilder,
}

impl Fold for WithRoles {
    fn reserve(&mut self, rows: usize) {
        self.tally.reserve(rows);
    }

    /// One loop over the rows for both: the op and calls of a row are
    /// read once, and the row goes through one branch on its op (see
    /// [`by_op!`]). A tally that counts files counts every row's calls,
    /// reads and failures per file for the roles too (handed over in
    /// [`Fold::seal`]): the roles then see only the rows that are more than
    /// that, and a row touches one file's counters, not two.
    fn add(&mut self, b: &ScanBatch) {
        if b.is_empty() {
            return;
        }
        let (tally, roles) = (self.tally.begin(b), self.roles.begin(b));
        let (keys, table) = b.ops();
        let calls = CallsOf::new(b.calls());
        if self.tally.counts_files() {
            for i in 0..b.len() {
                let op = table[keys[i] as usize];
                // A run of calls counts as its calls (see format::runs).
                let n = calls.at(i) as u64;
                by_op!(op, |o| {
                    self.tally.row(&tally, i, o, n);
                    self.roles.loud_row_at(&roles, i, o, n);
                });
            }
        } else {
            for i in 0..b.len() {
                let op = table[keys[i] as usize];
                let n = calls.at(i) as u64;
                by_op!(op, |o| {
                    self.tally.row(&tally, i, o, n);
                    self.roles.row_at(&roles, i, o, n);
                });
            }
        }
    }

    fn seal(&mut self) {
        self.tally.seal();
        if self.tally.counts_files() {
            for (path, c) in self.tally.file_counts() {
                let counts = Hot {
                    calls: c.events,
                    read_bytes: c.read + c.faulted,
                    first_read_ns: c.first_read_ns,
                    found: c.failed < c.events,
                };
                self.roles.take_counts(path, counts);
            }
        }
        self.roles.seal();
    }
}

/// [`tally`] and the files' roles ([`FileRoles::compute`]) in one pass
/// over the trace: the columns of both decoded once.
pub fn tally_with_roles(
    reader: &TraceReader,
    depth: Depth,
    window_ns: i64,
) -> TraceResult<(Tally, FileRoles)> {
    let (origin, _) = span_ns(reader)?;
    let part = || WithRoles {
        tally: Tally::new(depth, origin, window_ns),
        roles: RolesBuilder::default(),
    };
    let mut columns: Vec<&str> = depth.columns_for(reader);
    columns.extend(ROLE_COLUMNS);
    let mut whole = part();
    scan_sparing(reader, &columns, &[PID_WHERE_NO_RANK], part, |p| {
        whole.tally.merge(p.tally);
        whole.roles.merge(p.roles);
    })?;
    Ok((whole.tally, whole.roles.finish_with_mounts(reader)))
}
