//! Streams rows into a trace directory as a sequence of complete Parquet
//! segments. A segment is written under a `.partial` name and renamed when its
//! footer is on disk, and the manifest is rewritten after each one, so a writer
//! killed at any moment leaves a readable trace of every finished segment.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_ord::sort::sort_to_indices;
use arrow_select::concat::concat_batches;
use arrow_select::take::take_record_batch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{WriterProperties, WriterVersion};
use parquet::schema::types::ColumnPath;

use crate::columns::Events;
use crate::error::{TraceError, TraceResult};
use crate::event::{EventBatchBuilder, EventRow, RowTraits};
use crate::manifest::{Manifest, Source};
use crate::private_file::TRACE_FILE_MODE;
use crate::schema::{
    idx, trace_schema, COL_DUR_NS, COL_OFFSET, COL_PATH, COL_TS, PARQUET_VERSION_KEY,
    SCHEMA_VERSION,
};

#[derive(Debug, Clone)]
pub struct WriterOptions {
    pub source: Source,
    /// Rows per segment: the most a killed writer can lose.
    pub segment_rows: usize,
    /// Rows per Parquet row group: the unit other engines (DuckDB, Spark)
    /// and the analysis read in parallel.
    pub row_group_rows: usize,
    /// Rows buffered before a batch is handed to the Parquet encoder.
    pub batch_rows: usize,
    pub zstd_level: i32,
    pub command: Option<Vec<String>>,
}

impl WriterOptions {
    pub fn new(source: Source) -> Self {
        WriterOptions {
            source,
            segment_rows: 1 << 20,
            row_group_rows: 1 << 20,
            batch_rows: 64 * 1024,
            zstd_level: 3,
            command: None,
        }
    }
}

/// The largest `path` dictionary of a row group: 32 MiB holds half a
/// million paths of 64 bytes, a dataset's files many times over.
pub const PATH_DICTIONARY_BYTES: usize = 32 << 20;

/// The one place Parquet writer settings live: zstd, dictionary-encoded strings
/// and small-domain integers (Parquet's default), delta-encoded timestamps and
/// durations, and byte-stream-split offsets. Measured on a capture-like mix of
/// interleaved loader streams, byte-stream-split is the smaller encoding for
/// both durations (2.3 vs 2.6 bytes per row) and offsets (1.3 vs 2.0): durations
/// are not monotonic, and interleaved streams make offset deltas large. But
/// every analysis reads `dur_ns`, and its byte-stream-split pages inflate to 8
/// bytes a row before the split is undone: on a 20 M-row trace that column
/// alone took 0.113 s of CPU to decode against 0.044 s delta-encoded, 5 % of
/// `summary`'s CPU, for 3.5 % more bytes per event. Offsets stay split: they
/// are null in most rows, and delta encoding would cost 8 % more bytes.
/// Rows are sorted by `ts` and the footer says so (`sorting_columns`), so
/// engines that read it can skip a sort or a merge. `path` keeps its
/// dictionary up to [`PATH_DICTIONARY_BYTES`] (Parquet's 1 MiB default is
/// some 20,000 paths): past it the pages fall back to plain strings, and a
/// reader that wants the paths as a dictionary (the replay's plan, the
/// scan) must hash every row's string to make one again.
pub fn writer_properties(opts: &WriterOptions) -> WriterProperties {
    let level = ZstdLevel::try_new(opts.zstd_level).unwrap_or_default();
    let mut b = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_2_0)
        .set_compression(Compression::ZSTD(level))
        .set_max_row_group_row_count(Some(opts.row_group_rows.clamp(1, opts.segment_rows.max(1))))
        .set_sorting_columns(Some(vec![SortingColumn {
            column_idx: idx::TS as i32,
            descending: false,
            nulls_first: false,
        }]))
        .set_key_value_metadata(Some(vec![KeyValue::new(
            PARQUET_VERSION_KEY.to_string(),
            SCHEMA_VERSION.to_string(),
        )]));
    for (col, encoding) in [
        (COL_TS, Encoding::DELTA_BINARY_PACKED),
        (COL_DUR_NS, Encoding::DELTA_BINARY_PACKED),
        (COL_OFFSET, Encoding::BYTE_STREAM_SPLIT),
    ] {
        let path = ColumnPath::from(col);
        b = b
            .set_column_dictionary_enabled(path.clone(), false)
            .set_column_encoding(path, encoding);
    }
    b.set_column_dictionary_page_size_limit(ColumnPath::from(COL_PATH), PATH_DICTIONARY_BYTES)
        .build()
}

struct OpenSegment {
    name: String,
    partial: PathBuf,
    writer: ArrowWriter<File>,
    rows: usize,
    /// Syscalls its rows stand for (see `calls` in the schema).
    calls: u64,
    /// First and last `ts` written to it; they reach the manifest with the
    /// rows when the segment is finished, so a stored manifest only ever
    /// describes finished segments.
    ts_range: (i64, i64),
}

pub struct TraceWriter {
    dir: PathBuf,
    opts: WriterOptions,
    props: WriterProperties,
    builder: EventBatchBuilder,
    segment: Option<OpenSegment>,
    manifest: Manifest,
    last_ts: i64,
    out_of_order_batches: u64,
}

impl TraceWriter {
    /// Creates the trace directory. An existing non-empty directory is refused,
    /// so a capture never mixes with (or overwrites) an older one.
    pub fn create(dir: &Path, opts: WriterOptions) -> TraceResult<Self> {
        if dir.exists() {
            let mut entries = std::fs::read_dir(dir).map_err(|e| TraceError::io(dir, e))?;
            if entries.next().is_some() {
                return Err(TraceError::invalid(
                    dir,
                    "output directory exists and is not empty; choose a new one",
                ));
            }
        } else {
            std::fs::create_dir_all(dir).map_err(|e| TraceError::io(dir, e))?;
        }
        let mut manifest = Manifest::new(opts.source);
        manifest.command = opts.command.clone();
        manifest.start_unix_ns = i64::MAX;
        manifest.end_unix_ns = i64::MIN;
        let w = TraceWriter {
            dir: dir.to_path_buf(),
            props: writer_properties(&opts),
            builder: EventBatchBuilder::with_capacity(opts.batch_rows),
            opts,
            segment: None,
            manifest,
            last_ts: i64::MIN,
            out_of_order_batches: 0,
        };
        w.store_manifest()?;
        Ok(w)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn push(&mut self, row: &EventRow<'_>) -> TraceResult<()> {
        self.push_with_traits(row, RowTraits::default())
    }

    /// A row whose names are anonymized, with what they said (see
    /// [`crate::schema::COL_PATH_TRAITS`]).
    pub fn push_with_traits(&mut self, row: &EventRow<'_>, traits: RowTraits) -> TraceResult<()> {
        if !self.manifest.hosts.iter().any(|h| h == row.host) {
            self.manifest.hosts.push(row.host.to_string());
        }
        self.builder.push_with_traits(row, traits);
        if self.builder.len() >= self.opts.batch_rows {
            self.flush_rows()?;
        }
        Ok(())
    }

    /// Appends a batch of the canonical schema (as produced by
    /// [`EventBatchBuilder`] or [`crate::TraceReader`]).
    pub fn write_batch(&mut self, batch: &RecordBatch) -> TraceResult<()> {
        self.flush_rows()?;
        self.write_sorted(batch.clone())
    }

    /// Appends several canonical batches as one, sorted by `ts` together: for
    /// producers that gather rows from several time-ordered sources (ranks)
    /// and would otherwise hand over batches that overlap in time.
    pub fn write_merged(&mut self, parts: &[RecordBatch]) -> TraceResult<()> {
        match parts {
            [] => Ok(()),
            [one] => self.write_batch(one),
            _ => {
                let batch = concat_batches(&trace_schema(), parts)
                    .map_err(|e| TraceError::invalid(&self.dir, e.to_string()))?;
                self.write_batch(&batch)
            }
        }
    }

    /// Events the kernel side could not deliver; written to the manifest.
    pub fn set_dropped_events(&mut self, n: u64) {
        self.manifest.dropped_events = n;
    }

    /// Extra manifest keys (e.g. the collector's probe description).
    pub fn set_extra(&mut self, key: &str, value: serde_json::Value) {
        self.manifest.extra.insert(key.to_string(), value);
    }

    /// Marks the trace anonymized (see [`crate::keyed_names`]).
    pub fn set_anonymized(&mut self, a: crate::manifest::Anonymized) {
        self.manifest.anonymized = Some(a);
    }

    /// The mount table of the traced job (see [`crate::mounts`]).
    pub fn set_mounts(&mut self, mounts: Vec<crate::mounts::Mount>) {
        self.manifest.mounts = Some(mounts);
    }

    /// When the traced processes began (see [`crate::processes`]).
    pub fn set_process_starts(&mut self, starts: Vec<crate::processes::ProcessStart>) {
        self.manifest.process_starts = starts;
    }

    pub fn events_written(&self) -> u64 {
        self.manifest.events
            + self.segment.as_ref().map_or(0, |s| s.rows as u64)
            + self.builder.len() as u64
    }

    /// Finishes the open segment and writes the final manifest.
    pub fn finish(mut self) -> TraceResult<Manifest> {
        self.flush_rows()?;
        self.close_segment()?;
        if self.manifest.events == 0 {
            self.manifest.start_unix_ns = 0;
            self.manifest.end_unix_ns = 0;
        }
        if self.out_of_order_batches > 0 {
            self.manifest.extra.insert(
                // Segments begun early for a late batch: they overlap in time.
                "late_batch_segments".into(),
                serde_json::json!(self.out_of_order_batches),
            );
        }
        self.manifest.complete = true;
        self.store_manifest()?;
        Ok(self.manifest.clone())
    }

    fn flush_rows(&mut self) -> TraceResult<()> {
        if self.builder.is_empty() {
            return Ok(());
        }
        let batch = self.builder.finish();
        self.write_sorted(batch)
    }

    fn write_sorted(&mut self, batch: RecordBatch) -> TraceResult<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let batch = sort_by_ts(batch);
        let ev = Events::new(batch.clone());
        let ts = ev.ts();
        let (first, last) = (ts.value(0), ts.value(ts.len() - 1));
        if first < self.last_ts {
            // A batch reaching back before rows already written (a row later
            // than the producer's reorder window) starts a segment of its own:
            // every segment stays sorted by `ts`, and the reader merges
            // segments that overlap in time, so readers still see time order.
            self.out_of_order_batches += 1;
            self.close_segment()?;
        }
        self.last_ts = self.last_ts.max(last);
        for host in ev.host_values() {
            if !self.manifest.hosts.iter().any(|h| h == host) {
                self.manifest.hosts.push(host.to_string());
            }
        }
        let mut rest = batch;
        let segment_rows = self.opts.segment_rows;
        while rest.num_rows() > 0 {
            let seg = self.open_segment()?;
            let room = segment_rows - seg.rows;
            let n = room.min(rest.num_rows());
            let part = rest.slice(0, n);
            seg.writer
                .write(&part)
                .map_err(|e| TraceError::parquet(&seg.partial, e))?;
            seg.rows += n;
            let part = Events::new(part);
            seg.calls += (0..n).map(|i| part.calls_at(i) as u64).sum::<u64>();
            let part_ts = part.ts().clone();
            seg.ts_range.0 = seg.ts_range.0.min(part_ts.value(0));
            seg.ts_range.1 = seg.ts_range.1.max(part_ts.value(n - 1));
            let full = seg.rows >= segment_rows;
            rest = rest.slice(n, rest.num_rows() - n);
            if full {
                self.close_segment()?;
            }
        }
        Ok(())
    }

    fn open_segment(&mut self) -> TraceResult<&mut OpenSegment> {
        if self.segment.is_none() {
            let name = format!("seg-{:06}.parquet", self.manifest.segments.len());
            let partial = self.dir.join(format!("{name}.partial"));
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(TRACE_FILE_MODE)
                .open(&partial)
                .map_err(|e| TraceError::io(&partial, e))?;
            let writer = ArrowWriter::try_new(file, trace_schema(), Some(self.props.clone()))
                .map_err(|e| TraceError::parquet(&partial, e))?;
            self.segment = Some(OpenSegment {
                name,
                partial,
                writer,
                rows: 0,
                calls: 0,
                ts_range: (i64::MAX, i64::MIN),
            });
        }
        Ok(self.segment.as_mut().expect("segment just opened"))
    }

    fn close_segment(&mut self) -> TraceResult<()> {
        let Some(seg) = self.segment.take() else {
            return Ok(());
        };
        let file = seg
            .writer
            .into_inner()
            .map_err(|e| TraceError::parquet(&seg.partial, e))?;
        file.sync_data()
            .map_err(|e| TraceError::io(&seg.partial, e))?;
        let done = self.dir.join(&seg.name);
        std::fs::rename(&seg.partial, &done).map_err(|e| TraceError::io(&done, e))?;
        self.manifest.segments.push(seg.name);
        self.manifest.events += seg.rows as u64;
        *self.manifest.calls.get_or_insert(0) += seg.calls;
        self.manifest.start_unix_ns = self.manifest.start_unix_ns.min(seg.ts_range.0);
        self.manifest.end_unix_ns = self.manifest.end_unix_ns.max(seg.ts_range.1);
        self.store_manifest()
    }

    fn store_manifest(&self) -> TraceResult<()> {
        let mut m = self.manifest.clone();
        if m.events == 0 {
            m.start_unix_ns = 0;
            m.end_unix_ns = 0;
        }
        m.store(&self.dir)
    }
}

fn sort_by_ts(batch: RecordBatch) -> RecordBatch {
    let ev = Events::new(batch.clone());
    let ts = ev.ts().values();
    if ts.windows(2).all(|w| w[0] <= w[1]) {
        return batch;
    }
    let idx = sort_to_indices(ev.ts(), None, None).expect("timestamps sort");
    take_record_batch(&batch, &idx).expect("take by sort indices")
}
