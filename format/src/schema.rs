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
/// Syscalls a row stands for (added in tool version 0.2; absent means 1).
///
/// A row with `calls = n > 1` is a *run*: n back-to-back reads (or writes)
/// of one thread on one descriptor, each moving exactly `size / n` bytes,
/// the i-th (from 0) at `offset + i * size / n`. `size` and `ret` are the
/// run's totals (so `sum(ret)` is the bytes moved, as for single calls),
/// `ts` is the first call's start, `dur_ns` the time spent inside the calls
/// summed, and [`COL_SPAN_NS`] how long the run lasted. Count calls with
/// `sum(calls)`, not `count(*)`. [`crate::runs`] expands a run back
/// into its calls.
pub const COL_CALLS: &str = "calls";
/// From the first call's start to the last call's end; null when it equals
/// `dur_ns` (every single call).
pub const COL_SPAN_NS: &str = "span_ns";
/// A call's second path (added in tool version 0.2; absent means none): the
/// new name of a `rename` or `link`, the link itself of a `symlink` (whose
/// `path` is then its target, as written).
pub const COL_PATH2: &str = "path2";
/// How a call was made (added in tool version 0.2): null for a syscall,
/// `io_uring` for an io_uring request (whose `ts` is its submission and
/// `dur_ns` the time to its completion), or the call that moved bytes
/// between two descriptors inside the kernel: [`VIA_SENDFILE`],
/// [`VIA_COPY_FILE_RANGE`], [`VIA_SPLICE`]. Such a call is a `read` row on
/// its source file and a `write` row on its destination file, each of the
/// bytes it moved, with the call's own time; an end that is a pipe or a
/// socket has no row, and a failed call is one row, on its source.
pub const COL_VIA: &str = "via";
pub const VIA_IO_URING: &str = "io_uring";
pub const VIA_SENDFILE: &str = "sendfile";
pub const VIA_COPY_FILE_RANGE: &str = "copy_file_range";
pub const VIA_SPLICE: &str = "splice";
/// What the name in `path` said about its file before it was anonymized
/// (added in tool version 0.2): the bits of [`traits`], as
/// `iorepro-analysis`'s roles judged the original name. Written by
/// `iorepro-trace anonymize` and `iorepro-collect --anonymize-key-file`,
/// where every name is a keyed hash and its words are gone; null in a trace
/// whose names are as captured (judge them). Readers of roles take these
/// bits instead of the name's words.
pub const COL_PATH_TRAITS: &str = "path_traits";
/// The same for `path2`.
pub const COL_PATH2_TRAITS: &str = "path2_traits";

/// The columns of an object-storage request (a row whose `op` is
/// `request`), null in every other row. Such a row is one HTTP exchange a
/// traced process made with a store (S3 and its kin): `ts` is when the
/// request's first byte was sent, `dur_ns` the time to the answer's last
/// byte, `path` the URL (`http://HOST/BUCKET/KEY`, with only the query
/// parameters that say what the request did: a listing's `prefix`, a
/// multipart upload's `uploadId` and `partNumber`, ...),
/// `fd` the socket, `offset` and `size` the byte range asked for (`Range:
/// bytes=A-B`, null for a whole object; a PUT's `size` is its
/// `Content-Length`), and `ret` the body bytes moved (sent plus received).
///
/// - [`COL_METHOD`]: the HTTP method (`GET`, `PUT`, `HEAD`, `POST`, `DELETE`);
/// - [`COL_STATUS`]: the answer's status (null when none came);
/// - [`COL_FIRST_BYTE_NS`]: from the request's start to the answer's first byte;
/// - [`COL_SENT`]: the request's body bytes (headers left out);
/// - [`COL_RECEIVED`]: the answer's body bytes.
pub const COL_METHOD: &str = "method";
pub const COL_STATUS: &str = "status";
pub const COL_FIRST_BYTE_NS: &str = "first_byte_ns";
pub const COL_SENT: &str = "sent";
pub const COL_RECEIVED: &str = "received";

/// Where a row's bytes came from, on traces whose capture watched the page
/// cache (the collector's `capabilities.hooks` names
/// `filemap:mm_filemap_add_to_page_cache`); null elsewhere, never a guess:
///
/// - [`COL_STORAGE_BYTES`]: bytes the storage served for the call: on a
///   `read` row, the page-cache fills the kernel made while the call ran
///   (read-ahead it started included), or every byte read for a file opened
///   `O_DIRECT`; on a `fault` row, the fill itself. 0 on a read the page cache
///   served whole. Read-ahead's fills serve later calls, so a file's or a
///   phase's sum is what the storage served, and a single call's share may
///   exceed its `size`. On a `write`, `fsync` or `fdatasync` row (where the
///   capture watched the block layer), the bytes the call sent to its file's
///   device; on a `writeback` row, the bytes the kernel wrote back later.
/// - [`COL_READAHEAD_BYTES`]: the part of `storage_bytes` beyond the row's
///   own range (`offset` .. `offset + size`), on the same file.
pub const COL_STORAGE_BYTES: &str = "storage_bytes";
pub const COL_READAHEAD_BYTES: &str = "readahead_bytes";

/// The bits of [`COL_PATH_TRAITS`]: each says that one of the name rules of
/// `iorepro-analysis`'s roles held on the original name (spelled
/// canonically). What the directory structure, the numbers in a name, its
/// extension and the /proc, /sys, /dev and /dev/shm prefixes say stays in
/// the anonymized name itself.
pub mod traits {
    /// Under /etc: the system's configuration.
    pub const ETC: i32 = 1;
    /// A launcher's or runtime's file (Open MPI, PMIx, Slurm, torchrun, multiprocessing, NCCL).
    pub const LAUNCHER: i32 = 1 << 1;
    /// Looks like code (Python, shared libraries, site-packages, the system's program trees).
    pub const CODE: i32 = 1 << 2;
    /// Names saved state read back (`.pt`, `.distcp`, a `checkpoint` or `ckpt` in the path).
    pub const CHECKPOINT: i32 = 1 << 3;
    /// Names saved state as a job writes it (the above, `.bin`, `.npz`).
    pub const WRITTEN_CHECKPOINT: i32 = 1 << 4;
    /// A log by its name (`*.log`, `*.log.N`, `*.out`, `*.err`, `stdout`, `stderr`).
    pub const LOG: i32 = 1 << 5;
    /// A text file (`*.txt`).
    pub const TEXT: i32 = 1 << 6;
    /// The format of a run's records (`.json`, `.yaml`, `.csv`, `.toml`, `.txt`).
    pub const RECORD_FORMAT: i32 = 1 << 7;
    /// A record by its name or place (Hydra's `.hydra/`, `outputs/`, `summary.json`, ...).
    pub const RECORD_NAME: i32 = 1 << 8;
}

/// Columns every trace must have, in schema order.
pub const REQUIRED_COLUMNS: [&str; 14] = [
    COL_TS, COL_DUR_NS, COL_HOST, COL_PID, COL_TID, COL_RANK, COL_COMM, COL_OP, COL_PATH, COL_FD,
    COL_OFFSET, COL_SIZE, COL_RET, COL_FLAGS,
];

/// Every column of the canonical schema, in order: the required ones, then
/// those added later, which a trace may lack (readers fill them in: `calls`
/// with 1, the others with nulls).
pub const COLUMNS: [&str; 27] = [
    COL_TS,
    COL_DUR_NS,
    COL_HOST,
    COL_PID,
    COL_TID,
    COL_RANK,
    COL_COMM,
    COL_OP,
    COL_PATH,
    COL_FD,
    COL_OFFSET,
    COL_SIZE,
    COL_RET,
    COL_FLAGS,
    COL_CALLS,
    COL_SPAN_NS,
    COL_PATH2,
    COL_VIA,
    COL_PATH_TRAITS,
    COL_PATH2_TRAITS,
    COL_METHOD,
    COL_STATUS,
    COL_FIRST_BYTE_NS,
    COL_SENT,
    COL_RECEIVED,
    COL_STORAGE_BYTES,
    COL_READAHEAD_BYTES,
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
    pub const CALLS: usize = 14;
    pub const SPAN_NS: usize = 15;
    pub const PATH2: usize = 16;
    pub const VIA: usize = 17;
    pub const PATH_TRAITS: usize = 18;
    pub const PATH2_TRAITS: usize = 19;
    pub const METHOD: usize = 20;
    pub const STATUS: usize = 21;
    pub const FIRST_BYTE_NS: usize = 22;
    pub const SENT: usize = 23;
    pub const RECEIVED: usize = 24;
    pub const STORAGE_BYTES: usize = 25;
    pub const READAHEAD_BYTES: usize = 26;
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
        Field::new(COL_CALLS, DataType::Int64, false),
        Field::new(COL_SPAN_NS, DataType::Int64, true),
        Field::new(COL_PATH2, DataType::Utf8, true),
        Field::new(COL_VIA, dict_type(), true),
        Field::new(COL_PATH_TRAITS, DataType::Int32, true),
        Field::new(COL_PATH2_TRAITS, DataType::Int32, true),
        Field::new(COL_METHOD, dict_type(), true),
        Field::new(COL_STATUS, DataType::Int32, true),
        Field::new(COL_FIRST_BYTE_NS, DataType::Int64, true),
        Field::new(COL_SENT, DataType::Int64, true),
        Field::new(COL_RECEIVED, DataType::Int64, true),
        Field::new(COL_STORAGE_BYTES, DataType::Int64, true),
        Field::new(COL_READAHEAD_BYTES, DataType::Int64, true),
    ])
}

/// The operations a trace row can record. Vectored and positional variants fold
/// into `Read`/`Write` (one row per call, total size, or one row per run).
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
    /// stat, lstat, fstat, newfstatat, statx (a path, or a descriptor's file).
    Stat,
    /// access, faccessat, faccessat2.
    Access,
    Mkdir,
    Rmdir,
    /// A directory listing (getdents64): `size` is the buffer, `ret` the bytes returned.
    Getdents,
    /// A hard link: `path` the existing name, `path2` the new one.
    Link,
    /// A symbolic link: `path` its target as written, `path2` the link.
    Symlink,
    /// An object-storage request over HTTP: `path` is its URL, and the
    /// request columns ([`COL_METHOD`] and those after it) say the rest.
    Request,
    /// Pages of a file the job wrote that the kernel wrote back to its
    /// device later, outside any call of the job's (a save without `fsync`):
    /// `size` and `ret` the bytes, [`COL_STORAGE_BYTES`] too. The pid, tid
    /// and rank are those of the file's last writer; not a call, so never
    /// replayed.
    Writeback,
    /// An op name this version does not know (kept by readers, counted as-is).
    Other,
}

impl Op {
    pub const ALL: [Op; 22] = [
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
        Op::Stat,
        Op::Access,
        Op::Mkdir,
        Op::Rmdir,
        Op::Getdents,
        Op::Link,
        Op::Symlink,
        Op::Request,
        Op::Writeback,
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
            Op::Stat => "stat",
            Op::Access => "access",
            Op::Mkdir => "mkdir",
            Op::Rmdir => "rmdir",
            Op::Getdents => "getdents",
            Op::Link => "link",
            Op::Symlink => "symlink",
            Op::Request => "request",
            Op::Writeback => "writeback",
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

    /// Ops whose positive `ret` is bytes moved between a file and memory:
    /// reads, writes, and page-cache fills of mapped files (faults), which
    /// read the file as surely as a read does. The one definition of "moves
    /// data" for tallies, surveys, plans and records.
    pub fn moves_data(self) -> bool {
        matches!(self, Op::Read | Op::Write | Op::Fault)
    }

    /// Ops whose `ret` counts bytes read by a read call (storage or the page
    /// cache); faults, which the summary reports apart, are not among them.
    pub fn is_read_data(self) -> bool {
        matches!(self, Op::Read)
    }

    pub fn is_write_data(self) -> bool {
        matches!(self, Op::Write)
    }

    /// Ops whose positive `ret` is bytes read from a file: reads and faults
    /// (a fault fills the page cache from the file as a read does). What a
    /// plan counts as a file's reading, its extent and its readers.
    pub fn reads_file(self) -> bool {
        matches!(self, Op::Read | Op::Fault)
    }

    /// Ops that always name a path, never a descriptor alone: the replay
    /// makes them again even when they failed, since a probe for a missing
    /// file is load on the name space all the same.
    pub fn always_names_path(self) -> bool {
        matches!(
            self,
            Op::Open
                | Op::Unlink
                | Op::Rename
                | Op::Access
                | Op::Mkdir
                | Op::Rmdir
                | Op::Link
                | Op::Symlink
        )
    }

    /// Ops that can act on an open descriptor with no path (`fstat`, a
    /// listing of an open directory, data calls, syncs, `ftruncate`,
    /// `close`, `lseek`, `mmap`). Every op but [`Op::Other`] either always
    /// names a path or is one of these.
    pub fn acts_on_descriptor(self) -> bool {
        matches!(
            self,
            Op::Stat
                | Op::Getdents
                | Op::Read
                | Op::Write
                | Op::Fault
                | Op::Fsync
                | Op::Fdatasync
                | Op::Truncate
                | Op::Close
                | Op::Lseek
                | Op::Mmap
        )
    }

    /// Ops that fail on a directory (`EISDIR`): one that succeeds shows its
    /// path is a file.
    pub fn fails_on_directory(self) -> bool {
        matches!(
            self,
            Op::Read | Op::Write | Op::Fault | Op::Truncate | Op::Unlink
        )
    }

    /// Calls that work on the name space rather than on data: what a file
    /// system's metadata server serves. Not `close`, which every data file
    /// pays and which the server of most file systems does not see. What the
    /// summary, the phases and the replay report count as metadata calls.
    pub fn is_metadata(self) -> bool {
        matches!(
            self,
            Op::Open
                | Op::Stat
                | Op::Access
                | Op::Mkdir
                | Op::Rmdir
                | Op::Getdents
                | Op::Unlink
                | Op::Rename
                | Op::Link
                | Op::Symlink
        )
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod op_tests {
    use super::*;

    /// A new op must be placed: it names a path, or acts on a descriptor,
    /// never both (the replay decides by these which failed calls to make).
    /// A request is neither: it names a URL, not a file; nor is the
    /// kernel's write-back, which is no call.
    #[test]
    fn every_known_op_names_a_path_or_acts_on_a_descriptor() {
        for op in Op::ALL {
            let known = !matches!(op, Op::Other | Op::Request | Op::Writeback);
            assert_eq!(
                op.always_names_path() ^ op.acts_on_descriptor(),
                known,
                "{op}"
            );
            assert!(!op.reads_file() || op.moves_data(), "{op}");
        }
    }
}
