//! Compiling a SELECT: its selectors (columns, `writetime`, `ttl`,
//! `token`, `count`), partition and clustering restrictions, ORDER BY,
//! LIMIT and PER PARTITION LIMIT.

use super::restrict::{
    FILTERING_MESSAGE, clustering_sel, group_relations, partition_keys, push_filters, token_bounds,
};
use super::{Binder, InOperand, OutputKind, PartitionSel, ResultColumn, SelectPlan};
use crate::engine::schema::{ColumnKind, SharedSchema};
use crate::error::CqlError;
use crate::parse::ast::{self, Selector, Term};
use crate::types::CqlType;

/// Compiles a SELECT on `schema`.
pub(crate) fn select(
    schema: SharedSchema,
    s: &ast::Select,
    b: &mut Binder,
) -> Result<(SelectPlan, Vec<ResultColumn>), CqlError> {
    let (outputs, columns) = selectors(&schema, s)?;
    let mut w = group_relations(&schema, &s.relations)?;
    let keys = partition_keys(&schema, &mut w, b)?;
    if keys.is_some() && !w.token.is_empty() {
        return Err(CqlError::invalid(
            "Columns of the partition key cannot be restricted both by token() and by value",
        ));
    }
    let partition = match keys {
        Some(k) => PartitionSel::Keys(k),
        None => {
            let (start, end) = token_bounds(&schema, &w, b)?;
            PartitionSel::Scan { start, end }
        }
    };
    let mut filters = Vec::new();
    let clustering = clustering_sel(&schema, &mut w, b, s.allow_filtering, &mut filters)?;
    for (col, r) in std::mem::take(&mut w.by_column) {
        if !s.allow_filtering {
            return Err(CqlError::invalid(FILTERING_MESSAGE));
        }
        push_filters(&schema, b, col, r, &mut filters)?;
    }
    let scan = matches!(partition, PartitionSel::Scan { .. });
    if scan && !clustering.is_unrestricted() && !s.allow_filtering {
        return Err(CqlError::invalid(FILTERING_MESSAGE));
    }
    if s.distinct && (!clustering.is_unrestricted() || !filters.is_empty()) {
        return Err(CqlError::invalid(
            "SELECT DISTINCT with restrictions on non-partition-key columns is not supported",
        ));
    }

    let reversed = order_by(&schema, s, scan)?;
    let many_keys = match &partition {
        PartitionSel::Keys(k) => k.iter().any(|op| match op {
            InOperand::List(l) => l.len() > 1,
            InOperand::Marker(_) => true,
        }),
        PartitionSel::Scan { .. } => false,
    };
    let sort_across_partitions = !s.order_by.is_empty() && many_keys;

    let int_operand = |b: &mut Binder, t: &Option<Term>, name: &str| {
        t.as_ref()
            .map(|t| b.operand(t, &schema, name, &CqlType::Int))
            .transpose()
    };
    let limit = int_operand(b, &s.limit, "[limit]")?;
    let per_partition_limit = int_operand(b, &s.per_partition_limit, "[per_partition_limit]")?;
    let plan = SelectPlan {
        schema: schema.clone(),
        distinct: s.distinct,
        wildcard: s.selectors.is_none(),
        outputs,
        partition,
        clustering,
        filters,
        reversed,
        sort_across_partitions,
        limit,
        per_partition_limit,
    };
    Ok((plan, columns))
}

/// What a SELECT returns: each selector's output and result column.
fn selectors(
    schema: &SharedSchema,
    s: &ast::Select,
) -> Result<(Vec<OutputKind>, Vec<ResultColumn>), CqlError> {
    let col_out = |name: &str, ty: CqlType| ResultColumn {
        keyspace: schema.keyspace.clone(),
        table: schema.name.clone(),
        name: name.to_string(),
        ty,
    };
    let mut outputs = Vec::new();
    let mut columns = Vec::new();
    match &s.selectors {
        None => {
            for (i, c) in schema.columns.iter().enumerate() {
                if s.distinct && c.kind != ColumnKind::PartitionKey {
                    continue;
                }
                outputs.push(OutputKind::Column(i));
                columns.push(col_out(&c.name, c.ty.clone()));
            }
        }
        Some(list) => {
            let has_count = list.iter().any(|(s, _)| *s == Selector::CountAll);
            if has_count && list.len() > 1 {
                return Err(CqlError::invalid(
                    "count(*) cannot be combined with other selectors by the lockshift CQL emulator",
                ));
            }
            for (sel, alias) in list {
                let (kind, name, ty) = selector(schema, sel)?;
                if s.distinct {
                    let ok = match kind {
                        OutputKind::Column(i) => schema.columns[i].kind == ColumnKind::PartitionKey,
                        OutputKind::Token | OutputKind::Count => true,
                        _ => false,
                    };
                    if !ok {
                        return Err(CqlError::invalid(format!(
                            "SELECT DISTINCT queries must only request partition key columns (not {name})"
                        )));
                    }
                }
                outputs.push(kind);
                columns.push(col_out(alias.as_deref().unwrap_or(&name), ty));
            }
        }
    }
    if s.distinct {
        let missing: Vec<&str> = schema
            .partition_key
            .iter()
            .filter(|i| !outputs.contains(&OutputKind::Column(**i)))
            .map(|&i| schema.columns[i].name.as_str())
            .collect();
        if !missing.is_empty() && !outputs.contains(&OutputKind::Count) {
            return Err(CqlError::invalid(format!(
                "SELECT DISTINCT queries must request all the partition key columns (missing {})",
                missing.join(", ")
            )));
        }
    }

    Ok((outputs, columns))
}

/// One selector: what it outputs, its name, its type.
fn selector(
    schema: &SharedSchema,
    sel: &Selector,
) -> Result<(OutputKind, String, CqlType), CqlError> {
    Ok(match sel {
        Selector::Column(n) => {
            let i = schema.require(n)?;
            (
                OutputKind::Column(i),
                n.clone(),
                schema.columns[i].ty.clone(),
            )
        }
        Selector::WriteTime(n) | Selector::Ttl(n) => {
            let i = schema.require(n)?;
            let c = &schema.columns[i];
            let (fname, ty, kind) = match sel {
                Selector::Ttl(_) => ("ttl", CqlType::Int, OutputKind::Ttl(i)),
                _ => ("writetime", CqlType::Bigint, OutputKind::WriteTime(i)),
            };
            if c.kind != ColumnKind::Regular {
                return Err(CqlError::invalid(format!(
                    "Cannot use selection function {fname} on PRIMARY KEY part {n}"
                )));
            }
            (kind, format!("{fname}({n})"), ty)
        }
        Selector::Token(cols) => {
            let pk: Vec<&str> = schema
                .partition_key
                .iter()
                .map(|&i| schema.columns[i].name.as_str())
                .collect();
            if cols.iter().map(String::as_str).ne(pk.iter().copied()) {
                return Err(CqlError::invalid(format!(
                    "token() must be applied to the partition key columns in order ({})",
                    pk.join(", ")
                )));
            }
            (
                OutputKind::Token,
                format!("system.token({})", cols.join(", ")),
                CqlType::Bigint,
            )
        }
        Selector::CountAll => (OutputKind::Count, "count".to_string(), CqlType::Bigint),
        Selector::UnixNow => (
            OutputKind::UnixNow,
            "system.tounixtimestamp(system.now())".to_string(),
            CqlType::Bigint,
        ),
    })
}

/// ORDER BY: clustering columns in key order, all in the declared order
/// or all reversed; whether reversed.
fn order_by(schema: &SharedSchema, s: &ast::Select, scan: bool) -> Result<bool, CqlError> {
    let mut reversed = false;
    if !s.order_by.is_empty() {
        if scan {
            return Err(CqlError::invalid(
                "ORDER BY is only supported when the partition key is restricted by an EQ or an IN.",
            ));
        }
        for (n, (name, order)) in s.order_by.iter().enumerate() {
            let i = schema.require(name)?;
            if schema.clustering.get(n) != Some(&i) {
                return Err(CqlError::invalid(format!(
                    "Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY (found {name})"
                )));
            }
            let flip = *order != schema.columns[i].order;
            if n == 0 {
                reversed = flip;
            } else if flip != reversed {
                return Err(CqlError::invalid("Unsupported order by relation"));
            }
        }
    }
    Ok(reversed)
}
