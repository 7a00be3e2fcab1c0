//! What a WHERE clause may restrict, by Cassandra's rules: the partition key
//! by `=` / `IN` on every column (or `token()` bounds), clustering columns as
//! equalities on a prefix then one slice, anything else only as a filter
//! with ALLOW FILTERING.

use std::collections::BTreeMap;

use super::{Binder, ClusteringSel, Filter, InOperand, Operand, SliceBound};
use crate::engine::schema::TableSchema;
use crate::error::CqlError;
use crate::parse::ast::{InValues, Op, Relation, Term};
use crate::types::CqlType;

/// The restrictions of one column, grouped.
#[derive(Default)]
pub(super) struct ColumnRestrictions {
    eq: Option<InValues>,
    lower: Option<(Term, bool)>,
    upper: Option<(Term, bool)>,
}

impl ColumnRestrictions {
    fn is_slice(&self) -> bool {
        self.lower.is_some() || self.upper.is_some()
    }
}

pub(super) struct Where {
    pub(super) by_column: BTreeMap<usize, ColumnRestrictions>,
    pub(super) token: Vec<(Op, Term)>,
}

pub(super) fn group_relations(
    schema: &TableSchema,
    relations: &[Relation],
) -> Result<Where, CqlError> {
    let mut by_column: BTreeMap<usize, ColumnRestrictions> = BTreeMap::new();
    let mut token = Vec::new();
    for r in relations {
        match r {
            Relation::Token { columns, op, value } => {
                let pk: Vec<&str> = schema
                    .partition_key
                    .iter()
                    .map(|&i| schema.columns[i].name.as_str())
                    .collect();
                if columns.iter().map(String::as_str).ne(pk.iter().copied()) {
                    return Err(CqlError::invalid(format!(
                        "The token function arguments must be the partition key columns in order ({})",
                        pk.join(", ")
                    )));
                }
                token.push((*op, value.clone()));
            }
            Relation::Compare { column, op, value } => {
                let col = schema.require(column)?;
                let entry = by_column.entry(col).or_default();
                let dup = || {
                    CqlError::invalid(format!(
                        "More than one restriction was found for the {} bound on {column}",
                        if matches!(op, Op::Gt | Op::Ge) {
                            "start"
                        } else {
                            "end"
                        }
                    ))
                };
                match op {
                    Op::Eq if entry.eq.is_none() && !entry.is_slice() => {
                        entry.eq = Some(InValues::List(vec![value.clone()]));
                    }
                    Op::Eq => {
                        return Err(CqlError::invalid(format!(
                            "{column} cannot be restricted by more than one relation if it includes an Equal"
                        )));
                    }
                    _ if entry.eq.is_some() => {
                        return Err(CqlError::invalid(format!(
                            "{column} cannot be restricted by more than one relation if it includes an Equal"
                        )));
                    }
                    Op::Gt | Op::Ge => {
                        if entry.lower.is_some() {
                            return Err(dup());
                        }
                        entry.lower = Some((value.clone(), *op == Op::Ge));
                    }
                    Op::Lt | Op::Le => {
                        if entry.upper.is_some() {
                            return Err(dup());
                        }
                        entry.upper = Some((value.clone(), *op == Op::Le));
                    }
                }
            }
            Relation::In { column, values } => {
                let col = schema.require(column)?;
                let entry = by_column.entry(col).or_default();
                if entry.eq.is_some() || entry.is_slice() {
                    return Err(CqlError::invalid(format!(
                        "{column} cannot be restricted by more than one relation if it includes a IN"
                    )));
                }
                entry.eq = Some(values.clone());
            }
        }
    }
    Ok(Where { by_column, token })
}

/// Partition key `=`/`IN` operands, or `None` if the key is unrestricted.
pub(super) fn partition_keys(
    schema: &TableSchema,
    w: &mut Where,
    b: &mut Binder,
) -> Result<Option<Vec<InOperand>>, CqlError> {
    let restricted: Vec<usize> = schema
        .partition_key
        .iter()
        .copied()
        .filter(|i| w.by_column.contains_key(i))
        .collect();
    if restricted.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for &i in &schema.partition_key {
        let col = &schema.columns[i];
        let Some(r) = w.by_column.remove(&i) else {
            return Err(CqlError::invalid(format!(
                "Partition key parts: {} must be restricted as other parts are",
                col.name
            )));
        };
        match r.eq {
            Some(values) if !r.is_slice() => {
                out.push(b.in_operand(&values, schema, &col.name, &col.ty)?)
            }
            _ => {
                return Err(CqlError::invalid(format!(
                    "Only EQ and IN relation are supported on the partition key (unless you use the token() function); found a slice on {}",
                    col.name
                )));
            }
        }
    }
    Ok(Some(out))
}

/// Clustering restrictions; with `filtering`, restrictions that break the
/// prefix rule become row filters instead of errors.
pub(super) fn clustering_sel(
    schema: &TableSchema,
    w: &mut Where,
    b: &mut Binder,
    filtering: bool,
    filters: &mut Vec<Filter>,
) -> Result<ClusteringSel, CqlError> {
    let mut sel = ClusteringSel::default();
    let mut broken: Option<(String, &'static str)> = None;
    for &i in &schema.clustering {
        let col = &schema.columns[i];
        let Some(r) = w.by_column.remove(&i) else {
            if broken.is_none() {
                broken = Some((col.name.clone(), "is not restricted"));
            }
            continue;
        };
        if let Some((prev, why)) = &broken {
            if !filtering {
                return Err(CqlError::invalid(format!(
                    "PRIMARY KEY column \"{}\" cannot be restricted as preceding column \"{prev}\" {why}",
                    col.name
                )));
            }
            push_filters(schema, b, i, r, filters)?;
            continue;
        }
        if let Some(values) = &r.eq {
            sel.prefix
                .push(b.in_operand(values, schema, &col.name, &col.ty)?);
        } else {
            let mut bound = |t: &Option<(Term, bool)>| -> Result<SliceBound, CqlError> {
                t.as_ref()
                    .map(|(term, incl)| Ok((b.operand(term, schema, &col.name, &col.ty)?, *incl)))
                    .transpose()
            };
            sel.slice = Some((bound(&r.lower)?, bound(&r.upper)?));
            broken = Some((col.name.clone(), "is restricted by a non-EQ relation"));
        }
    }
    Ok(sel)
}

pub(super) fn push_filters(
    schema: &TableSchema,
    b: &mut Binder,
    col: usize,
    r: ColumnRestrictions,
    filters: &mut Vec<Filter>,
) -> Result<(), CqlError> {
    let c = &schema.columns[col];
    if let Some(values) = &r.eq {
        let value = b.in_operand(values, schema, &c.name, &c.ty)?;
        filters.push(Filter {
            column: col,
            op: Op::Eq,
            value,
        });
    }
    for (bound, strict, loose) in [(&r.lower, Op::Gt, Op::Ge), (&r.upper, Op::Lt, Op::Le)] {
        if let Some((term, incl)) = bound {
            let op = if *incl { loose } else { strict };
            let value = InOperand::List(vec![b.operand(term, schema, &c.name, &c.ty)?]);
            filters.push(Filter {
                column: col,
                op,
                value,
            });
        }
    }
    Ok(())
}

pub(super) const FILTERING_MESSAGE: &str = "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING";

pub(super) fn token_bounds(
    schema: &TableSchema,
    w: &Where,
    b: &mut Binder,
) -> Result<(SliceBound, SliceBound), CqlError> {
    let mut start = None;
    let mut end = None;
    for (op, term) in &w.token {
        let operand = match term {
            Term::Call(f, args) if f == "token" => {
                if args.len() != schema.partition_key.len() {
                    return Err(CqlError::invalid(
                        "token() on the right needs one value per partition key column",
                    ));
                }
                let mut ops = Vec::new();
                for (arg, &i) in args.iter().zip(&schema.partition_key) {
                    let c = &schema.columns[i];
                    ops.push(b.operand(arg, schema, &c.name, &c.ty)?);
                }
                Operand::Token(ops)
            }
            other => b.operand(other, schema, "partition key token", &CqlType::Bigint)?,
        };
        let slot = match op {
            Op::Gt | Op::Ge => &mut start,
            Op::Lt | Op::Le => &mut end,
            Op::Eq => {
                if start.is_some() || end.is_some() {
                    return Err(CqlError::invalid(
                        "token() cannot be restricted by more than one relation if it includes an Equal",
                    ));
                }
                start = Some((operand.clone(), true));
                &mut end
            }
        };
        if slot.is_some() {
            return Err(CqlError::invalid(
                "More than one restriction was found for a token() bound",
            ));
        }
        *slot = Some((operand, matches!(op, Op::Ge | Op::Le | Op::Eq)));
    }
    Ok((start, end))
}
