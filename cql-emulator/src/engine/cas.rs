//! Lightweight transactions: `INSERT … IF NOT EXISTS`, `UPDATE|DELETE … IF
//! EXISTS` and `IF col op v [AND …]` (`=`, `<`, `<=`, `>`, `>=`), answered
//! as Cassandra answers them.
//!
//! Linearizable per partition by construction: the engine runs every
//! statement under the server's one mutex, so reading the addressed row,
//! checking the condition and applying the change happen with nothing in
//! between — the guarantee Paxos gives a real cluster for one partition.
//!
//! The result is one row: a boolean `[applied]` column; when the statement
//! did not apply and the row exists, followed by the row's current values —
//! every column for `IF [NOT] EXISTS`, the condition's columns in the order
//! written for `IF col = v` (Cassandra's `buildCasResultSet`). When it did
//! not apply because the row is missing, `[applied]` alone.

use std::cmp::Ordering;

use lockshift_store::Timestamp;

use crate::engine::bind::Bound;
use crate::engine::compile::{CasCondition, ResultColumn};
use crate::engine::data::{Clustering, PartitionKey, TableData};
use crate::engine::schema::{ColumnKind, TableSchema};
use crate::engine::select::Page;
use crate::error::CqlError;
use crate::parse::ast::Op;
use crate::types::CqlType;
use crate::wire::Value;

/// The name of the result column saying whether the statement applied.
pub(crate) const APPLIED: &str = "[applied]";

/// A row's values, one per schema column (`None`: null or no cell).
pub(crate) type RowValues = Vec<Option<Vec<u8>>>;

/// The live values of row `(key, ck)` at `now`, or `None` when the row is
/// not live (missing, deleted or expired).
pub(crate) fn current_row(
    table: &TableData,
    key: &PartitionKey,
    ck: &Clustering,
    now: Timestamp,
) -> Option<RowValues> {
    let schema = &table.schema;
    let row = table
        .partitions
        .get(key)?
        .rows
        .get(ck)
        .filter(|r| r.is_live(now))?;
    let pk = key.components(schema.partition_key.len());
    Some(
        schema
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| match c.kind {
                ColumnKind::PartitionKey => pk.get(c.position as usize).map(|b| b.to_vec()),
                ColumnKind::Clustering => ck.parts.get(c.position as usize).map(|p| p.raw.clone()),
                ColumnKind::Regular => row.live_cell(i, now).map(|(b, _, _)| b.to_vec()),
            })
            .collect(),
    )
}

/// Whether `condition` holds on `current` (the row's values, `None` when it
/// is not live). A null in `IF col = null` matches a missing cell and a
/// missing row; a comparison (`<`, `<=`, `>`, `>=`) with a null value is
/// refused and one with a missing cell does not hold — Cassandra's
/// `ColumnCondition` rules.
pub(crate) fn applies(
    schema: &TableSchema,
    condition: &CasCondition,
    current: Option<&RowValues>,
    values: &Bound<'_>,
) -> Result<bool, CqlError> {
    match condition {
        CasCondition::NotExists => Ok(current.is_none()),
        CasCondition::Exists => Ok(current.is_some()),
        CasCondition::Compare(list) => {
            let mut holds = true;
            // Every value is resolved (and type-checked) even after a
            // mismatch, so a bad value is an error whatever the row holds.
            for (col, compare, op) in list {
                let c = &schema.columns[*col];
                let expected = match values.value(op)? {
                    Value::Unset => {
                        return Err(CqlError::invalid(format!(
                            "Invalid 'unset' value in condition on column {}",
                            c.name
                        )));
                    }
                    Value::Null => None,
                    Value::Bytes(b) => Some(b),
                };
                let actual = current.and_then(|r| r[*col].as_deref());
                holds &= match (expected.as_deref(), actual) {
                    (None, _) if *compare != Op::Eq => {
                        return Err(CqlError::invalid(format!(
                            "Invalid comparison with null for operator \"{}\"",
                            op_text(*compare)
                        )));
                    }
                    (None, None) => true,
                    (Some(e), Some(a)) => {
                        let order = c.collation.compare(a, e);
                        match compare {
                            Op::Eq => order == Ordering::Equal,
                            Op::Lt => order == Ordering::Less,
                            Op::Le => order != Ordering::Greater,
                            Op::Gt => order == Ordering::Greater,
                            Op::Ge => order != Ordering::Less,
                        }
                    }
                    _ => false,
                };
            }
            Ok(holds)
        }
    }
}

fn op_text(op: Op) -> &'static str {
    match op {
        Op::Eq => "=",
        Op::Lt => "<",
        Op::Le => "<=",
        Op::Gt => ">",
        Op::Ge => ">=",
    }
}

/// The result of a conditional statement: its columns and its one row.
pub(crate) fn result(
    schema: &TableSchema,
    condition: &CasCondition,
    applied: bool,
    current: Option<RowValues>,
) -> (Vec<ResultColumn>, Page) {
    let column = |name: &str, ty: CqlType| ResultColumn {
        keyspace: schema.keyspace.clone(),
        table: schema.name.clone(),
        name: name.to_string(),
        ty,
    };
    let mut columns = vec![column(APPLIED, CqlType::Boolean)];
    let mut row = vec![Some(vec![u8::from(applied)])];
    if let (false, Some(current)) = (applied, current) {
        let shown = condition
            .columns()
            .unwrap_or_else(|| (0..schema.columns.len()).collect());
        for i in shown {
            let c = &schema.columns[i];
            columns.push(column(&c.name, c.ty.clone()));
            row.push(current[i].clone());
        }
    }
    (
        columns,
        Page {
            rows: vec![row],
            paging_state: None,
            warnings: Vec::new(),
            tombstones: None,
        },
    )
}

#[cfg(test)]
#[path = "cas_tests.rs"]
mod tests;
