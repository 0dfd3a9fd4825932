//! Puts the rows recorded by several ranks into one time order before they
//! reach the trace writer. Each rank's rows arrive in order (a rank issues
//! one call at a time), but the ranks' batches overlap in time; written as
//! they come, they would leave the record unsorted. A row is released once
//! every rank still running has sent a row at least as late, so what is
//! written is final and in order.

use arrow_array::RecordBatch;
use iorepro_format::{Events, TraceResult, TraceWriter};

/// Held rows beyond this are written anyway (a rank that stays silent for
/// long must not make the others' rows pile up); the writer then starts a
/// new segment for any later row that reaches back, and readers still merge
/// the record in time order.
const MAX_HELD_ROWS: usize = 1 << 20;

#[derive(Default)]
pub struct RankMerge {
    held: Vec<Vec<RecordBatch>>,
    /// Latest `ts` each rank has sent; `None` while it has sent nothing.
    latest: Vec<Option<i64>>,
    running: Vec<bool>,
    held_rows: usize,
}

impl RankMerge {
    pub fn join(&mut self, slot: usize) {
        if self.held.len() <= slot {
            self.held.resize_with(slot + 1, Vec::new);
            self.latest.resize(slot + 1, None);
            self.running.resize(slot + 1, false);
        }
        self.running[slot] = true;
    }

    pub fn rows(
        &mut self,
        slot: usize,
        batch: RecordBatch,
        w: &mut TraceWriter,
    ) -> TraceResult<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.join(slot);
        let ev = Events::new(batch.clone());
        let ts = ev.ts().values();
        debug_assert!(ts.windows(2).all(|p| p[0] <= p[1]));
        let last = ts[ts.len() - 1];
        self.latest[slot] = Some(self.latest[slot].map_or(last, |l| l.max(last)));
        self.held_rows += batch.num_rows();
        self.held[slot].push(batch);
        self.release(w)
    }

    pub fn leave(&mut self, slot: usize, w: &mut TraceWriter) -> TraceResult<()> {
        self.join(slot);
        self.running[slot] = false;
        self.release(w)
    }

    /// Writes whatever is still held (call once every rank has left).
    pub fn finish(&mut self, w: &mut TraceWriter) -> TraceResult<()> {
        self.release_up_to(i64::MAX, w)
    }

    fn release(&mut self, w: &mut TraceWriter) -> TraceResult<()> {
        let mark = if self.held_rows > MAX_HELD_ROWS {
            i64::MAX
        } else {
            (0..self.running.len())
                .filter(|&s| self.running[s])
                .map(|s| self.latest[s].unwrap_or(i64::MIN))
                .min()
                .unwrap_or(i64::MAX)
        };
        self.release_up_to(mark, w)
    }

    /// Writes every held row with `ts <= mark`, all ranks' together.
    fn release_up_to(&mut self, mark: i64, w: &mut TraceWriter) -> TraceResult<()> {
        let mut out = Vec::new();
        for batches in &mut self.held {
            let mut keep = Vec::new();
            for b in batches.drain(..) {
                let n = Events::new(b.clone())
                    .ts()
                    .values()
                    .partition_point(|&t| t <= mark);
                if n > 0 {
                    out.push(b.slice(0, n));
                }
                if n < b.num_rows() {
                    keep.push(b.slice(n, b.num_rows() - n));
                }
            }
            *batches = keep;
        }
        self.held_rows -= out.iter().map(|b| b.num_rows()).sum::<usize>();
        w.write_merged(&out)
    }
}
