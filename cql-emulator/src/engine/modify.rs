//! Turning a bound INSERT, UPDATE or DELETE into the partition changes it
//! makes, all with one timestamp and TTL. Building is separate from
//! applying so a batch is checked whole before any of it is applied.

use std::time::Duration;

use lockshift_store::Timestamp;

use crate::engine::bind::{self, Bound as Values};
use crate::engine::compile::{Action, ModifyPlan};
use crate::engine::data::{Change, Clustering, PartitionKey};
use crate::engine::schema::MAX_TTL_SECS;
use crate::engine::select::clustering_ranges;
use crate::error::CqlError;
use crate::wire::Value;

/// The write timestamp: `USING TIMESTAMP` if bound, else `default`.
fn timestamp(
    plan: &ModifyPlan,
    values: &Values,
    default: Timestamp,
) -> Result<Timestamp, CqlError> {
    let Some(op) = &plan.timestamp else {
        return Ok(default);
    };
    match values.value(op)? {
        Value::Unset => Ok(default),
        Value::Null => Err(CqlError::invalid("Invalid null value of timestamp")),
        Value::Bytes(b) => match crate::value::as_i64(&b) {
            Some(i64::MIN) | None => Err(CqlError::invalid("Invalid timestamp value")),
            Some(t) => Ok(Timestamp::from_micros(t)),
        },
    }
}

/// The TTL: `USING TTL` if bound (0 or null: none), else the table default.
fn ttl(plan: &ModifyPlan, values: &Values) -> Result<Option<Duration>, CqlError> {
    let default = match plan.schema.default_ttl {
        0 => None,
        s => Some(Duration::from_secs(u64::from(s))),
    };
    let Some(op) = &plan.ttl else {
        return Ok(default);
    };
    let secs = match values.value(op)? {
        Value::Unset => return Ok(default),
        Value::Null => return Ok(None),
        Value::Bytes(b) => {
            crate::value::as_i32(&b).ok_or_else(|| CqlError::invalid("Invalid value of TTL"))?
        }
    };
    if secs < 0 {
        return Err(CqlError::invalid(format!(
            "A TTL must be greater or equal to 0, but was {secs}"
        )));
    }
    if i64::from(secs) > MAX_TTL_SECS {
        return Err(CqlError::invalid(format!(
            "ttl is too large. requested ({secs}) maximum ({MAX_TTL_SECS})"
        )));
    }
    Ok((secs > 0).then(|| Duration::from_secs(secs as u64)))
}

/// The one row a conditional statement addresses (compiling checked that
/// its whole primary key is given by single values).
pub(crate) fn cas_row(
    plan: &ModifyPlan,
    values: &Values,
) -> Result<(PartitionKey, Clustering), CqlError> {
    let schema = &plan.schema;
    let mut lists = Vec::new();
    for (op, &i) in plan.keys.iter().zip(&schema.partition_key) {
        lists.push(values.list(op, &schema.columns[i].name)?);
    }
    let mut keys = bind::partition_keys(lists)?;
    let mut raw = Vec::new();
    for (pos, op) in plan.clustering.prefix.iter().enumerate() {
        let list = values.list(op, &schema.columns[schema.clustering[pos]].name)?;
        let [v] = list.as_slice() else {
            return Err(CqlError::invalid(
                "IN on the clustering key columns is not supported with conditional updates",
            ));
        };
        bind::check_key_component(v, false)?;
        raw.push(v.clone());
    }
    match (keys.pop(), keys.is_empty()) {
        (Some(key), true) => Ok((key, schema.clustering_key(raw))),
        _ => Err(CqlError::invalid(
            "IN on the partition key is not supported with conditional updates",
        )),
    }
}

/// The changes `plan` makes with `values`; `default_ts` stamps a statement
/// without `USING TIMESTAMP`.
pub(crate) fn changes(
    plan: &ModifyPlan,
    values: &Values,
    default_ts: Timestamp,
) -> Result<Vec<(PartitionKey, Change)>, CqlError> {
    let schema = &plan.schema;
    let mut lists = Vec::new();
    for (op, &i) in plan.keys.iter().zip(&schema.partition_key) {
        lists.push(values.list(op, &schema.columns[i].name)?);
    }
    let keys = bind::partition_keys(lists)?;
    let ts = timestamp(plan, values, default_ts)?;
    let full_key =
        plan.clustering.slice.is_none() && plan.clustering.prefix.len() == schema.clustering.len();
    let rows = if full_key {
        named_rows(plan, values)?
    } else {
        Vec::new()
    };
    let mut out = Vec::new();
    match &plan.action {
        Action::Insert(cells) | Action::Update(cells) => {
            let marker = matches!(plan.action, Action::Insert(_));
            let ttl = ttl(plan, values)?;
            let mut resolved = Vec::new();
            for (col, op) in cells {
                match values.value(op)? {
                    Value::Unset => {}
                    Value::Null => resolved.push((*col, None)),
                    Value::Bytes(b) => resolved.push((*col, Some(b))),
                }
            }
            if !marker && resolved.is_empty() {
                return Ok(out);
            }
            for key in &keys {
                for ck in &rows {
                    out.push((
                        key.clone(),
                        Change::Upsert {
                            clustering: ck.clone(),
                            marker,
                            cells: resolved.clone(),
                            timestamp: ts,
                            ttl,
                        },
                    ));
                }
            }
        }
        Action::Delete(columns) if !columns.is_empty() => {
            for key in &keys {
                for ck in &rows {
                    out.push((
                        key.clone(),
                        Change::DeleteCells {
                            clustering: ck.clone(),
                            columns: columns.clone(),
                            timestamp: ts,
                        },
                    ));
                }
            }
        }
        Action::Delete(_) => {
            let whole_partition = plan.clustering.is_unrestricted();
            let ranges = if full_key || whole_partition {
                Vec::new()
            } else {
                clustering_ranges(schema, &plan.clustering, values)?
            };
            for key in &keys {
                if whole_partition {
                    out.push((key.clone(), Change::DeletePartition { timestamp: ts }));
                } else if full_key {
                    for ck in &rows {
                        out.push((
                            key.clone(),
                            Change::DeleteRow {
                                clustering: ck.clone(),
                                timestamp: ts,
                            },
                        ));
                    }
                } else {
                    for (start, end) in &ranges {
                        out.push((
                            key.clone(),
                            Change::DeleteRange {
                                start: start.clone(),
                                end: end.clone(),
                                timestamp: ts,
                            },
                        ));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The rows a statement restricting every clustering column names (the
/// product of its `=` and `IN` values).
fn named_rows(plan: &ModifyPlan, values: &Values) -> Result<Vec<Clustering>, CqlError> {
    let schema = &plan.schema;
    let mut lists = Vec::new();
    for (pos, op) in plan.clustering.prefix.iter().enumerate() {
        let list = values.list(op, &schema.columns[schema.clustering[pos]].name)?;
        for v in &list {
            bind::check_key_component(v, false)?;
        }
        lists.push(list);
    }
    Ok(bind::cartesian(lists)?
        .into_iter()
        .map(|raw| schema.clustering_key(raw))
        .collect())
}
