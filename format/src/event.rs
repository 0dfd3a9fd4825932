//! One trace row as Rust values, and the builder that turns rows into
//! canonical Arrow batches with typed per-column builders.

use std::sync::Arc;

use arrow_array::builder::{
    Int32Builder, Int64Builder, StringBuilder, StringDictionaryBuilder, TimestampNanosecondBuilder,
};
use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, RecordBatch};

use crate::schema::{trace_schema, Op};

/// A row borrowed from its producer (collector, synth, importer): no allocation per row.
#[derive(Debug, Clone, Copy)]
pub struct EventRow<'a> {
    pub ts_ns: i64,
    pub dur_ns: i64,
    pub host: &'a str,
    pub pid: i32,
    pub tid: i32,
    pub rank: Option<i32>,
    pub comm: &'a str,
    pub op: Op,
    pub path: Option<&'a str>,
    pub fd: Option<i32>,
    pub offset: Option<i64>,
    pub size: Option<i64>,
    pub ret: i64,
    pub flags: Option<i32>,
    /// Syscalls the row stands for: 1, or a run's length (see
    /// [`crate::schema::COL_CALLS`]).
    pub calls: i64,
    /// A run's span; `None` for a single call (it equals `dur_ns`).
    pub span_ns: Option<i64>,
    /// The second path of a rename, link or symlink.
    pub path2: Option<&'a str>,
    /// `Some("io_uring")` for an io_uring request; `None` for a syscall.
    pub via: Option<&'a str>,
    /// What an object-storage request exchanged (op `request` only); by
    /// reference, so that every other row stays as small as it was.
    pub exchange: Option<&'a Exchange<'a>>,
    /// What the storage served of the row (see
    /// [`crate::schema::COL_STORAGE_BYTES`]); `None` where not watched.
    pub from_storage: Option<FromStorage>,
}

/// The bytes the storage served for a row: all of them, and the part that
/// read-ahead brought in beyond the row's own range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FromStorage {
    pub bytes: i64,
    pub read_ahead: i64,
}

/// The columns of an object-storage request row (see
/// [`crate::schema::COL_METHOD`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange<'a> {
    pub method: &'a str,
    /// The answer's HTTP status; `None` when no answer came.
    pub status: Option<i32>,
    /// From the request's first byte sent to the answer's first byte received.
    pub first_byte_ns: Option<i64>,
    /// The request's body bytes.
    pub sent: i64,
    /// The answer's body bytes.
    pub received: i64,
}

/// What a row's names said before they were anonymized (see
/// [`crate::schema::COL_PATH_TRAITS`]): `None` where the names are as
/// captured, which is every row but those of an anonymized trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowTraits {
    pub path: Option<i32>,
    pub path2: Option<i32>,
}

/// A row that owns its paths, for producers that hold rows before writing
/// them: the collector in its reorder window, the strace import and
/// synthetic traces while they sort. `P` owns a path (`String`, `Rc<str>`);
/// the host and the command name, the same for many rows, are lent when the
/// row is written ([`OwnedRow::as_event`]).
#[derive(Debug, Clone)]
pub struct OwnedRow<P> {
    pub ts_ns: i64,
    pub dur_ns: i64,
    pub pid: i32,
    pub tid: i32,
    pub rank: Option<i32>,
    pub op: Op,
    pub path: Option<P>,
    pub fd: Option<i32>,
    pub offset: Option<i64>,
    pub size: Option<i64>,
    pub ret: i64,
    pub flags: Option<i32>,
    pub calls: i64,
    pub span_ns: Option<i64>,
    pub path2: Option<P>,
    pub via: Option<&'static str>,
    /// Boxed: rows wait in the collector's reorder window, and few are requests.
    pub exchange: Option<Box<Exchange<'static>>>,
    pub from_storage: Option<FromStorage>,
}

impl<P: AsRef<str>> OwnedRow<P> {
    /// The row as the writer takes it, with its host and command name.
    pub fn as_event<'a>(&'a self, host: &'a str, comm: &'a str) -> EventRow<'a> {
        EventRow {
            ts_ns: self.ts_ns,
            dur_ns: self.dur_ns,
            host,
            pid: self.pid,
            tid: self.tid,
            rank: self.rank,
            comm,
            op: self.op,
            path: self.path.as_ref().map(AsRef::as_ref),
            fd: self.fd,
            offset: self.offset,
            size: self.size,
            ret: self.ret,
            flags: self.flags,
            calls: self.calls,
            span_ns: self.span_ns,
            path2: self.path2.as_ref().map(AsRef::as_ref),
            via: self.via,
            exchange: self.exchange.as_deref(),
            from_storage: self.from_storage,
        }
    }
}

impl EventRow<'_> {
    /// A single call (not a run) with nothing but the columns every row has;
    /// producers fill in the rest with struct update syntax.
    pub fn single<'a>(ts_ns: i64, host: &'a str, comm: &'a str, op: Op) -> EventRow<'a> {
        EventRow {
            ts_ns,
            dur_ns: 0,
            host,
            pid: 0,
            tid: 0,
            rank: None,
            comm,
            op,
            path: None,
            fd: None,
            offset: None,
            size: None,
            ret: 0,
            flags: None,
            calls: 1,
            span_ns: None,
            path2: None,
            via: None,
            exchange: None,
            from_storage: None,
        }
    }
}

/// Accumulates rows into one Arrow batch of the canonical schema.
pub struct EventBatchBuilder {
    ts: TimestampNanosecondBuilder,
    dur_ns: Int64Builder,
    host: StringDictionaryBuilder<Int32Type>,
    pid: Int32Builder,
    tid: Int32Builder,
    rank: Int32Builder,
    comm: StringBuilder,
    op: StringDictionaryBuilder<Int32Type>,
    path: StringBuilder,
    fd: Int32Builder,
    offset: Int64Builder,
    size: Int64Builder,
    ret: Int64Builder,
    flags: Int32Builder,
    calls: Int64Builder,
    span_ns: Int64Builder,
    path2: StringBuilder,
    via: StringDictionaryBuilder<Int32Type>,
    path_traits: Int32Builder,
    path2_traits: Int32Builder,
    method: StringDictionaryBuilder<Int32Type>,
    status: Int32Builder,
    first_byte_ns: Int64Builder,
    sent: Int64Builder,
    received: Int64Builder,
    storage_bytes: Int64Builder,
    readahead_bytes: Int64Builder,
    rows: usize,
    sorted: bool,
    last_ts: i64,
}

impl EventBatchBuilder {
    pub fn with_capacity(rows: usize) -> Self {
        EventBatchBuilder {
            ts: TimestampNanosecondBuilder::with_capacity(rows).with_timezone("UTC"),
            dur_ns: Int64Builder::with_capacity(rows),
            host: StringDictionaryBuilder::new(),
            pid: Int32Builder::with_capacity(rows),
            tid: Int32Builder::with_capacity(rows),
            rank: Int32Builder::with_capacity(rows),
            comm: StringBuilder::with_capacity(rows, rows * 8),
            op: StringDictionaryBuilder::new(),
            path: StringBuilder::with_capacity(rows, rows * 32),
            fd: Int32Builder::with_capacity(rows),
            offset: Int64Builder::with_capacity(rows),
            size: Int64Builder::with_capacity(rows),
            ret: Int64Builder::with_capacity(rows),
            flags: Int32Builder::with_capacity(rows),
            calls: Int64Builder::with_capacity(rows),
            span_ns: Int64Builder::with_capacity(rows),
            path2: StringBuilder::new(),
            via: StringDictionaryBuilder::new(),
            path_traits: Int32Builder::new(),
            path2_traits: Int32Builder::new(),
            method: StringDictionaryBuilder::new(),
            status: Int32Builder::new(),
            first_byte_ns: Int64Builder::new(),
            sent: Int64Builder::new(),
            received: Int64Builder::new(),
            storage_bytes: Int64Builder::new(),
            readahead_bytes: Int64Builder::new(),
            rows: 0,
            sorted: true,
            last_ts: i64::MIN,
        }
    }

    pub fn push(&mut self, e: &EventRow<'_>) {
        self.push_with_traits(e, RowTraits::default());
    }

    /// A row of an anonymized trace: its names hashed, what they said in `t`.
    pub fn push_with_traits(&mut self, e: &EventRow<'_>, t: RowTraits) {
        self.ts.append_value(e.ts_ns);
        self.dur_ns.append_value(e.dur_ns);
        self.host.append_value(e.host);
        self.pid.append_value(e.pid);
        self.tid.append_value(e.tid);
        self.rank.append_option(e.rank);
        self.comm.append_value(e.comm);
        self.op.append_value(e.op.as_str());
        self.path.append_option(e.path);
        self.fd.append_option(e.fd);
        self.offset.append_option(e.offset);
        self.size.append_option(e.size);
        self.ret.append_value(e.ret);
        self.flags.append_option(e.flags);
        self.calls.append_value(e.calls.max(1));
        self.span_ns
            .append_option(e.span_ns.filter(|s| e.calls > 1 || *s != e.dur_ns));
        self.path2.append_option(e.path2);
        self.via.append_option(e.via);
        self.path_traits.append_option(t.path);
        self.path2_traits.append_option(t.path2);
        let x = e.exchange;
        self.method.append_option(x.map(|x| x.method));
        self.status.append_option(x.and_then(|x| x.status));
        self.first_byte_ns
            .append_option(x.and_then(|x| x.first_byte_ns));
        self.sent.append_option(x.map(|x| x.sent));
        self.received.append_option(x.map(|x| x.received));
        let f = e.from_storage;
        self.storage_bytes.append_option(f.map(|f| f.bytes));
        self.readahead_bytes.append_option(f.map(|f| f.read_ahead));
        self.rows += 1;
        self.sorted &= e.ts_ns >= self.last_ts;
        self.last_ts = e.ts_ns;
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// True while the rows pushed since the last `finish` are in `ts` order.
    pub fn is_sorted(&self) -> bool {
        self.sorted
    }

    /// Takes the rows pushed so far as a batch and starts over.
    pub fn finish(&mut self) -> RecordBatch {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.ts.finish()),
            Arc::new(self.dur_ns.finish()),
            Arc::new(self.host.finish()),
            Arc::new(self.pid.finish()),
            Arc::new(self.tid.finish()),
            Arc::new(self.rank.finish()),
            Arc::new(self.comm.finish()),
            Arc::new(self.op.finish()),
            Arc::new(self.path.finish()),
            Arc::new(self.fd.finish()),
            Arc::new(self.offset.finish()),
            Arc::new(self.size.finish()),
            Arc::new(self.ret.finish()),
            Arc::new(self.flags.finish()),
            Arc::new(self.calls.finish()),
            Arc::new(self.span_ns.finish()),
            Arc::new(self.path2.finish()),
            Arc::new(self.via.finish()),
            Arc::new(self.path_traits.finish()),
            Arc::new(self.path2_traits.finish()),
            Arc::new(self.method.finish()),
            Arc::new(self.status.finish()),
            Arc::new(self.first_byte_ns.finish()),
            Arc::new(self.sent.finish()),
            Arc::new(self.received.finish()),
            Arc::new(self.storage_bytes.finish()),
            Arc::new(self.readahead_bytes.finish()),
        ];
        self.rows = 0;
        self.sorted = true;
        self.last_ts = i64::MIN;
        RecordBatch::try_new(trace_schema(), columns).expect("builder columns match the schema")
    }
}
