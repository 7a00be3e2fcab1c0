//! What a SELECT costs in tombstones, counted as Cassandra 4.1 counts them
//! (`ReadCommand`'s metric recording, measured on 4.1.1: see
//! `lockshift_store::tombstones`), and the warning or failure it earns.
//!
//! # Invariants
//!
//! 1. **What counts.** Per row visited: each dead cell that is not yet
//!    purgeable counts one; a row without live data and without such a cell
//!    counts one if it carries a row deletion or an expired row marker not
//!    yet purgeable (Cassandra counts "primary key deletions" once). A
//!    lockshift cell — a CQL row whose marker and `value` share timestamp
//!    and TTL — deleted or expired counts exactly one. Each range tombstone
//!    in the walked span counts its opening bound, and its closing bound
//!    when the walk reaches it (Cassandra counts range tombstone markers;
//!    overlapping ranges, which Cassandra turns into boundary markers, are
//!    counted per range here). Partition deletions do not count.
//! 2. **Purgeable is gone.** A version whose local deletion time is more
//!    than the table's `gc_grace_seconds` in the past (whole seconds,
//!    `lockshift_store::reconcile::purge_time`) does not count: Cassandra
//!    drops it from the read before counting.
//! 3. **Where counting stops.** Rows are counted as they are visited, in
//!    clustering order from the start of the slice, until the LIMIT (or the
//!    page) has its live rows: never the rows after the last one returned,
//!    not even the row the endpoint looks at to know whether another page
//!    follows.
//! 4. **One command, one count.** A partition key `=` / `IN` reads each
//!    partition as its own command (its own count and warning, as Cassandra
//!    runs one single-partition command per key); a partition scan counts
//!    one page across every partition it visits, each up to its first live
//!    row for `DISTINCT`.
//! 5. **Warn, fail.** A count above the warn threshold adds Cassandra's
//!    warning (`lockshift_store::tombstones::warning_text`, with
//!    Cassandra's rendering of the command, [`command_cql`]) to the
//!    response; above the failure threshold the request fails with
//!    `READ_FAILURE` (0x1300) and the v4 fields Cassandra 4.1.1 sends for
//!    one replica: the request's consistency, 0 received, block-for 1, 1
//!    failure, no data, and the message naming `READ_TOO_MANY_TOMBSTONES`.
//!    System keyspaces and the fault table are exempt, as Cassandra exempts
//!    its local system keyspaces.

use std::fmt::Write as _;
use std::time::Duration;

use lockshift_store::Timestamp;
use lockshift_store::reconcile::CellVersion;
use lockshift_store::tombstones::{self, TombstoneThresholds};

use crate::engine::bind::Bound as Values;
use crate::engine::compile::{ClusteringSel, OutputKind, PartitionSel, SelectPlan};
use crate::engine::data::{Clustering, Partition, PartitionKey, RangeTombstone, Row};
use crate::engine::schema::{ColumnKind, TableSchema};
use crate::error::{CqlError, ErrorKind};
use crate::parse::ast::Op;
use crate::types::CqlType;
use crate::wire::Value;

/// How a SELECT is charged: the thresholds, and what the failure names.
#[derive(Clone, Debug)]
pub(crate) struct Charging {
    pub(crate) thresholds: TombstoneThresholds,
    /// `address:storage_port` of this node, as Cassandra names the replica.
    pub(crate) replica: String,
    /// The request's consistency, echoed in `READ_FAILURE`.
    pub(crate) consistency: u16,
}

/// One command's running count.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Count {
    pub(crate) live_rows: u64,
    pub(crate) tombstones: u64,
}

/// Invariants 1–2 for one row: the tombstones it costs at `now`.
pub(crate) fn row_tombstones(row: &Row, now: Timestamp, grace: Duration) -> u64 {
    let counts = |v: &CellVersion| !v.is_live(now) && !v.is_purgeable(now, grace);
    let dead_cells = row.cells.values().filter(|c| counts(c)).count() as u64;
    if dead_cells > 0 || row.is_live(now) {
        return dead_cells;
    }
    let deleted = row.deletion.is_some_and(|d| !d.purgeable(now, grace));
    let expired_marker = row.marker.as_ref().is_some_and(counts);
    u64::from(deleted || expired_marker)
}

/// Invariant 1 for range tombstones: the markers of the non-purgeable ranges that
/// overlap the walked span `[from, to]` (storage order); a range's far
/// bound counts only if it lies in the span or the walk finished the
/// slice.
pub(crate) fn range_markers(
    ranges: &[RangeTombstone],
    from: &Clustering,
    to: &Clustering,
    finished: bool,
    reversed: bool,
    now: Timestamp,
    grace: Duration,
) -> u64 {
    ranges
        .iter()
        .filter(|rt| !rt.deletion.purgeable(now, grace))
        .filter(|rt| &rt.start <= to && from <= &rt.end)
        .map(|rt| {
            let far_inside = if reversed {
                from <= &rt.start
            } else {
                &rt.end <= to
            };
            1 + u64::from(finished || far_inside)
        })
        .sum()
}

/// Invariant 3 for `DISTINCT` in one partition: rows up to the first live one, and
/// whether one was found.
pub(crate) fn distinct_partition(
    part: &Partition,
    now: Timestamp,
    grace: Duration,
) -> (Count, bool) {
    let mut count = Count::default();
    for (ck, row) in &part.rows {
        count.tombstones += row_tombstones(row, now, grace);
        if row.is_live(now) {
            count.live_rows = 1;
            let first = part.rows.keys().next().unwrap_or(ck);
            count.tombstones += range_markers(&part.ranges, first, ck, false, false, now, grace);
            return (count, true);
        }
    }
    if let (Some(first), Some(last)) = (part.rows.keys().next(), part.rows.keys().next_back()) {
        count.tombstones += range_markers(&part.ranges, first, last, true, false, now, grace);
    }
    (count, false)
}

/// Invariant 5: the warning for `count`, if it earns one.
pub(crate) fn warning(
    charging: &Charging,
    count: Count,
    command: &str,
    token: i64,
) -> Option<String> {
    (count.tombstones > charging.thresholds.warn)
        .then(|| tombstones::warning_text(count.live_rows, count.tombstones, command, token))
}

/// Invariant 5: the failure for `count`, if it earns one.
pub(crate) fn failure(charging: &Charging, count: Count) -> Option<CqlError> {
    (count.tombstones > charging.thresholds.fail).then(|| {
        CqlError::new(
            ErrorKind::ReadFailure {
                consistency: charging.consistency,
                received: 0,
                block_for: 1,
                num_failures: 1,
                data_present: false,
            },
            tombstones::failure_message(&charging.replica),
        )
    })
}

/// Cassandra's rendering of the command a SELECT runs on one partition
/// (`key`) or, for a scan, on the token range: `SELECT <fetched> FROM
/// ks.t [WHERE …] [LIMIT n] [PER PARTITION LIMIT m] ALLOW FILTERING`.
/// `limit` is the command's row limit: the statement's LIMIT, or the page
/// size when smaller.
pub(crate) fn command_cql(
    plan: &SelectPlan,
    values: &Values<'_>,
    key: Option<&PartitionKey>,
    limit: Option<u64>,
    per_partition: Option<u32>,
) -> String {
    let schema = &plan.schema;
    let mut out = format!(
        "SELECT {} FROM {}.{}",
        fetched(plan),
        schema.keyspace,
        schema.name
    );
    let mut conditions: Vec<String> = Vec::new();
    match (key, &plan.partition) {
        (Some(key), _) => {
            let parts = key.components(schema.partition_key.len());
            for (&col, raw) in schema.partition_key.iter().zip(parts) {
                let c = &schema.columns[col];
                conditions.push(format!("{} = {}", c.name, literal(&c.ty, raw)));
            }
            conditions.extend(clustering_conditions(schema, &plan.clustering, values));
        }
        (None, PartitionSel::Scan { start, end }) => {
            let pk: Vec<&str> = schema
                .partition_key
                .iter()
                .map(|&i| schema.columns[i].name.as_str())
                .collect();
            for (bound, lower) in [(start, true), (end, false)] {
                let Some((op, inclusive)) = bound else {
                    continue;
                };
                let Ok(bytes) = values.bytes(op, "token bound") else {
                    continue;
                };
                let Some(t) = crate::value::as_i64(&bytes) else {
                    continue;
                };
                let sign = match (lower, inclusive) {
                    (true, true) => ">=",
                    (true, false) => ">",
                    (false, true) => "<=",
                    (false, false) => "<",
                };
                conditions.push(format!("token({}) {sign} {t}", pk.join(", ")));
            }
        }
        (None, PartitionSel::Keys(_)) => {}
    }
    for f in &plan.filters {
        let c = &schema.columns[f.column];
        if let Ok(list) = values.list(&f.value, &c.name) {
            let rendered: Vec<String> = list.iter().map(|v| literal(&c.ty, v)).collect();
            let op = match f.op {
                Op::Eq => "=",
                Op::Lt => "<",
                Op::Le => "<=",
                Op::Gt => ">",
                Op::Ge => ">=",
            };
            match rendered.as_slice() {
                [one] => conditions.push(format!("{} {op} {one}", c.name)),
                many => conditions.push(format!("{} IN ({})", c.name, many.join(", "))),
            }
        }
    }
    if !conditions.is_empty() {
        out.push_str(" WHERE ");
        out.push_str(&conditions.join(" AND "));
    }
    // Cassandra's "no limit" is Integer.MAX_VALUE, printed as nothing.
    let limit = limit.filter(|&l| l < i32::MAX as u64);
    if let Some(l) = limit {
        let _ = write!(out, " LIMIT {l}");
    }
    if let Some(p) = per_partition.filter(|&p| p < i32::MAX as u32) {
        let _ = write!(out, " PER PARTITION LIMIT {p}");
    }
    out.push_str(" ALLOW FILTERING");
    out
}

/// Cassandra's column filter as it prints it: the regular columns the
/// statement names, or `*` for `SELECT *` or when it names none (measured
/// on a table whose one regular column is `value`: `SELECT column_name`
/// prints `*`, `SELECT column_name, value, writetime(value), ttl(value)`
/// prints `value`).
fn fetched(plan: &SelectPlan) -> String {
    if plan.wildcard {
        return "*".to_string();
    }
    let schema = &plan.schema;
    let mut regular: Vec<usize> = plan
        .outputs
        .iter()
        .filter_map(|o| match o {
            OutputKind::Column(i) | OutputKind::WriteTime(i) | OutputKind::Ttl(i) => Some(*i),
            OutputKind::Token | OutputKind::Count | OutputKind::UnixNow => None,
        })
        .filter(|&i| schema.columns[i].kind == ColumnKind::Regular)
        .collect();
    regular.sort_unstable();
    regular.dedup();
    if regular.is_empty() {
        return "*".to_string();
    }
    regular
        .iter()
        .map(|&i| schema.columns[i].name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn clustering_conditions(
    schema: &TableSchema,
    sel: &ClusteringSel,
    values: &Values<'_>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (pos, op) in sel.prefix.iter().enumerate() {
        let c = &schema.columns[schema.clustering[pos]];
        let Ok(list) = values.list(op, &c.name) else {
            continue;
        };
        let rendered: Vec<String> = list.iter().map(|v| literal(&c.ty, v)).collect();
        match rendered.as_slice() {
            [one] => out.push(format!("{} = {one}", c.name)),
            many => out.push(format!("{} IN ({})", c.name, many.join(", "))),
        }
    }
    if let (Some((lower, upper)), Some(&col)) =
        (&sel.slice, schema.clustering.get(sel.prefix.len()))
    {
        let c = &schema.columns[col];
        for (bound, signs) in [(lower, [">=", ">"]), (upper, ["<=", "<"])] {
            if let Some((op, inclusive)) = bound
                && let Ok(Value::Bytes(v)) = values.value(op)
            {
                let sign = if *inclusive { signs[0] } else { signs[1] };
                out.push(format!("{} {sign} {}", c.name, literal(&c.ty, &v)));
            }
        }
    }
    out
}

/// A value as CQL text, the way Cassandra renders it into a query string
/// (text quoted with quotes doubled, numbers plain, the rest as blobs).
pub(crate) fn literal(ty: &CqlType, b: &[u8]) -> String {
    use crate::value::{as_i32, as_i64};
    let hex = || {
        let mut s = String::from("0x");
        for x in b {
            let _ = write!(s, "{x:02x}");
        }
        s
    };
    match ty.unfrozen() {
        CqlType::Ascii | CqlType::Text => match std::str::from_utf8(b) {
            Ok(s) => tombstones::cql_text_literal(s),
            Err(_) => hex(),
        },
        CqlType::Int => as_i32(b).map_or_else(hex, |v| v.to_string()),
        CqlType::Bigint | CqlType::Counter => as_i64(b).map_or_else(hex, |v| v.to_string()),
        CqlType::Smallint => {
            <[u8; 2]>::try_from(b).map_or_else(|_| hex(), |a| i16::from_be_bytes(a).to_string())
        }
        CqlType::Tinyint => {
            <[u8; 1]>::try_from(b).map_or_else(|_| hex(), |a| i8::from_be_bytes(a).to_string())
        }
        CqlType::Boolean => match b {
            [0] => "false".to_string(),
            [_] => "true".to_string(),
            _ => hex(),
        },
        CqlType::Uuid | CqlType::Timeuuid => {
            uuid::Uuid::from_slice(b).map_or_else(|_| hex(), |u| u.hyphenated().to_string())
        }
        _ => hex(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(literal(&CqlType::Text, b"it's"), "'it''s'");
        assert_eq!(literal(&CqlType::Int, &7i32.to_be_bytes()), "7");
        assert_eq!(literal(&CqlType::Bigint, &(-2i64).to_be_bytes()), "-2");
        assert_eq!(literal(&CqlType::Blob, &[0xca, 0xfe]), "0xcafe");
        assert_eq!(literal(&CqlType::Boolean, &[1]), "true");
        assert_eq!(literal(&CqlType::Text, &[0xff]), "0xff");
    }
}
