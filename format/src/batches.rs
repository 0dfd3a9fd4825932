//! A trace's rows as batches: [`SegmentBatches`] decodes one segment,
//! normalised to the trace schema, and [`MergeByTs`] k-way merges the
//! batches of segments that overlap in time into one stream in `ts` order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_select::interleave::interleave_record_batch;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::file::metadata::ParquetMetaData;

use crate::canonical_columns::{normalise, path_as_dictionary, plan_columns};
use crate::columns::Events;
use crate::error::{TraceError, TraceResult};
use crate::schema::trace_schema;
use crate::segment_file::{guard, SegmentFile};

/// Rows per batch handed to consumers.
pub const READ_BATCH_ROWS: usize = 64 * 1024;

/// Which columns a read decodes, and how it hands `path` over.
#[derive(Debug, Clone, Default)]
pub struct ReadShape {
    /// The canonical columns decoded (all when `None`); the others come
    /// as nulls.
    pub projection: Option<Vec<usize>>,
    /// `path` as a dictionary (see [`crate::TraceReader::with_path_keys`]).
    pub path_keys: bool,
}

/// Whether canonical column `i` (at `at` in the file) is null in every row
/// of the segment, by its footer: an optional column the capture never
/// filled (`path2`, `via`, a request's columns in a trace of files). A
/// projected read makes its nulls rather than decode them, which costs as
/// much as values (for a dictionary column, a hash of every empty slot).
fn all_null(parquet: &ParquetMetaData, at: Option<usize>, i: usize) -> bool {
    let Some(at) = at else { return false };
    trace_schema().field(i).is_nullable()
        && parquet.row_groups().iter().all(|rg| {
            let nulls = rg.column(at).statistics().and_then(|s| s.null_count_opt());
            nulls == Some(rg.num_rows() as u64)
        })
}

/// Batches of one segment, normalised.
pub struct SegmentBatches {
    path: PathBuf,
    /// None once the decoder failed: a reader that panicked is not read again.
    inner: Option<ParquetRecordBatchReader>,
    shape: ReadShape,
}

impl SegmentBatches {
    pub fn open(path: &Path, mut shape: ReadShape) -> TraceResult<Self> {
        let file = SegmentFile::open(path)?;
        let inner = guard(path, || {
            let plain = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
                .map_err(|e| TraceError::parquet(path, e))?;
            let positions = plan_columns(path, plain.schema())?;
            if let Some(p) = &mut shape.projection {
                let parquet = plain.metadata();
                p.retain(|&i| !all_null(parquet, positions[i], i));
            }
            let hinted = shape
                .path_keys
                .then(|| path_as_dictionary(plain.schema()))
                .flatten();
            let meta = match hinted {
                Some(hinted) => ArrowReaderMetadata::try_new(
                    plain.metadata().clone(),
                    ArrowReaderOptions::new().with_schema(hinted),
                )
                .unwrap_or(plain),
                None => plain,
            };
            let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta);
            let wanted: Vec<usize> = match &shape.projection {
                Some(p) => p.iter().filter_map(|&i| positions[i]).collect(),
                None => positions.into_iter().flatten().collect(),
            };
            let mask = ProjectionMask::roots(builder.parquet_schema(), wanted);
            builder
                .with_projection(mask)
                .with_batch_size(READ_BATCH_ROWS)
                .build()
                .map_err(|e| TraceError::parquet(path, e))
        })?;
        Ok(SegmentBatches {
            path: path.to_path_buf(),
            inner: Some(inner),
            shape,
        })
    }
}

impl Iterator for SegmentBatches {
    type Item = TraceResult<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let inner = self.inner.as_mut()?;
        let decoded = guard(&self.path, || {
            inner
                .next()
                .transpose()
                .map_err(|e| TraceError::parquet(&self.path, e))
        });
        let batch = match decoded {
            Ok(b) => b?,
            Err(e) => {
                self.inner = None;
                return Some(Err(e));
            }
        };
        Some(normalise(
            &self.path,
            &batch,
            self.shape.projection.as_deref(),
            self.shape.path_keys,
        ))
    }
}

/// Segments one after another, each opened only when the previous one is done.
pub(crate) struct SequentialBatches {
    pending: std::vec::IntoIter<PathBuf>,
    current: Option<SegmentBatches>,
    shape: ReadShape,
}

impl SequentialBatches {
    pub(crate) fn new(paths: Vec<PathBuf>, shape: ReadShape) -> Self {
        SequentialBatches {
            pending: paths.into_iter(),
            current: None,
            shape,
        }
    }
}

impl Iterator for SequentialBatches {
    type Item = TraceResult<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(cur) = &mut self.current {
                match cur.next() {
                    Some(item) => return Some(item),
                    None => self.current = None,
                }
            }
            let path = self.pending.next()?;
            match SegmentBatches::open(&path, self.shape.clone()) {
                Ok(s) => self.current = Some(s),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

type BatchStream = Box<dyn Iterator<Item = TraceResult<RecordBatch>> + Send>;

/// K-way merge of time-ordered streams: holds one batch per stream, so memory
/// is bounded by the number of streams, not the trace size.
pub struct MergeByTs {
    streams: Vec<BatchStream>,
    current: Vec<Option<(RecordBatch, usize)>>,
    heap: BinaryHeap<Reverse<(i64, usize)>>,
    started: bool,
    failed: bool,
}

impl MergeByTs {
    pub fn new(streams: Vec<BatchStream>) -> Self {
        let n = streams.len();
        MergeByTs {
            streams,
            current: vec![None; n],
            heap: BinaryHeap::new(),
            started: false,
            failed: false,
        }
    }

    /// Loads the next non-empty batch of stream `s` and queues its first row.
    fn refill(&mut self, s: usize) -> TraceResult<()> {
        loop {
            match self.streams[s].next() {
                None => {
                    self.current[s] = None;
                    return Ok(());
                }
                Some(Err(e)) => return Err(e),
                Some(Ok(b)) if b.num_rows() == 0 => continue,
                Some(Ok(b)) => {
                    let ts = Events::new(b.clone()).ts().value(0);
                    self.current[s] = Some((b, 0));
                    self.heap.push(Reverse((ts, s)));
                    return Ok(());
                }
            }
        }
    }
}

impl Iterator for MergeByTs {
    type Item = TraceResult<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if !self.started {
            self.started = true;
            for s in 0..self.streams.len() {
                if let Err(e) = self.refill(s) {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        // Indices into the batches held while this output batch is built; a
        // stream's batch is kept alive in `held` even after it is refilled.
        let mut held: Vec<RecordBatch> = Vec::new();
        let mut held_of: Vec<Option<usize>> = vec![None; self.streams.len()];
        let mut picks: Vec<(usize, usize)> = Vec::with_capacity(READ_BATCH_ROWS);
        while picks.len() < READ_BATCH_ROWS {
            let Some(Reverse((_, s))) = self.heap.pop() else {
                break;
            };
            let (batch, row) = self.current[s].clone().expect("queued stream has a batch");
            let h = match held_of[s] {
                Some(h)
                    if held[h].num_rows() == batch.num_rows()
                        && Arc::ptr_eq(held[h].column(0), batch.column(0)) =>
                {
                    h
                }
                _ => {
                    held.push(batch.clone());
                    held_of[s] = Some(held.len() - 1);
                    held.len() - 1
                }
            };
            picks.push((h, row));
            if row + 1 < batch.num_rows() {
                let ts = Events::new(batch.clone()).ts().value(row + 1);
                self.current[s] = Some((batch, row + 1));
                self.heap.push(Reverse((ts, s)));
            } else if let Err(e) = self.refill(s) {
                self.failed = true;
                return Some(Err(e));
            }
        }
        if picks.is_empty() {
            return None;
        }
        let refs: Vec<&RecordBatch> = held.iter().collect();
        Some(
            interleave_record_batch(&refs, &picks)
                .map_err(|e| TraceError::invalid("merge", e.to_string())),
        )
    }
}
