//! Streams a trace back as canonical batches in time order, with bounded memory.
//!
//! Accepts our own traces and foreign ones (pyarrow, DuckDB, pandas): strings as
//! Utf8, LargeUtf8, Utf8View or dictionaries; `ts` as a timestamp of any unit or
//! Int64 nanoseconds; integer columns of any width. Everything is normalised to
//! [`crate::trace_schema`], so analysis code sees one set of types. Segments
//! that do not overlap in time are read one after another; overlapping ones
//! (merged captures, foreign writers) are k-way merged by `ts`.

use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::{DataType, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::statistics::Statistics;

use crate::columns::Events;
use crate::error::{TraceError, TraceResult};
use crate::manifest::{Manifest, MANIFEST_FILE};
use crate::partitions::{combine, partition_name, partitions};
use crate::schema::{
    COLUMNS, COL_METHOD, COL_STORAGE_BYTES, COL_TS, PARQUET_VERSION_KEY, SCHEMA_VERSION,
};
use crate::segment_file::{guard, SegmentFile};

use crate::batches::SequentialBatches;
pub use crate::batches::{MergeByTs, ReadShape, SegmentBatches};
use crate::canonical_columns::plan_columns;

pub use crate::batches::READ_BATCH_ROWS;

/// An opened trace: its manifest (synthesised for a lone Parquet file) and
/// segments. A clone shares nothing open and reads no footer again (for a
/// second pass over other columns, [`TraceReader::with_columns`]).
#[derive(Clone)]
pub struct TraceReader {
    root: PathBuf,
    manifest: Manifest,
    segments: Vec<SegmentInfo>,
    shape: ReadShape,
}

#[derive(Debug, Clone)]
pub struct SegmentInfo {
    pub path: PathBuf,
    pub rows: u64,
    /// `ts` range from Parquet statistics, in the file's own unit, when present.
    pub ts_range: Option<(i64, i64)>,
    /// The same range in nanoseconds.
    pub ts_ns_range: Option<(i64, i64)>,
    /// Whether the segment may hold object-storage requests: its `method`
    /// column has a value somewhere, by the footer's statistics (true
    /// where they are missing). Analyses of requests skip the others
    /// without reading a row.
    pub may_hold_requests: bool,
    /// Whether the segment may say what the storage served of its reads:
    /// its `storage_bytes` column has a value somewhere, by the same
    /// statistics.
    pub may_hold_storage: bool,
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
            shape: ReadShape::default(),
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
        self.shape.projection = Some(idx);
        self
    }

    /// Hands `path` over as a dictionary (keys per row, one string per
    /// distinct path, as the segment stored it) instead of a string per
    /// row: a consumer that works something out per path does it once per
    /// dictionary entry (see [`crate::columns::PerPath`]) and no row's
    /// string is copied. [`Events::path`] is then not to be called;
    /// [`Events::path_at`] reads either kind.
    pub fn with_path_keys(mut self) -> Self {
        self.shape.path_keys = true;
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

    /// Whether any segment may hold object-storage requests (see
    /// [`SegmentInfo::may_hold_requests`]).
    pub fn may_hold_requests(&self) -> bool {
        self.segments.iter().any(|s| s.may_hold_requests)
    }

    /// Whether any segment may say what the storage served (see
    /// [`SegmentInfo::may_hold_storage`]).
    pub fn may_hold_storage(&self) -> bool {
        self.segments.iter().any(|s| s.may_hold_storage)
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
        let shape = self.shape.clone();
        if disjoint || order.len() <= 1 {
            let paths: Vec<PathBuf> = order.iter().map(|s| s.path.clone()).collect();
            Ok(Box::new(SequentialBatches::new(paths, shape)))
        } else {
            let streams = order
                .iter()
                .map(|s| {
                    Ok(Box::new(SegmentBatches::open(&s.path, shape.clone())?)
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
    // Whether a column has a value somewhere, by the footer's statistics
    // (true where they are missing).
    let has_values = |name: &str| {
        let col = meta
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .position(|c| c.name() == name);
        col.is_some_and(|c| {
            meta.row_groups().iter().any(|rg| {
                let nulls = rg.column(c).statistics().and_then(|s| s.null_count_opt());
                nulls.is_none_or(|n| n < rg.num_rows() as u64)
            })
        })
    };
    let may_hold_requests = has_values(COL_METHOD);
    let may_hold_storage = has_values(COL_STORAGE_BYTES);
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
        may_hold_requests,
        may_hold_storage,
    })
}

/// Whether a path names something [`TraceReader::open`] may accept (for CLIs that
/// want to say "not a trace" before trying).
pub fn looks_like_trace(path: &Path) -> bool {
    path.join(MANIFEST_FILE).exists()
        || path.extension().is_some_and(|e| e == "parquet")
        || partitions(path).is_ok_and(|p| p.is_some())
}
