//! Columns as the trace schema has them, whatever wrote the file: which
//! of a segment's columns hold each canonical column (or that it is
//! absent), and each column cast to its canonical type, so analysis code
//! sees one set of types (see [`crate::reader`] for what is accepted).

use std::path::Path;
use std::sync::Arc;

use arrow_array::{new_null_array, Array, ArrayRef, RecordBatch};
use arrow_cast::{cast_with_options, CastOptions};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::error::{TraceError, TraceResult};
use crate::schema::{dict_type, idx, trace_schema, COLUMNS, COL_CALLS, COL_PATH, REQUIRED_COLUMNS};

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

/// The file's schema with `path` asked for as a dictionary, when it is a
/// plain string column (Parquet then hands over its dictionary pages as they
/// are, instead of copying each row's string out of them).
pub(crate) fn path_as_dictionary(schema: &Schema) -> Option<Arc<Schema>> {
    let at = schema.index_of(COL_PATH).ok()?;
    if schema.field(at).data_type() != &DataType::Utf8 {
        return None;
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if i == at {
                f.as_ref().clone().with_data_type(dict_type())
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    Some(Arc::new(Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    )))
}

/// The batch in the canonical schema: `projection`'s columns (all when
/// `None`) cast to their canonical types, the others all null; with
/// `path_keys`, `path` as a dictionary (see [`crate::TraceReader::with_path_keys`]).
pub(crate) fn normalise(
    path: &Path,
    batch: &RecordBatch,
    projection: Option<&[usize]>,
    path_keys: bool,
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
        let keyed;
        let field = if path_keys && i == idx::PATH {
            keyed = field.as_ref().clone().with_data_type(dict_type());
            &keyed
        } else {
            field.as_ref()
        };
        let arr = normalise_column(path, field, src)?;
        cols.push(arr);
        fields.push(
            field
                .clone()
                .with_nullable(projection.is_some() || field.is_nullable()),
        );
    }
    let schema = if projection.is_some() || path_keys {
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
