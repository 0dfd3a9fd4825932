//! Streams a trace back as canonical batches in time order, with bounded memory.
//!
//! Accepts our own traces and foreign ones (pyarrow, DuckDB, pandas): strings as
//! Utf8, LargeUtf8, Utf8View or dictionaries; `ts` as a timestamp of any unit or
//! Int64 nanoseconds; integer columns of any width. Everything is normalised to
//! [`crate::trace_schema`], so analysis code sees one set of types. Segments
//! that do not overlap in time are read one after another; overlapping ones
//! (merged captures, foreign writers) are k-way merged by `ts`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{new_null_array, Array, ArrayRef, RecordBatch};
use arrow_cast::{cast_with_options, CastOptions};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::statistics::Statistics;

use crate::columns::Events;
use crate::error::{TraceError, TraceResult};
use crate::manifest::{Manifest, MANIFEST_FILE};
use crate::partitions::{combine, partition_name, partitions};
use crate::schema::{
    trace_schema, COLUMNS, COL_CALLS, COL_TS, PARQUET_VERSION_KEY, REQUIRED_COLUMNS, SCHEMA_VERSION,
};
use crate::segment_file::{guard, SegmentFile};

use crate::batches::SequentialBatches;
pub use crate::batches::{MergeByTs, SegmentBatches};

/// Rows per batch handed to consumers.
pub const READ_BATCH_ROWS: usize = 64 * 1024;

/// An opened trace: its manifest (synthesised for a lone Parquet file) and segments.
pub struct TraceReader {
    root: PathBuf,
    manifest: Manifest,
    segments: Vec<SegmentInfo>,
    projection: Option<Vec<usize>>,
}

#[derive(Debug, Clone)]
pub struct SegmentInfo {
    pub path: PathBuf,
    pub rows: u64,
    /// `ts` range from Parquet statistics, in the file's own unit, when present.
    pub ts_range: Option<(i64, i64)>,
    /// The same range in nanoseconds.
    pub ts_ns_range: Option<(i64, i64)>,
}

impl TraceReader {
    /// Opens a trace directory (with `manifest.json`), a directory of per-node
    /// partitions (`host=NAME/`, see [`crate::partitions`]) or a
    /// single `.parquet` file.
    /// Every segment's footer and schema are checked here, so bad input fails
    /// before any work is done.
    pub fn open(path: &Path) -> TraceResult<Self> {
        let meta = std::fs::metadata(path).map_err(|e| TraceError::io(path, e))?;
        let (manifest, files) = if let Some(parts) = partitions(path)? {
            let loaded = parts
                .iter()
                .map(|p| Ok((partition_name(p), Manifest::load(p)?)))
                .collect::<TraceResult<Vec<_>>>()?;
            let m = combine(&loaded);
            let files: Vec<PathBuf> = m.segments.iter().map(|s| path.join(s)).collect();
            (m, files)
        } else if meta.is_dir() {
            let m = Manifest::load(path)?;
            let files: Vec<PathBuf> = m.segments.iter().map(|s| path.join(s)).collect();
            (m, files)
        } else {
            let mut m = Manifest::new(crate::manifest::Source::Import);
            m.complete = true;
            m.segments = vec![path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()];
            (m, vec![path.to_path_buf()])
        };
        let mut segments = Vec::with_capacity(files.len());
        for f in files {
            segments.push(inspect_segment(&f)?);
        }
        let mut r = TraceReader {
            root: path.to_path_buf(),
            manifest,
            segments,
            projection: None,
        };
        if !meta.is_dir() {
            r.manifest.events = r.segments.iter().map(|s| s.rows).sum();
        }
        Ok(r)
    }

    /// Reads only these columns; the others come back as all-null columns of
    /// the canonical type (so [`Events`] accessors still work), which saves
    /// decoding time for analyses that need a few columns.
    pub fn with_columns(mut self, columns: &[&str]) -> Self {
        let mut idx: Vec<usize> = columns
            .iter()
            .filter_map(|c| COLUMNS.iter().position(|k| k == c))
            .collect();
        if !idx.contains(&0) {
            idx.push(0); // ts is always needed for ordering
        }
        idx.sort_unstable();
        idx.dedup();
        self.projection = Some(idx);
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn segments(&self) -> &[SegmentInfo] {
        &self.segments
    }

    /// First and last `ts` (Unix ns) according to the segment footers, when
    /// every segment has statistics.
    pub fn ts_span_ns(&self) -> Option<(i64, i64)> {
        self.segments
            .iter()
            .try_fold((i64::MAX, i64::MIN), |(lo, hi), s| {
                s.ts_ns_range
                    .filter(|_| s.rows > 0)
                    .map(|(a, b)| (lo.min(a), hi.max(b)))
                    .or((s.rows == 0).then_some((lo, hi)))
            })
            .filter(|(lo, hi)| lo <= hi)
    }

    /// Total rows according to the segment footers.
    pub fn rows(&self) -> u64 {
        self.segments.iter().map(|s| s.rows).sum()
    }

    /// All batches in `ts` order.
    pub fn batches(
        &self,
    ) -> TraceResult<Box<dyn Iterator<Item = TraceResult<RecordBatch>> + Send>> {
        let mut order: Vec<&SegmentInfo> = self.segments.iter().collect();
        let disjoint = order.iter().all(|s| s.ts_range.is_some()) && {
            order.sort_by_key(|s| s.ts_range.map(|r| r.0));
            order
                .windows(2)
                .all(|w| w[0].ts_range.unwrap().1 <= w[1].ts_range.unwrap().0)
        };
        let proj = self.projection.clone();
        if disjoint || order.len() <= 1 {
            let paths: Vec<PathBuf> = order.iter().map(|s| s.path.clone()).collect();
            Ok(Box::new(SequentialBatches::new(paths, proj)))
        } else {
            let streams = order
                .iter()
                .map(|s| {
                    Ok(Box::new(SegmentBatches::open(&s.path, proj.clone())?)
                        as Box<
                            dyn Iterator<Item = TraceResult<RecordBatch>> + Send,
                        >)
                })
                .collect::<TraceResult<Vec<_>>>()?;
            Ok(Box::new(MergeByTs::new(streams)))
        }
    }

    /// All rows as typed [`Events`] batches, in `ts` order.
    pub fn events(&self) -> TraceResult<impl Iterator<Item = TraceResult<Events>> + Send> {
        Ok(self.batches()?.map(|b| b.map(Events::new)))
    }
}

/// Reads a segment's footer: row count, `ts` statistics, and a schema check.
fn inspect_segment(path: &Path) -> TraceResult<SegmentInfo> {
    let file = SegmentFile::open(path)?;
    let builder = guard(path, || {
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| TraceError::parquet(path, e))
    })?;
    let meta = builder.metadata().clone();
    if let Some(kv) = meta.file_metadata().key_value_metadata() {
        for entry in kv {
            if entry.key == PARQUET_VERSION_KEY {
                let v: u64 = entry.value.as_deref().unwrap_or("0").parse().unwrap_or(0);
                if v > SCHEMA_VERSION as u64 {
                    return Err(TraceError::NewerSchema {
                        path: path.to_path_buf(),
                        found: v,
                        supported: SCHEMA_VERSION,
                    });
                }
            }
        }
    }
    plan_columns(path, builder.schema())?;
    let ts_col = meta
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .position(|c| c.name() == COL_TS);
    let mut range: Option<(i64, i64)> = None;
    let mut have_stats = ts_col.is_some();
    for rg in meta.row_groups() {
        let stats = ts_col.and_then(|c| rg.column(c).statistics());
        match stats {
            Some(Statistics::Int64(s)) => match (s.min_opt(), s.max_opt()) {
                (Some(&lo), Some(&hi)) => {
                    range = Some(match range {
                        None => (lo, hi),
                        Some((a, b)) => (a.min(lo), b.max(hi)),
                    })
                }
                _ => have_stats &= rg.num_rows() == 0,
            },
            _ => have_stats = false,
        }
    }
    let rows = meta.file_metadata().num_rows().max(0) as u64;
    let ts_range = if have_stats {
        range.or(Some((0, 0)))
    } else {
        None
    };
    let ns_per_unit = match builder
        .schema()
        .field_with_name(COL_TS)
        .map(|f| f.data_type())
    {
        Ok(DataType::Timestamp(TimeUnit::Second, _)) => 1_000_000_000,
        Ok(DataType::Timestamp(TimeUnit::Millisecond, _)) => 1_000_000,
        Ok(DataType::Timestamp(TimeUnit::Microsecond, _)) => 1_000,
        _ => 1,
    };
    Ok(SegmentInfo {
        path: path.to_path_buf(),
        rows,
        ts_range,
        ts_ns_range: ts_range
            .map(|(a, b)| (a.saturating_mul(ns_per_unit), b.saturating_mul(ns_per_unit))),
    })
}

/// For each canonical column, where it is in the file (`None` for a column
/// added after the file was written) and whether it can be cast from what is
/// there; errors name the column and the problem.
pub(crate) fn plan_columns(path: &Path, schema: &SchemaRef) -> TraceResult<Vec<Option<usize>>> {
    let canon = trace_schema();
    let mut positions = Vec::with_capacity(COLUMNS.len());
    for field in canon.fields() {
        let name = field.name();
        let Ok(pos) = schema.index_of(name) else {
            if !REQUIRED_COLUMNS.contains(&name.as_str()) {
                positions.push(None); // a later addition: the reader fills it in
                continue;
            }
            return Err(TraceError::column(
                path,
                name,
                "missing (required by trace format v1)",
            ));
        };
        let found = schema.field(pos).data_type();
        if !castable(found, field.data_type()) {
            return Err(TraceError::column(
                path,
                name,
                format!("has type {found}, expected {}", describe(field.data_type())),
            ));
        }
        positions.push(Some(pos));
    }
    Ok(positions)
}

fn is_string(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(k, v) => k.is_integer() && is_string(v),
        _ => false,
    }
}

fn castable(from: &DataType, to: &DataType) -> bool {
    match to {
        DataType::Timestamp(..) => matches!(from, DataType::Timestamp(..) | DataType::Int64),
        DataType::Int64 | DataType::Int32 => from.is_integer(),
        DataType::Utf8 | DataType::Dictionary(..) => is_string(from),
        _ => false,
    }
}

fn describe(t: &DataType) -> &'static str {
    match t {
        DataType::Timestamp(..) => "a timestamp (any unit) or Int64 nanoseconds",
        DataType::Int64 | DataType::Int32 => "an integer",
        _ => "a string (Utf8 or dictionary)",
    }
}

pub(crate) fn normalise(
    path: &Path,
    batch: &RecordBatch,
    projection: Option<&[usize]>,
) -> TraceResult<RecordBatch> {
    let canon = trace_schema();
    let n = batch.num_rows();
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(COLUMNS.len());
    let mut fields: Vec<Field> = Vec::with_capacity(COLUMNS.len());
    for (i, field) in canon.fields().iter().enumerate() {
        let wanted = projection.is_none_or(|p| p.contains(&i));
        if !wanted {
            cols.push(new_null_array(field.data_type(), n));
            fields.push(field.as_ref().clone().with_nullable(true));
            continue;
        }
        let name = field.name();
        let Some(src) = batch.column_by_name(name) else {
            cols.push(absent_column(path, field, n)?);
            fields.push(field.as_ref().clone().with_nullable(true));
            continue;
        };
        let arr = normalise_column(path, field, src)?;
        cols.push(arr);
        fields.push(
            field
                .as_ref()
                .clone()
                .with_nullable(projection.is_some() || field.is_nullable()),
        );
    }
    let schema = if projection.is_some() {
        Arc::new(Schema::new(fields))
    } else {
        canon
    };
    RecordBatch::try_new(schema, cols).map_err(|e| TraceError::invalid(path, e.to_string()))
}

/// What a column the file lacks reads as: a column added after the trace was
/// written is filled in (every row a single call, nulls elsewhere); a
/// required one is an error.
pub(crate) fn absent_column(path: &Path, field: &Field, rows: usize) -> TraceResult<ArrayRef> {
    let name = field.name();
    if REQUIRED_COLUMNS.contains(&name.as_str()) {
        return Err(TraceError::column(
            path,
            name,
            "missing (required by trace format v1)",
        ));
    }
    Ok(if name == COL_CALLS {
        Arc::new(arrow_array::Int64Array::from_value(1, rows)) as ArrayRef
    } else {
        new_null_array(field.data_type(), rows)
    })
}

/// One column cast to its canonical type (`field`); errors name the column.
/// Nulls in a required column are an error.
pub(crate) fn normalise_column(
    path: &Path,
    field: &Field,
    src: &ArrayRef,
) -> TraceResult<ArrayRef> {
    let name = field.name();
    let opts = CastOptions {
        safe: false,
        ..Default::default()
    };
    let arr = if src.data_type() == field.data_type() {
        src.clone()
    } else {
        let src = match (src.data_type(), field.data_type()) {
            // A timestamp without a zone (pandas' default) is taken as UTC:
            // scale it to nanoseconds and reinterpret it as Int64, because a
            // cast from zoneless to "UTC" would look the zone name up.
            // Int64 is nanoseconds already and reinterprets directly; a
            // timestamp in another zone or unit is the same instant.
            (DataType::Timestamp(_, None), DataType::Timestamp(..)) => {
                cast_with_options(src, &DataType::Timestamp(TimeUnit::Nanosecond, None), &opts)
                    .and_then(|a| cast_with_options(&a, &DataType::Int64, &opts))
                    .map_err(|e| TraceError::column(path, name, format!("cannot convert: {e}")))?
            }
            _ => src.clone(),
        };
        cast_with_options(&src, field.data_type(), &opts)
            .map_err(|e| TraceError::column(path, name, format!("cannot convert: {e}")))?
    };
    if !field.is_nullable() && arr.null_count() > 0 {
        return Err(TraceError::column(
            path,
            name,
            "has null values but is required",
        ));
    }
    Ok(arr)
}

/// Whether a path names something [`TraceReader::open`] may accept (for CLIs that
/// want to say "not a trace" before trying).
pub fn looks_like_trace(path: &Path) -> bool {
    path.join(MANIFEST_FILE).exists()
        || path.extension().is_some_and(|e| e == "parquet")
        || partitions(path).is_ok_and(|p| p.is_some())
}
