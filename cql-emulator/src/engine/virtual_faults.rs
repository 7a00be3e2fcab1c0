//! `lockshift_emulator.faults`: the endpoint's fault rules as a CQL table,
//! for black-box tests that only hold a CQL connection.
//!
//! Nothing is stored in it. A SELECT reads a snapshot of the
//! [`FaultController`] (rules added from Rust included, with their `fired`
//! and `remaining` counts); an INSERT or UPDATE adds or replaces the rule
//! with that `id`; a DELETE of a row removes it; TRUNCATE removes all.

use std::collections::BTreeMap;

use lockshift_store::Timestamp;

use crate::engine::data::{Change, PartitionKey, TableData};
use crate::engine::schema::{SharedSchema, TableSchema};
use crate::error::CqlError;
use crate::faults::{FaultController, FaultId, FaultRule, FaultStatus, RuleRow};
use crate::parse::ast::Statement;
use crate::value;

const DEFINITION: &str = "CREATE TABLE lockshift_emulator.faults (id text PRIMARY KEY, \
    after_apply boolean, fault text, fired bigint, latency_ms int, ops text, probability double, \
    remaining bigint, seed bigint, tables set<text>, times int)";

/// The table's schema.
pub(crate) fn schema() -> TableSchema {
    match crate::parse::parse(DEFINITION) {
        Ok(Statement::CreateTable(ct)) => {
            match TableSchema::from_create(super::FAULTS_KEYSPACE, &ct, 0) {
                Ok(mut s) => {
                    s.id = TableSchema::new(super::FAULTS_KEYSPACE, "faults", Vec::new()).id;
                    s
                }
                // The definition is a constant checked by the unit tests.
                Err(_) => TableSchema::new(super::FAULTS_KEYSPACE, "faults", Vec::new()),
            }
        }
        _ => TableSchema::new(super::FAULTS_KEYSPACE, "faults", Vec::new()),
    }
}

type Cells = BTreeMap<String, Vec<u8>>;

fn cells_of(status: &FaultStatus) -> Cells {
    let v = status.rule.view();
    let mut c = Cells::new();
    c.insert("after_apply".into(), vec![u8::from(v.after_apply)]);
    c.insert(
        "fault".into(),
        status.rule.fault().name().as_bytes().to_vec(),
    );
    c.insert("fired".into(), (status.fired as i64).to_be_bytes().to_vec());
    c.insert("ops".into(), v.ops.name().as_bytes().to_vec());
    if let Some(d) = v.latency {
        let ms = i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
        c.insert("latency_ms".into(), ms.to_be_bytes().to_vec());
    }
    if let Some((p, seed)) = v.probability {
        c.insert("probability".into(), p.to_be_bytes().to_vec());
        c.insert("seed".into(), (seed as i64).to_be_bytes().to_vec());
    }
    if let Some(n) = v.times {
        c.insert(
            "times".into(),
            i32::try_from(n).unwrap_or(i32::MAX).to_be_bytes().to_vec(),
        );
    }
    if let Some(n) = status.remaining {
        c.insert("remaining".into(), (n as i64).to_be_bytes().to_vec());
    }
    if !v.tables.is_empty() {
        let mut t: Vec<&str> = v.tables.iter().map(String::as_str).collect();
        t.sort_unstable();
        t.dedup();
        c.insert("tables".into(), value::text_collection(&t));
    }
    c
}

/// The rules as a table, for a SELECT.
pub(crate) fn snapshot(faults: &FaultController, schema: SharedSchema) -> TableData {
    let mut table = TableData::new(schema.clone());
    for status in faults.rules() {
        let cells = cells_of(&status)
            .into_iter()
            .filter_map(|(name, v)| schema.column(&name).map(|i| (i, Some(v))))
            .collect();
        let key = PartitionKey::new(&[status.id.as_str().as_bytes()]);
        let change = Change::Upsert {
            clustering: schema.clustering_key(Vec::new()),
            marker: true,
            cells,
            timestamp: Timestamp::EPOCH,
            ttl: None,
        };
        table.apply(key, change, Timestamp::EPOCH);
    }
    table
}

/// A change to the rules, checked before anything is applied.
#[derive(Debug)]
pub(crate) enum FaultOp {
    Upsert(String, FaultRule),
    Remove(String),
}

fn invalid(e: impl std::fmt::Display) -> CqlError {
    CqlError::invalid(format!("lockshift_emulator.faults: {e}"))
}

fn rule_from(cells: &Cells) -> Result<FaultRule, CqlError> {
    let text = |n: &str| {
        cells
            .get(n)
            .map(|b| std::str::from_utf8(b).map_err(|_| invalid(format!("{n} is not UTF-8"))))
            .transpose()
    };
    let tables = match cells.get("tables") {
        Some(b) => value::elements_of(b)
            .ok_or_else(|| invalid("tables is not a set<text>"))?
            .into_iter()
            .map(|t| {
                String::from_utf8(t.to_vec()).map_err(|_| invalid("a table name is not UTF-8"))
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    let row = RuleRow {
        fault: text("fault")?,
        tables,
        ops: text("ops")?,
        latency_ms: cells.get("latency_ms").and_then(|b| value::as_i32(b)),
        times: cells.get("times").and_then(|b| value::as_i32(b)),
        probability: cells.get("probability").and_then(|b| value::as_f64(b)),
        seed: cells.get("seed").and_then(|b| value::as_i64(b)),
        after_apply: cells
            .get("after_apply")
            .and_then(|b| b.first())
            .map(|b| *b != 0),
    };
    row.to_rule().map_err(invalid)
}

/// Turns changes to the table into rule operations.
pub(crate) fn plan(
    faults: &FaultController,
    schema: &TableSchema,
    changes: &[(PartitionKey, Change)],
) -> Result<Vec<FaultOp>, CqlError> {
    let current: BTreeMap<String, Cells> = faults
        .rules()
        .iter()
        .map(|s| (s.id.as_str().to_string(), cells_of(s)))
        .collect();
    let mut working: BTreeMap<String, Option<Cells>> = BTreeMap::new();
    let mut ops = Vec::new();
    for (key, change) in changes {
        let id = String::from_utf8(key.bytes.clone()).map_err(|_| invalid("id is not UTF-8"))?;
        match change {
            Change::Upsert { cells, .. } => {
                let mut row = working
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| current.get(&id).cloned())
                    .unwrap_or_default();
                for (col, v) in cells {
                    let name = schema.columns[*col].name.clone();
                    if name == "fired" || name == "remaining" {
                        return Err(invalid(format!("{name} is read-only")));
                    }
                    match v {
                        Some(b) => row.insert(name, b.clone()),
                        None => row.remove(&name),
                    };
                }
                let rule = rule_from(&row)?;
                // Checked here so that applying cannot fail after the rest
                // of a batch was applied.
                rule.validate().map_err(invalid)?;
                ops.push(FaultOp::Upsert(id.clone(), rule));
                working.insert(id, Some(row));
            }
            Change::DeleteRow { .. } | Change::DeletePartition { .. } => {
                working.insert(id.clone(), None);
                ops.push(FaultOp::Remove(id));
            }
            Change::DeleteCells { .. } | Change::DeleteRange { .. } => {
                return Err(invalid(
                    "delete whole rules (DELETE FROM lockshift_emulator.faults WHERE id = …)",
                ));
            }
        }
    }
    Ok(ops)
}

/// Applies checked rule operations.
pub(crate) fn apply(faults: &FaultController, ops: Vec<FaultOp>) -> Result<(), CqlError> {
    for op in ops {
        match op {
            FaultOp::Upsert(id, rule) => {
                faults.upsert(&id, rule).map_err(invalid)?;
            }
            FaultOp::Remove(id) => {
                faults.remove(&FaultId::new(&id));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definition_parses() {
        let s = schema();
        assert_eq!(s.columns.len(), 11);
        assert_eq!(s.columns[0].name, "id");
    }
}
