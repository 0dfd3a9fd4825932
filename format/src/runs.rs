//! Runs: one row standing for `calls` back-to-back reads (or writes) of one
//! thread on one descriptor, each moving `size / calls` bytes at consecutive
//! offsets (see [`COL_CALLS`](crate::schema::COL_CALLS)). Every
//! consumer that needs calls rather than rows (counts, size histograms, the
//! replayer, fio export) expands a row here, so all of them agree.
//!
//! Offsets, sizes and return values expand exactly. Each call's duration is
//! the run's summed `dur_ns` shared out evenly (their sum is exact), and the
//! calls' starts are spread evenly from the run's start to the last call's
//! start, which ends the run's `span_ns`.

use arrow_array::{Array, Int64Array};

/// How many calls row `row` stands for, from the `calls` column: at least 1
/// (null, as in traces written before runs or a projection without the
/// column, means 1).
#[inline(always)]
pub fn calls_in(calls: &Int64Array, row: usize) -> i64 {
    if calls.is_valid(row) {
        calls.value(row).max(1)
    } else {
        1
    }
}

/// How long row `row` lasted, from its start to the end of its last call:
/// a run's `span_ns`, a single call's `dur_ns`.
#[inline(always)]
pub fn span_in(span: &Int64Array, dur: &[i64], row: usize) -> i64 {
    if span.is_valid(row) {
        span.value(row)
    } else {
        dur[row]
    }
}

/// A batch's `calls` column as its rows read it ([`calls_in`]), with the
/// batch's commonest case found once: where no row is a run (the column all
/// null), a row's count is 1 without a look at the null mask.
#[derive(Debug, Clone, Copy)]
pub struct CallsOf<'a>(Option<&'a Int64Array>);

impl<'a> CallsOf<'a> {
    pub fn new(calls: &'a Int64Array) -> Self {
        CallsOf((calls.null_count() < calls.len()).then_some(calls))
    }

    #[inline(always)]
    pub fn at(self, row: usize) -> i64 {
        match self.0 {
            Some(calls) => calls_in(calls, row),
            None => 1,
        }
    }
}

/// A batch's `span_ns` and `dur_ns` columns as its rows read them
/// ([`span_in`]): where no row is a run, a row's span is its `dur_ns`.
#[derive(Debug, Clone, Copy)]
pub struct SpanOf<'a> {
    span: Option<&'a Int64Array>,
    dur: &'a [i64],
}

impl<'a> SpanOf<'a> {
    pub fn new(span: &'a Int64Array, dur: &'a [i64]) -> Self {
        SpanOf {
            span: (span.null_count() < span.len()).then_some(span),
            dur,
        }
    }

    #[inline(always)]
    pub fn at(self, row: usize) -> i64 {
        match self.span {
            Some(span) => span_in(span, self.dur, row),
            None => self.dur[row],
        }
    }
}

/// One call of a row (the row itself when it is not a run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub ts_ns: i64,
    pub dur_ns: i64,
    pub offset: Option<i64>,
    pub size: Option<i64>,
    pub ret: i64,
}

/// What expanding a row needs (a row of a batch: `Run::of`, beside
/// [`Events`](crate::columns::Events)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub ts_ns: i64,
    pub dur_ns: i64,
    pub span_ns: i64,
    pub calls: i64,
    pub offset: Option<i64>,
    pub size: Option<i64>,
    pub ret: i64,
}

impl Run {
    /// Bytes each call asked for.
    pub fn call_size(&self) -> Option<i64> {
        self.size.map(|s| s / self.calls.max(1))
    }

    /// The end of the row's last call.
    pub fn end_ns(&self) -> i64 {
        self.ts_ns + self.span_ns.max(self.dur_ns).max(0)
    }

    /// The calls, in order.
    pub fn calls(&self) -> impl Iterator<Item = Call> + '_ {
        let n = self.calls.max(1);
        let dur_each = self.dur_ns / n;
        let dur_extra = self.dur_ns % n;
        let size_each = self.call_size();
        let ret_each = if n > 1 { self.ret / n } else { self.ret };
        // The last call starts so that it ends where the run does.
        let last_start = self.ts_ns + (self.span_ns - dur_each).max(0);
        (0..n).map(move |i| Call {
            ts_ns: if n > 1 {
                self.ts_ns
                    + ((last_start - self.ts_ns) as i128 * i as i128 / (n - 1) as i128) as i64
            } else {
                self.ts_ns
            },
            dur_ns: dur_each + (i < dur_extra) as i64,
            offset: match (self.offset, size_each) {
                (Some(o), Some(s)) if n > 1 => Some(o + i * s),
                (o, _) => o,
            },
            size: size_each,
            ret: ret_each,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_expands_exactly() {
        let run = Run {
            ts_ns: 1_000,
            dur_ns: 10,
            span_ns: 100,
            calls: 4,
            offset: Some(8192),
            size: Some(4 * 4096),
            ret: 4 * 4096,
        };
        let calls: Vec<Call> = run.calls().collect();
        assert_eq!(calls.len(), 4);
        let offsets: Vec<i64> = calls.iter().map(|c| c.offset.unwrap()).collect();
        assert_eq!(offsets, [8192, 12288, 16384, 20480]);
        assert!(calls.iter().all(|c| c.size == Some(4096) && c.ret == 4096));
        assert_eq!(calls.iter().map(|c| c.dur_ns).sum::<i64>(), 10);
        assert_eq!(calls[0].ts_ns, 1_000);
        let last = calls[3];
        assert_eq!(
            last.ts_ns + last.dur_ns,
            1_100,
            "the run ends with its last call"
        );
        assert!(calls.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    }

    #[test]
    fn a_single_call_is_itself() {
        let one = Run {
            ts_ns: 5,
            dur_ns: 7,
            span_ns: 7,
            calls: 1,
            offset: None,
            size: Some(3),
            ret: -2,
        };
        let calls: Vec<Call> = one.calls().collect();
        assert_eq!(
            calls,
            [Call {
                ts_ns: 5,
                dur_ns: 7,
                offset: None,
                size: Some(3),
                ret: -2
            }]
        );
    }
}
