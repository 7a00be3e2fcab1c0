//! The values that cross the wire: bind values out, result rows in.
//!
//! Binds follow the encoding the local endpoint expects too: TTL as
//! `int` seconds with 0 for none, timestamps as `bigint` microseconds,
//! LIMIT as `int`. Rows are decoded with every column nullable, so nothing a
//! server sends can panic the decoder.
//!
//! # A row is not always a cell
//!
//! A lockshift cell is one CQL row, `(row_key, column_name) → value`; an
//! `INSERT` writes the row's marker (its primary key's liveness) beside
//! the value cell, with the same timestamp and TTL. The two are judged
//! apart, and a row can outlive its value: `INSERT` then `DELETE value
//! FROM …` leaves it on one node, and on a cluster it happens with no
//! delete at all when nodes' clocks differ (the marker and the cell of
//! two writes reconciled and expired on different clocks — seen with
//! one node 3 s ahead). Such a row comes back with a null `value` (and a
//! null `writetime(value)`). It holds no value, so it is no cell: it is
//! left out of every read ([`decode_rows`], [`ResultRow`]), exactly as a
//! deleted or expired cell is — refusing the whole read would let one such
//! row make a lock, `migrate inspect` and the fleet's `migrate status`
//! unreadable until the marker expires (issue 31).
//!
//! What the server still counts is the row: it takes a place within a
//! `LIMIT`, so a limited read can return fewer live cells than there are
//! up to its limit. Reads that judge a lock by what is *absent* therefore
//! read the whole row (the lock algorithms' reads of `main` and `shadow`);
//! a read of one named column (`LIMIT 1` from that column) is not misled —
//! the null row *is* the column, and it is gone.

use std::num::NonZeroU32;
use std::time::Duration;

use scylla::response::query_result::QueryResult;

use crate::cell::{Cell, CellWrite, OpKind, Table, Timestamp, WriteOptions};
use crate::error::{StoreError, StoreErrorKind};

/// A `SELECT column_name, value, writetime(value), ttl(value)` row as the
/// driver decodes it: every column nullable, so a malformed row is an error
/// rather than a panic.
pub(super) type CellRow = (String, Option<Vec<u8>>, Option<i64>, Option<i32>);

/// What [`decode_rows`] keeps of a result: a row that holds what the read
/// asked for. The default keeps every row.
pub(super) trait ResultRow {
    /// Whether the row is kept: a cell row only with its value (see the
    /// module docs, "A row is not always a cell").
    fn holds_a_cell(&self) -> bool {
        true
    }
}

impl ResultRow for CellRow {
    fn holds_a_cell(&self) -> bool {
        self.1.is_some()
    }
}

/// A cell as a scan of cells returns it: the partition's token and key,
/// then the cell row.
pub(super) type ScannedCell = (
    i64,
    String,
    String,
    Option<Vec<u8>>,
    Option<i64>,
    Option<i32>,
);

impl ResultRow for ScannedCell {
    fn holds_a_cell(&self) -> bool {
        self.3.is_some()
    }
}

/// The coordinator's clock (`toUnixTimestamp(now())`).
impl ResultRow for (i64,) {}

/// A row key (the key scan) or a name (a schema lookup).
impl ResultRow for (String,) {}

/// A table's name and one of its columns' (a schema lookup).
impl ResultRow for (String, String) {}

/// Checks and converts one row. A row without its value never gets here
/// ([`decode_rows`] leaves it out: no cell); a value without a `writetime`,
/// or a negative TTL, cannot come from Cassandra, and guessing would be
/// worse than refusing.
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

/// Decodes every row of a result as `R`, leaving out rows that hold no cell
/// ([`ResultRow::holds_a_cell`]: a row marker whose value is gone); wrong
/// column types, a non-rows result or undecodable bytes are
/// [`StoreErrorKind::Invalid`].
pub(super) fn decode_rows<R>(
    result: QueryResult,
    op: OpKind,
    table: Option<Table>,
) -> Result<Vec<R>, StoreError>
where
    R: for<'frame, 'metadata> scylla::deserialize::row::DeserializeRow<'frame, 'metadata>
        + ResultRow,
{
    let invalid = |what: String| StoreError::new(StoreErrorKind::Invalid, op, table, what);
    let rows = result
        .into_rows_result()
        .map_err(|e| invalid(format!("expected rows: {e}")))?;
    let iter = rows
        .rows::<R>()
        .map_err(|e| invalid(format!("unexpected result columns: {e}")))?;
    let decoded: Vec<R> = iter
        .map(|row| row.map_err(|e| invalid(format!("undecodable row: {e}"))))
        .collect::<Result<_, _>>()?;
    Ok(cells_only(decoded))
}

/// The rows of `rows` that hold a cell, in order.
pub(super) fn cells_only<R: ResultRow>(rows: Vec<R>) -> Vec<R> {
    rows.into_iter().filter(ResultRow::holds_a_cell).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 31 item 4a: a row whose value cell is gone (its row marker
    /// outlived it: `INSERT`, then `DELETE value FROM …`, or two nodes'
    /// clocks apart) is no cell — left out, not an error that fails the
    /// whole read — and the rows beside it are kept, in order.
    #[test]
    fn a_row_without_its_value_is_no_cell() {
        let row = |c: &str, v: Option<&[u8]>| -> CellRow {
            let writetime = v.map(|_| 42);
            (c.to_string(), v.map(<[u8]>::to_vec), writetime, None)
        };
        // (rows, the columns kept)
        let cases: [(Vec<CellRow>, &[&str]); 4] = [
            (vec![row("a", None)], &[]),
            (
                vec![row("a", Some(b"v")), row("b", None), row("c", Some(b""))],
                &["a", "c"],
            ),
            (
                vec![row("a", None), row("b", None), row("z", Some(b"h"))],
                &["z"],
            ),
            (vec![], &[]),
        ];
        for (i, (rows, want)) in cases.into_iter().enumerate() {
            let kept = cells_only(rows);
            let columns: Vec<&str> = kept.iter().map(|r| r.0.as_str()).collect();
            assert_eq!(columns, want, "case #{i}");
            for r in kept {
                cell_from_row(r).unwrap_or_else(|e| panic!("case #{i}: {e}"));
            }
        }
        // Keys and names are always kept.
        let keys = cells_only(vec![("k".to_string(),)]);
        assert_eq!(keys, [("k".to_string(),)]);
    }
}
