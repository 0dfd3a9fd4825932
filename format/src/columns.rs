//! Typed access to a batch of the canonical schema. The reader guarantees the
//! types, so accessors downcast without checks that could fail at run time.

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, DictionaryArray, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampNanosecondArray,
};

use arrow_schema::{DataType, Field, Schema};

use crate::runs::{calls_in, span_in, Run};
use crate::schema::{idx, Op};

/// One batch of trace rows in the canonical schema.
#[derive(Debug, Clone)]
pub struct Events {
    batch: RecordBatch,
}

impl Events {
    /// Wraps a batch that has the canonical schema (from the reader or the builder).
    pub fn new(batch: RecordBatch) -> Self {
        debug_assert_eq!(batch.num_columns(), crate::schema::COLUMNS.len());
        Events { batch }
    }

    pub fn batch(&self) -> &RecordBatch {
        &self.batch
    }

    pub fn into_batch(self) -> RecordBatch {
        self.batch
    }

    pub fn len(&self) -> usize {
        self.batch.num_rows()
    }

    pub fn is_empty(&self) -> bool {
        self.batch.num_rows() == 0
    }

    pub fn ts(&self) -> &TimestampNanosecondArray {
        self.batch.column(idx::TS).as_primitive()
    }
    pub fn dur_ns(&self) -> &Int64Array {
        self.batch.column(idx::DUR_NS).as_primitive()
    }
    pub fn host(&self) -> &DictionaryArray<Int32Type> {
        self.batch.column(idx::HOST).as_dictionary()
    }
    pub fn pid(&self) -> &Int32Array {
        self.batch.column(idx::PID).as_primitive()
    }
    pub fn tid(&self) -> &Int32Array {
        self.batch.column(idx::TID).as_primitive()
    }
    pub fn rank(&self) -> &Int32Array {
        self.batch.column(idx::RANK).as_primitive()
    }
    pub fn comm(&self) -> &StringArray {
        self.batch.column(idx::COMM).as_string()
    }
    pub fn op_dict(&self) -> &DictionaryArray<Int32Type> {
        self.batch.column(idx::OP).as_dictionary()
    }
    /// The paths, one string per row. Not for a batch read with
    /// [`crate::TraceReader::with_path_keys`] (see [`Events::path_keys`]).
    pub fn path(&self) -> &StringArray {
        self.batch.column(idx::PATH).as_string()
    }
    /// The same rows with `path` as one string per row, as
    /// [`crate::EventBatchBuilder`] makes them (to be mixed with built rows).
    pub fn with_plain_paths(self) -> Result<Events, arrow_schema::ArrowError> {
        if self.path_keys().is_none() {
            return Ok(self);
        }
        let plain = arrow_cast::cast(self.batch.column(idx::PATH), &DataType::Utf8)?;
        let schema = self.batch.schema();
        let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields[idx::PATH] = fields[idx::PATH].clone().with_data_type(DataType::Utf8);
        let mut columns = self.batch.columns().to_vec();
        columns[idx::PATH] = plain;
        let schema = Schema::new_with_metadata(fields, schema.metadata().clone());
        RecordBatch::try_new(Arc::new(schema), columns).map(Events::new)
    }
    /// The paths as a dictionary, when the batch was read with
    /// [`crate::TraceReader::with_path_keys`].
    pub fn path_keys(&self) -> Option<&DictionaryArray<Int32Type>> {
        self.batch.column(idx::PATH).as_dictionary_opt()
    }
    pub fn fd(&self) -> &Int32Array {
        self.batch.column(idx::FD).as_primitive()
    }
    pub fn offset(&self) -> &Int64Array {
        self.batch.column(idx::OFFSET).as_primitive()
    }
    pub fn size(&self) -> &Int64Array {
        self.batch.column(idx::SIZE).as_primitive()
    }
    pub fn ret(&self) -> &Int64Array {
        self.batch.column(idx::RET).as_primitive()
    }
    pub fn flags(&self) -> &Int32Array {
        self.batch.column(idx::FLAGS).as_primitive()
    }
    /// Syscalls each row stands for (see [`crate::schema::COL_CALLS`]).
    pub fn calls(&self) -> &Int64Array {
        self.batch.column(idx::CALLS).as_primitive()
    }
    pub fn span_ns(&self) -> &Int64Array {
        self.batch.column(idx::SPAN_NS).as_primitive()
    }

    pub fn path2(&self) -> &StringArray {
        self.batch.column(idx::PATH2).as_string()
    }

    pub fn path2_at(&self, row: usize) -> Option<&str> {
        let p = self.path2();
        p.is_valid(row).then(|| p.value(row))
    }

    pub fn via(&self) -> &DictionaryArray<Int32Type> {
        self.batch.column(idx::VIA).as_dictionary()
    }

    /// What the names of each row said before they were anonymized (null
    /// where they are as captured; see [`crate::schema::COL_PATH_TRAITS`]).
    pub fn path_traits(&self) -> &Int32Array {
        self.batch.column(idx::PATH_TRAITS).as_primitive()
    }

    pub fn path2_traits(&self) -> &Int32Array {
        self.batch.column(idx::PATH2_TRAITS).as_primitive()
    }

    /// What the storage served of each row (see
    /// [`crate::schema::COL_STORAGE_BYTES`]): null where the capture did not
    /// watch the page cache, or the row is not a read or a fill.
    pub fn storage_bytes(&self) -> &Int64Array {
        self.batch.column(idx::STORAGE_BYTES).as_primitive()
    }

    pub fn readahead_bytes(&self) -> &Int64Array {
        self.batch.column(idx::READAHEAD_BYTES).as_primitive()
    }

    /// What the storage served of the row, where the trace says.
    pub fn from_storage_at(&self, row: usize) -> Option<crate::event::FromStorage> {
        let (bytes, ahead) = (self.storage_bytes(), self.readahead_bytes());
        bytes.is_valid(row).then(|| crate::event::FromStorage {
            bytes: bytes.value(row),
            read_ahead: Self::opt_i64(ahead, row).unwrap_or(0),
        })
    }

    /// What a request row exchanged (see [`crate::schema::COL_METHOD`]);
    /// `None` for every other row.
    pub fn exchange_at(&self, row: usize) -> Option<crate::event::Exchange<'_>> {
        let method = self.batch.column(idx::METHOD).as_dictionary::<Int32Type>();
        if !method.is_valid(row) {
            return None;
        }
        let names: &StringArray = method.values().as_string();
        let int = |i: usize| -> &Int64Array { self.batch.column(i).as_primitive() };
        let status: &Int32Array = self.batch.column(idx::STATUS).as_primitive();
        let first_byte = int(idx::FIRST_BYTE_NS);
        Some(crate::event::Exchange {
            method: names.value(method.keys().value(row) as usize),
            status: status.is_valid(row).then(|| status.value(row)),
            first_byte_ns: first_byte.is_valid(row).then(|| first_byte.value(row)),
            sent: int(idx::SENT).value(row),
            received: int(idx::RECEIVED).value(row),
        })
    }

    /// How a row's call was made: null for a plain syscall (see
    /// [`crate::schema::COL_VIA`]).
    pub fn via_at(&self, row: usize) -> Option<&str> {
        let via = self.via();
        via.is_valid(row).then(|| {
            let names: &StringArray = via.values().as_string();
            names.value(via.keys().value(row) as usize)
        })
    }

    /// Whether a row is an io_uring request (not a syscall).
    pub fn via_io_uring(&self, row: usize) -> bool {
        let via = self.via();
        via.is_valid(row) && {
            let names: &StringArray = via.values().as_string();
            names.value(via.keys().value(row) as usize) == crate::schema::VIA_IO_URING
        }
    }

    /// How many calls a row stands for: at least 1 (a projection that left
    /// the column out reads as nulls, which mean 1).
    pub fn calls_at(&self, row: usize) -> i64 {
        calls_in(self.calls(), row)
    }

    /// From a row's start to the end of its last call.
    pub fn span_at(&self, row: usize) -> i64 {
        span_in(self.span_ns(), self.dur_ns().values(), row)
    }

    /// The op of every row, decoded once per dictionary value rather than per row.
    pub fn ops(&self) -> Vec<Op> {
        let dict = self.op_dict();
        let names: &StringArray = dict.values().as_string();
        let table: Vec<Op> = (0..names.len())
            .map(|i| Op::parse(names.value(i)))
            .collect();
        dict.keys()
            .values()
            .iter()
            .map(|&k| table[k as usize])
            .collect()
    }

    pub fn op(&self, row: usize) -> Op {
        let dict = self.op_dict();
        let names: &StringArray = dict.values().as_string();
        Op::parse(names.value(dict.keys().value(row) as usize))
    }

    /// The host of one row.
    pub fn host_at(&self, row: usize) -> &str {
        let dict = self.host();
        let names: &StringArray = dict.values().as_string();
        names.value(dict.keys().value(row) as usize)
    }

    /// Distinct host names in this batch's dictionary.
    pub fn host_values(&self) -> impl Iterator<Item = &str> {
        let names: &StringArray = self.host().values().as_string();
        (0..names.len())
            .filter(|&i| names.is_valid(i))
            .map(move |i| names.value(i))
    }

    #[inline]
    pub fn opt_i32(a: &Int32Array, row: usize) -> Option<i32> {
        a.is_valid(row).then(|| a.value(row))
    }

    #[inline]
    pub fn opt_i64(a: &Int64Array, row: usize) -> Option<i64> {
        a.is_valid(row).then(|| a.value(row))
    }

    pub fn path_at(&self, row: usize) -> Option<&str> {
        if let Some(d) = self.path_keys() {
            let keys = d.keys();
            let names: &StringArray = d.values().as_string();
            return keys
                .is_valid(row)
                .then(|| names.value(keys.value(row) as usize));
        }
        let p = self.path();
        p.is_valid(row).then(|| p.value(row))
    }
}

/// What a consumer works out from a path (an id, a role), kept per entry of
/// the batches' path dictionary: each distinct path of a dictionary is
/// looked at once, however many rows name it, and the entries stay while
/// batches share the dictionary (Parquet hands one over per row group).
/// Batches with a path per row are worked out row by row.
#[derive(Debug)]
pub struct PerPath<T> {
    dictionary: Option<ArrayRef>,
    known: Vec<Option<T>>,
}

impl<T: Copy> Default for PerPath<T> {
    fn default() -> Self {
        PerPath {
            dictionary: None,
            known: Vec::new(),
        }
    }
}

impl<T: Copy> PerPath<T> {
    /// `work(path)` for row `row`'s path; `None` for a row without one.
    #[inline]
    pub fn get(&mut self, ev: &Events, row: usize, work: impl FnOnce(&str) -> T) -> Option<T> {
        let Some(d) = ev.path_keys() else {
            return ev.path_at(row).map(work);
        };
        if !d.keys().is_valid(row) {
            return None;
        }
        if !self
            .dictionary
            .as_ref()
            .is_some_and(|known| Arc::ptr_eq(known, d.values()))
        {
            self.known.clear();
            self.known.resize(d.values().len(), None);
            self.dictionary = Some(d.values().clone());
        }
        let key = d.keys().value(row) as usize;
        if let Some(done) = self.known[key] {
            return Some(done);
        }
        let names: &StringArray = d.values().as_string();
        let done = work(names.value(key));
        self.known[key] = Some(done);
        Some(done)
    }
}

impl Run {
    /// Row `row` of `ev`. (Here rather than in `runs`, so the rules for a
    /// run know nothing of batches.)
    pub fn of(ev: &Events, row: usize) -> Run {
        Run {
            ts_ns: ev.ts().value(row),
            dur_ns: ev.dur_ns().value(row),
            span_ns: ev.span_at(row),
            calls: ev.calls_at(row),
            offset: Events::opt_i64(ev.offset(), row),
            size: Events::opt_i64(ev.size(), row),
            ret: ev.ret().value(row),
        }
    }
}
