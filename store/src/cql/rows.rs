//! The values that cross the wire: bind values out, result rows in.
//!
//! Binds follow the encoding the local endpoint expects too: TTL as
//! `int` seconds with 0 for none, timestamps as `bigint` microseconds,
//! LIMIT as `int`. Rows are decoded with every column nullable, so nothing a
//! server sends can panic the decoder.

use std::num::NonZeroU32;
use std::time::Duration;

use scylla::response::query_result::QueryResult;

use crate::cell::{Cell, CellWrite, OpKind, Table, Timestamp, WriteOptions};
use crate::error::{StoreError, StoreErrorKind};

/// A `SELECT column_name, value, writetime(value), ttl(value)` row as the
/// driver decodes it: every column nullable, so a malformed row is an error
/// rather than a panic.
pub(super) type CellRow = (String, Option<Vec<u8>>, Option<i64>, Option<i32>);

/// Checks and converts one row. A null `value` or `writetime` cannot come
/// from lockshift's own writes (every INSERT binds a value); it means someone
/// else wrote the row, and guessing would be worse than refusing.
pub(super) fn cell_from_row(row: CellRow) -> Result<Cell, String> {
    let (column, value, writetime, ttl) = row;
    let value = value.ok_or_else(|| format!("column {column:?} has a null value"))?;
    let writetime = writetime.ok_or_else(|| format!("column {column:?} has no writetime"))?;
    let ttl = match ttl {
        None => None,
        Some(secs) => Some(Duration::from_secs(u64::try_from(secs).map_err(|_| {
            format!("column {column:?} reports a negative ttl ({secs})")
        })?)),
    };
    Ok(Cell {
        column,
        value,
        writetime: Timestamp::from_micros(writetime),
        ttl,
    })
}

/// Decodes every row of a result as `R`; wrong column types, a non-rows
/// result or undecodable bytes are [`StoreErrorKind::Invalid`].
pub(super) fn decode_rows<R>(
    result: QueryResult,
    op: OpKind,
    table: Option<Table>,
) -> Result<Vec<R>, StoreError>
where
    R: for<'frame, 'metadata> scylla::deserialize::row::DeserializeRow<'frame, 'metadata>,
{
    let invalid = |what: String| StoreError::new(StoreErrorKind::Invalid, op, table, what);
    let rows = result
        .into_rows_result()
        .map_err(|e| invalid(format!("expected rows: {e}")))?;
    let iter = rows
        .rows::<R>()
        .map_err(|e| invalid(format!("unexpected result columns: {e}")))?;
    iter.map(|row| row.map_err(|e| invalid(format!("undecodable row: {e}"))))
        .collect()
}

/// The `USING TTL ?` bind: seconds, 0 for none (CQL's "no TTL").
pub(super) fn ttl_bind(options: &WriteOptions) -> i32 {
    // Ttl::MAX_SECS (20 years) is far below i32::MAX.
    options
        .ttl
        .map_or(0, |t| i32::try_from(t.as_secs()).unwrap_or(i32::MAX))
}

/// The `LIMIT ?` bind: CQL's int, so a larger limit reads as "everything".
pub(super) fn limit_bind(limit: Option<NonZeroU32>) -> i32 {
    limit.map_or(i32::MAX, |n| i32::try_from(n.get()).unwrap_or(i32::MAX))
}

/// INSERT binds: row_key, column_name, value, ttl, timestamp.
pub(super) fn insert_values<'a>(
    row: &'a str,
    cell: &'a CellWrite,
    ttl: i32,
    timestamp: i64,
) -> (&'a str, &'a str, &'a [u8], i32, i64) {
    (row, &cell.column, &cell.value, ttl, timestamp)
}

/// DELETE binds: timestamp, row_key, column_name.
pub(super) fn delete_values<'a>(
    timestamp: i64,
    row: &'a str,
    column: &'a str,
) -> (i64, &'a str, &'a str) {
    (timestamp, row, column)
}
