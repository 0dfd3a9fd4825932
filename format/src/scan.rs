//! A trace read in parallel: every row group of every segment is a unit of
//! work, decoded on its own worker thread (one per core) into batches of the
//! requested columns only, and folded there into a partial result; the
//! partials come back to the caller in time order (segments by their first
//! `ts`, row groups in file order) to be merged.
//!
//! This is the path analyses take when they can combine partial results
//! (totals, runs of calls, bytes per window); [`crate::TraceReader::events`]
//! remains the path for a consumer that needs every row in one time order.
//! Columns come in their canonical types as in the reader, with one
//! exception that saves most of the decoding time of a busy trace: `path`
//! is a dictionary (one string per distinct file, keys per row), as the
//! segment stored it (which our writer always does) or made one per batch
//! (a foreign segment that stored paths plainly), so that consumers count
//! per distinct file and look a name up once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{
    new_null_array, Array, ArrayRef, DictionaryArray, Int32Array, Int64Array, RecordBatch,
    StringArray,
};
use arrow_cast::cast;
use arrow_schema::{Field, Schema};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::file::statistics::Statistics;

use crate::canonical_columns::{absent_column, normalise_column, path_as_dictionary, plan_columns};
use crate::error::{TraceError, TraceResult};
use crate::reader::TraceReader;
use crate::schema::{dict_type, idx, trace_schema, Op, COLUMNS, COL_PATH};
use crate::segment_file::{guard, MappedSegment, SegmentFile};

/// Rows per batch of a scan: enough that a batch's fixed costs (a record
/// batch and its schema, the decoders' calls per column, the folds' look-ups
/// of their columns) are spread thin, few enough that the decoder's buffers
/// are reused from the heap rather than mapped afresh. Measured on the
/// analysis bench's trace, summary in turns: at 200 M rows 32 Ki took 2 %
/// less CPU than 8 Ki (4 Ki 2 % more); at 20 M rows 8, 16 and 32 Ki were alike.
const SCAN_BATCH_ROWS: usize = 32 * 1024;

/// One row group of one segment.
struct Unit {
    segment: usize,
    row_group: usize,
}

/// A segment's footer, read once and shared by the workers reading its row groups.
struct SegmentMeta {
    path: PathBuf,
    meta: ArrowReaderMetadata,
    /// Position of each canonical column in the file's schema.
    positions: Vec<Option<usize>>,
}

/// The requested columns of one batch, in their canonical types. Asking for
/// a column that was not requested is a bug and panics.
pub struct ScanBatch {
    batch: RecordBatch,
    /// Position in `batch` of each canonical column, `usize::MAX` when not read.
    at: [usize; COLUMNS.len()],
}

impl ScanBatch {
    pub fn len(&self) -> usize {
        self.batch.num_rows()
    }

    pub fn is_empty(&self) -> bool {
        self.batch.num_rows() == 0
    }

    fn col(&self, i: usize) -> &ArrayRef {
        let at = self.at[i];
        assert!(at != usize::MAX, "column `{}` was not scanned", COLUMNS[i]);
        self.batch.column(at)
    }

    /// Entry times, Unix ns.
    pub fn ts(&self) -> &[i64] {
        self.col(idx::TS)
            .as_primitive::<arrow_array::types::TimestampNanosecondType>()
            .values()
    }

    pub fn dur_ns(&self) -> &[i64] {
        self.col(idx::DUR_NS)
            .as_primitive::<arrow_array::types::Int64Type>()
            .values()
    }

    pub fn pid(&self) -> &[i32] {
        self.col(idx::PID).as_primitive::<Int32Type>().values()
    }

    pub fn rank(&self) -> &Int32Array {
        self.col(idx::RANK).as_primitive()
    }

    pub fn offset(&self) -> &Int64Array {
        self.col(idx::OFFSET).as_primitive()
    }

    pub fn size(&self) -> &Int64Array {
        self.col(idx::SIZE).as_primitive()
    }

    pub fn ret(&self) -> &[i64] {
        self.col(idx::RET)
            .as_primitive::<arrow_array::types::Int64Type>()
            .values()
    }

    /// Calls each row stands for (1 in traces written before runs existed).
    pub fn calls(&self) -> &Int64Array {
        self.col(idx::CALLS).as_primitive()
    }

    /// How long a run lasted; null for a single call.
    pub fn span_ns(&self) -> &Int64Array {
        self.col(idx::SPAN_NS).as_primitive()
    }

    /// Open flags.
    pub fn flags(&self) -> &Int32Array {
        self.col(idx::FLAGS).as_primitive()
    }

    /// The second path of a rename or link; null for other calls.
    pub fn path2(&self) -> &StringArray {
        self.col(idx::PATH2).as_string()
    }

    /// What each row's `path` said before it was anonymized (null where
    /// the name is as captured).
    pub fn path_traits(&self) -> &Int32Array {
        self.col(idx::PATH_TRAITS).as_primitive()
    }

    /// The same for `path2`.
    pub fn path2_traits(&self) -> &Int32Array {
        self.col(idx::PATH2_TRAITS).as_primitive()
    }

    /// The body bytes each request row sent and received (see
    /// [`crate::schema::COL_SENT`]), where the scan read those columns.
    pub fn exchanged(&self) -> Option<(&Int64Array, &Int64Array)> {
        if self.at[idx::SENT] == usize::MAX || self.at[idx::RECEIVED] == usize::MAX {
            return None;
        }
        Some((
            self.col(idx::SENT).as_primitive(),
            self.col(idx::RECEIVED).as_primitive(),
        ))
    }

    /// What the storage served of each row (see
    /// [`crate::schema::COL_STORAGE_BYTES`]), where the scan read that column.
    pub fn storage_bytes(&self) -> Option<&Int64Array> {
        (self.at[idx::STORAGE_BYTES] != usize::MAX)
            .then(|| self.col(idx::STORAGE_BYTES).as_primitive())
    }

    /// The op of every row as (dictionary key per row, op per key): rows cost an index.
    pub fn ops(&self) -> (&[i32], Vec<Op>) {
        let dict = self.col(idx::OP).as_dictionary::<Int32Type>();
        let names: &StringArray = dict.values().as_string();
        let table = (0..names.len())
            .map(|i| Op::parse(names.value(i)))
            .collect();
        (dict.keys().values(), table)
    }

    /// Distinct host names in this batch's dictionary.
    pub fn hosts(&self) -> Vec<&str> {
        let names: &StringArray = self
            .col(idx::HOST)
            .as_dictionary::<Int32Type>()
            .values()
            .as_string();
        (0..names.len())
            .filter(|&i| names.is_valid(i))
            .map(|i| names.value(i))
            .collect()
    }

    /// Keys into one string per distinct file (null: no path).
    pub fn path(&self) -> &DictionaryArray<Int32Type> {
        self.col(idx::PATH).as_dictionary()
    }
}

fn open_meta(path: &Path) -> TraceResult<SegmentMeta> {
    let file = SegmentFile::open(path)?;
    guard(path, || {
        let plain = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
            .map_err(|e| TraceError::parquet(path, e))?;
        let positions = plan_columns(path, plain.schema())?;
        let meta = match path_as_dictionary(plain.schema()) {
            Some(hinted) => ArrowReaderMetadata::try_new(
                plain.metadata().clone(),
                ArrowReaderOptions::new().with_schema(hinted),
            )
            .unwrap_or(plain),
            None => plain,
        };
        Ok(SegmentMeta {
            path: path.to_path_buf(),
            meta,
            positions,
        })
    })
}

/// A column a fold reads only in rows where another column is null (a
/// process id that stands for a missing rank): where a row group's
/// footer says the other has no null, the column is not decoded and comes
/// as nulls.
#[derive(Debug, Clone, Copy)]
pub struct OnlyWhereNull {
    pub column: &'static str,
    pub where_null: &'static str,
}

/// Reads one unit and hands each of its batches to `visit`.
fn read_unit(
    seg: &SegmentMeta,
    row_group: usize,
    wanted: &[usize],
    sparing: &[(usize, usize)],
    visit: &mut dyn FnMut(&ScanBatch),
) -> TraceResult<()> {
    let path = seg.path.as_path();
    let file = MappedSegment::open(path)?;
    let canon = trace_schema();
    // Optional columns the row group holds no value of (a trace without
    // runs has no `span_ns`, most have no `path2`) are not decoded: their
    // nulls cost as much to decode as values.
    let group = seg.meta.metadata().row_group(row_group);
    // Column `i`'s nulls in the row group, where its footer says.
    let nulls =
        |i: usize| seg.positions[i].and_then(|at| group.column(at).statistics()?.null_count_opt());
    let all_null =
        |i: usize| canon.field(i).is_nullable() && nulls(i) == Some(group.num_rows() as u64);
    let spared = |i: usize| {
        sparing
            .iter()
            .any(|&(column, guard)| column == i && nulls(guard) == Some(0))
    };
    // A row group of single calls (every `calls` 1, as in most captures)
    // hands `calls` over as nulls, which mean 1 (see `runs::calls_in`).
    let single_calls = |i: usize| {
        i == idx::CALLS
            && nulls(i) == Some(0)
            && seg.positions[i].is_some_and(|at| {
                matches!(group.column(at).statistics(),
                    Some(Statistics::Int64(v)) if v.min_opt() == Some(&1) && v.max_opt() == Some(&1))
            })
    };
    let empty: Vec<usize> = wanted
        .iter()
        .copied()
        .filter(|&i| all_null(i) || spared(i) || single_calls(i))
        .collect();
    // The null columns of the batches, made once for the unit: the batches
    // but the last have one length, and each fresh one is a zeroed buffer.
    let mut nulls_made: Vec<Option<ArrayRef>> = vec![None; COLUMNS.len()];
    let mut reader = guard(path, || {
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, seg.meta.clone());
        let roots: Vec<usize> = wanted
            .iter()
            .filter(|i| !empty.contains(i))
            .filter_map(|&i| seg.positions[i])
            .collect();
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        builder
            .with_row_groups(vec![row_group])
            .with_projection(mask)
            .with_batch_size(SCAN_BATCH_ROWS)
            .build()
            .map_err(|e| TraceError::parquet(path, e))
    })?;
    loop {
        let Some(batch) = guard(path, || {
            reader
                .next()
                .transpose()
                .map_err(|e| TraceError::parquet(path, e))
        })?
        else {
            return Ok(());
        };
        let mut at = [usize::MAX; COLUMNS.len()];
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(wanted.len());
        let mut fields: Vec<Field> = Vec::with_capacity(wanted.len());
        for &i in wanted {
            let field = canon.field(i);
            let rows = batch.num_rows();
            let arr = match batch.column_by_name(field.name()) {
                _ if empty.contains(&i) => match &nulls_made[i] {
                    Some(made) if made.len() == rows => made.clone(),
                    _ => nulls_made[i]
                        .insert(new_null_array(field.data_type(), rows))
                        .clone(),
                },
                None => absent_column(path, field, rows)?,
                Some(src) if i == idx::PATH && src.data_type() == &dict_type() => src.clone(),
                Some(src) => normalise_column(path, field, src)?,
            };
            let arr = path_as_keys(path, i, arr)?;
            at[i] = cols.len();
            fields.push(Field::new(field.name(), arr.data_type().clone(), true));
            cols.push(arr);
        }
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
            .map_err(|e| TraceError::invalid(path, e.to_string()))?;
        visit(&ScanBatch { batch, at });
    }
}

/// Column `i` as it is handed over: the `path` column made a dictionary
/// when the segment stored it plainly (or not at all), other columns as
/// they are.
fn path_as_keys(path: &Path, i: usize, arr: ArrayRef) -> TraceResult<ArrayRef> {
    if i != idx::PATH || arr.data_type() == &dict_type() {
        return Ok(arr);
    }
    cast(&arr, &dict_type()).map_err(|e| TraceError::column(path, COL_PATH, e.to_string()))
}

/// A partial result of a scan: what one unit's batches fold into.
pub trait Fold: Send {
    /// Told the unit's row count before its first batch.
    fn reserve(&mut self, _rows: usize) {}
    /// Takes in one batch (rows in `ts` order within a segment).
    fn add(&mut self, batch: &ScanBatch);
    /// Work left for after the last batch, done on the worker thread before
    /// the part is handed to the merge.
    fn seal(&mut self) {}
}

/// How many worker threads a scan uses: one per core.
pub fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Reads `columns` of every row of `reader`'s trace on [`workers`] threads.
/// Each unit (row group) is folded into a fresh `init()`, and the partials
/// are handed to `merge` in time order. Memory holds at most a few units'
/// partials per worker at a time. The first error stops the scan.
pub fn scan<P: Fold>(
    reader: &TraceReader,
    columns: &[&str],
    init: impl Fn() -> P + Sync,
    merge: impl FnMut(P),
) -> TraceResult<()> {
    scan_sparing(reader, columns, &[], init, merge)
}

/// [`scan`], with columns that are decoded only in row groups where the
/// column they stand in for has nulls (see [`OnlyWhereNull`]).
pub fn scan_sparing<P: Fold>(
    reader: &TraceReader,
    columns: &[&str],
    sparing: &[OnlyWhereNull],
    init: impl Fn() -> P + Sync,
    merge: impl FnMut(P),
) -> TraceResult<()> {
    let position = |c: &str| COLUMNS.iter().position(|k| *k == c);
    let mut wanted: Vec<usize> = columns.iter().filter_map(|c| position(c)).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let sparing: Vec<(usize, usize)> = sparing
        .iter()
        .filter_map(|s| Some((position(s.column)?, position(s.where_null)?)))
        .collect();
    let (metas, units) = units_in_time_order(reader)?;
    let threads = workers().min(units.len()).max(1);
    let shared = Shared {
        units: &units,
        metas: &metas,
        wanted: &wanted,
        sparing: &sparing,
        window: 2 * threads,
        next: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        merged: (Mutex::new(0), Condvar::new()),
    };
    let (tx, rx) = mpsc::channel::<(usize, TraceResult<P>)>();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let tx = tx.clone();
            let (shared, init) = (&shared, &init);
            s.spawn(move || shared.work(init, tx));
        }
        drop(tx);
        shared.merge_in_order(rx, merge)
    })
}

/// The row groups of the trace's segments, segments in time order, with
/// each segment's metadata.
fn units_in_time_order(reader: &TraceReader) -> TraceResult<(Vec<SegmentMeta>, Vec<Unit>)> {
    let mut order: Vec<usize> = (0..reader.segments().len()).collect();
    order.sort_by_key(|&i| reader.segments()[i].ts_ns_range.map_or(i64::MIN, |r| r.0));
    let mut metas: Vec<SegmentMeta> = Vec::new();
    let mut units: Vec<Unit> = Vec::new();
    for (k, &i) in order.iter().enumerate() {
        let meta = open_meta(&reader.segments()[i].path)?;
        for row_group in 0..meta.meta.metadata().num_row_groups() {
            units.push(Unit {
                segment: k,
                row_group,
            });
        }
        metas.push(meta);
    }
    Ok((metas, units))
}

/// What a scan's workers and its merge share.
struct Shared<'a> {
    units: &'a [Unit],
    metas: &'a [SegmentMeta],
    wanted: &'a [usize],
    /// (column, the column it stands in for), as positions.
    sparing: &'a [(usize, usize)],
    /// Workers take units in order but never run further ahead of the
    /// merge than this many units, which bounds the partials held.
    window: usize,
    /// The next unit to take.
    next: AtomicUsize,
    failed: AtomicBool,
    /// Units merged so far, and the signal that it moved.
    merged: (Mutex<usize>, Condvar),
}

impl Shared<'_> {
    /// A worker: folds units until none is left or one has failed, sending
    /// each unit's partial (or error) to the merge.
    fn work<P: Fold>(
        &self,
        init: &(impl Fn() -> P + Sync),
        tx: mpsc::Sender<(usize, TraceResult<P>)>,
    ) {
        loop {
            let u = self.next.fetch_add(1, Ordering::SeqCst);
            if u >= self.units.len() || self.failed.load(Ordering::SeqCst) {
                return;
            }
            self.wait_for_merge(u);
            if self.failed.load(Ordering::SeqCst) {
                return;
            }
            let result = self.fold(u, init);
            if result.is_err() {
                self.failed.store(true, Ordering::SeqCst);
            }
            if tx.send((u, result)).is_err() {
                return;
            }
        }
    }

    /// Waits until unit `u` is within the window of the merge (or the scan
    /// has failed).
    fn wait_for_merge(&self, u: usize) {
        let (done, cv) = &self.merged;
        let mut done = done.lock().unwrap();
        while u >= *done + self.window && !self.failed.load(Ordering::SeqCst) {
            done = cv.wait(done).unwrap();
        }
    }

    /// Unit `u` folded into a fresh partial.
    fn fold<P: Fold>(&self, u: usize, init: &impl Fn() -> P) -> TraceResult<P> {
        let unit = &self.units[u];
        let meta = &self.metas[unit.segment];
        let mut part = init();
        let rows = meta.meta.metadata().row_group(unit.row_group).num_rows();
        part.reserve(rows.max(0) as usize);
        read_unit(meta, unit.row_group, self.wanted, self.sparing, &mut |b| {
            part.add(b)
        })?;
        part.seal();
        Ok(part)
    }

    /// Hands the partials to `merge` in unit order as they arrive, moving
    /// the window on; after an error nothing more is merged and the
    /// workers stop.
    fn merge_in_order<P>(
        &self,
        rx: mpsc::Receiver<(usize, TraceResult<P>)>,
        mut merge: impl FnMut(P),
    ) -> TraceResult<()> {
        let mut pending: BTreeMap<usize, P> = BTreeMap::new();
        let mut next_merge = 0usize;
        let mut error: Option<TraceError> = None;
        for (u, result) in rx {
            match result {
                Ok(p) => {
                    pending.insert(u, p);
                }
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
            while let Some(p) = pending.remove(&next_merge) {
                if error.is_none() {
                    merge(p);
                }
                next_merge += 1;
            }
            let (done, cv) = &self.merged;
            *done.lock().unwrap() = next_merge;
            cv.notify_all();
            if error.is_some() {
                self.failed.store(true, Ordering::SeqCst);
                cv.notify_all();
            }
        }
        match error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
