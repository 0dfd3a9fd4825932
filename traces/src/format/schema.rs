//! Trace format version 1: column names, the Arrow schema and the op vocabulary.
//! This is the only place the schema is defined; everything else uses these names.
//! How traces sit on disk (rows sorted by `ts`, recorded as `sorting_columns`;
//! row-group and segment sizes; per-node `host=NAME/` partitions) and how other
//! engines read them (DuckDB, pyarrow, Spark's `nanosAsLong` for `ts`) is in
//! `docs/FORMAT.md`.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// The trace format version this library writes and the newest it reads.
pub const SCHEMA_VERSION: u32 = 1;
/// Value of the manifest's `format` key.
pub const FORMAT_NAME: &str = "iorepro-trace";
/// Parquet key-value metadata entry that carries the schema version inside each segment,
/// so a lone segment file still says what it is.
pub const PARQUET_VERSION_KEY: &str = "iorepro.schema_version";

pub const COL_TS: &str = "ts";
pub const COL_DUR_NS: &str = "dur_ns";
pub const COL_HOST: &str = "host";
pub const COL_PID: &str = "pid";
pub const COL_TID: &str = "tid";
pub const COL_RANK: &str = "rank";
pub const COL_COMM: &str = "comm";
pub const COL_OP: &str = "op";
pub const COL_PATH: &str = "path";
pub const COL_FD: &str = "fd";
pub const COL_OFFSET: &str = "offset";
pub const COL_SIZE: &str = "size";
pub const COL_RET: &str = "ret";
pub const COL_FLAGS: &str = "flags";

/// All required columns, in schema order.
pub const COLUMNS: [&str; 14] = [
    COL_TS, COL_DUR_NS, COL_HOST, COL_PID, COL_TID, COL_RANK, COL_COMM, COL_OP, COL_PATH, COL_FD,
    COL_OFFSET, COL_SIZE, COL_RET, COL_FLAGS,
];

/// Position of each column in [`trace_schema`].
pub mod idx {
    pub const TS: usize = 0;
    pub const DUR_NS: usize = 1;
    pub const HOST: usize = 2;
    pub const PID: usize = 3;
    pub const TID: usize = 4;
    pub const RANK: usize = 5;
    pub const COMM: usize = 6;
    pub const OP: usize = 7;
    pub const PATH: usize = 8;
    pub const FD: usize = 9;
    pub const OFFSET: usize = 10;
    pub const SIZE: usize = 11;
    pub const RET: usize = 12;
    pub const FLAGS: usize = 13;
}

pub fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

/// Low-cardinality strings (host, op) are dictionary-encoded in Arrow as well as
/// in Parquet; comm and path stay plain Utf8 in Arrow (Parquet still
/// dictionary-encodes them on disk).
pub fn dict_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// The canonical Arrow schema of a trace: what the writer writes and what the
/// reader normalises every trace to.
pub fn trace_schema() -> SchemaRef {
    thread_local! {
        static SCHEMA: SchemaRef = Arc::new(build_schema());
    }
    SCHEMA.with(|s| s.clone())
}

fn build_schema() -> Schema {
    Schema::new(vec![
        Field::new(COL_TS, ts_type(), false),
        Field::new(COL_DUR_NS, DataType::Int64, false),
        Field::new(COL_HOST, dict_type(), false),
        Field::new(COL_PID, DataType::Int32, false),
        Field::new(COL_TID, DataType::Int32, false),
        Field::new(COL_RANK, DataType::Int32, true),
        Field::new(COL_COMM, DataType::Utf8, false),
        Field::new(COL_OP, dict_type(), false),
        Field::new(COL_PATH, DataType::Utf8, true),
        Field::new(COL_FD, DataType::Int32, true),
        Field::new(COL_OFFSET, DataType::Int64, true),
        Field::new(COL_SIZE, DataType::Int64, true),
        Field::new(COL_RET, DataType::Int64, false),
        Field::new(COL_FLAGS, DataType::Int32, true),
    ])
}

/// The operations a trace row can record. Vectored and positional variants fold
/// into `Read`/`Write` (one row per call, total size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Op {
    Open,
    Close,
    Read,
    Write,
    Fsync,
    Fdatasync,
    Lseek,
    Truncate,
    Unlink,
    Rename,
    Mmap,
    /// Page-cache fill under an mmap: `offset`/`size` are the file range faulted in.
    Fault,
    /// An op name this version does not know (kept by readers, counted as-is).
    Other,
}

impl Op {
    pub const ALL: [Op; 13] = [
        Op::Open,
        Op::Close,
        Op::Read,
        Op::Write,
        Op::Fsync,
        Op::Fdatasync,
        Op::Lseek,
        Op::Truncate,
        Op::Unlink,
        Op::Rename,
        Op::Mmap,
        Op::Fault,
        Op::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Open => "open",
            Op::Close => "close",
            Op::Read => "read",
            Op::Write => "write",
            Op::Fsync => "fsync",
            Op::Fdatasync => "fdatasync",
            Op::Lseek => "lseek",
            Op::Truncate => "truncate",
            Op::Unlink => "unlink",
            Op::Rename => "rename",
            Op::Mmap => "mmap",
            Op::Fault => "fault",
            Op::Other => "other",
        }
    }

    /// Known op names; anything else is `Other`.
    pub fn parse(s: &str) -> Op {
        Op::ALL
            .iter()
            .copied()
            .find(|op| op.as_str() == s)
            .unwrap_or(Op::Other)
    }

    /// Ops whose `ret` counts bytes read from storage (or the page cache).
    pub fn is_read_data(self) -> bool {
        matches!(self, Op::Read)
    }

    pub fn is_write_data(self) -> bool {
        matches!(self, Op::Write)
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
