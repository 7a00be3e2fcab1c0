//! Compiling a parsed statement against the schema: resolve names, type
//! every bind marker (its role decides its type, which drivers check values
//! against), apply Cassandra's rules on what a WHERE clause may restrict, and
//! produce a plan the executor runs with bound values.

use std::collections::BTreeMap;

use crate::engine::schema::{ColumnKind, SharedSchema, TableSchema};
use crate::error::CqlError;
use crate::parse::ast::{self, InValues, Op, Order, Relation, Term};
use crate::types::CqlType;
use crate::value;

mod restrict;
mod select;

use restrict::{clustering_sel, group_relations, partition_keys};
pub(crate) use select::select;

/// A column's metadata as the protocol sends it (a `col_spec`): its
/// keyspace, table, name and type. A bind marker's and a result column's
/// are the same four things, so one type serves both.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ColumnSpec {
    pub(crate) keyspace: String,
    pub(crate) table: String,
    pub(crate) name: String,
    pub(crate) ty: CqlType,
}

/// What one bind marker expects: the prepared statement's variable metadata.
pub(crate) type BindSpec = ColumnSpec;

/// A result column's metadata.
pub(crate) type ResultColumn = ColumnSpec;

/// A value in a plan, resolved when the statement runs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Operand {
    Const(Option<Vec<u8>>),
    Marker(usize),
    /// `now()`: a version-1 uuid from the engine clock.
    Now,
    /// `uuid()`: a random version-4 uuid.
    RandomUuid,
    /// `currentTimestamp()` / `toTimestamp(now())`.
    CurrentTimestamp,
    /// `token(values…)` on the right of a token relation.
    Token(Vec<Operand>),
}

/// The values of an `=` (one) or `IN` (a list or one list marker).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum InOperand {
    List(Vec<Operand>),
    Marker(usize),
}

/// A bound of a slice: operand and inclusiveness.
pub(crate) type SliceBound = Option<(Operand, bool)>;

/// Restrictions on the clustering columns: equalities (or IN) on a prefix,
/// then an optional slice on the next column.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ClusteringSel {
    pub(crate) prefix: Vec<InOperand>,
    pub(crate) slice: Option<(SliceBound, SliceBound)>,
}

impl ClusteringSel {
    pub(crate) fn is_unrestricted(&self) -> bool {
        self.prefix.is_empty() && self.slice.is_none()
    }
}

/// Which partitions a SELECT reads.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PartitionSel {
    /// `=` / `IN` on every partition key column.
    Keys(Vec<InOperand>),
    /// All partitions in token order, optionally within token bounds.
    Scan { start: SliceBound, end: SliceBound },
}

/// A restriction checked row by row (ALLOW FILTERING).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Filter {
    pub(crate) column: usize,
    pub(crate) op: Op,
    pub(crate) value: InOperand,
}

/// One output column of a SELECT.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum OutputKind {
    Column(usize),
    WriteTime(usize),
    Ttl(usize),
    /// `toUnixTimestamp(now())`: the engine clock in milliseconds.
    UnixNow,
    Token,
    Count,
}

/// A compiled SELECT.
#[derive(Clone, Debug)]
pub(crate) struct SelectPlan {
    pub(crate) schema: SharedSchema,
    pub(crate) distinct: bool,
    /// `SELECT *` (Cassandra then fetches, and prints, `*`).
    pub(crate) wildcard: bool,
    pub(crate) outputs: Vec<OutputKind>,
    pub(crate) partition: PartitionSel,
    pub(crate) clustering: ClusteringSel,
    pub(crate) filters: Vec<Filter>,
    pub(crate) reversed: bool,
    /// ORDER BY over several partitions: rows are sorted after reading.
    pub(crate) sort_across_partitions: bool,
    pub(crate) limit: Option<Operand>,
    pub(crate) per_partition_limit: Option<Operand>,
}

/// What a modification does to each addressed row.
#[derive(Clone, Debug)]
pub(crate) enum Action {
    Insert(Vec<(usize, Operand)>),
    Update(Vec<(usize, Operand)>),
    Delete(Vec<usize>),
}

/// A compiled INSERT, UPDATE or DELETE.
#[derive(Clone, Debug)]
pub(crate) struct ModifyPlan {
    pub(crate) schema: SharedSchema,
    pub(crate) keys: Vec<InOperand>,
    pub(crate) clustering: ClusteringSel,
    pub(crate) action: Action,
    pub(crate) ttl: Option<Operand>,
    pub(crate) timestamp: Option<Operand>,
    /// `IF …`: a lightweight transaction (see [`CasCondition`]).
    pub(crate) condition: Option<CasCondition>,
}

// ===== Binder =====

/// Records the spec of each marker as the statement is compiled.
pub(crate) struct Binder {
    specs: Vec<Option<BindSpec>>,
}

impl Binder {
    pub(crate) fn new(markers: usize) -> Binder {
        Binder {
            specs: vec![None; markers],
        }
    }

    /// Every marker's spec, in index order.
    pub(crate) fn finish(self) -> Result<Vec<BindSpec>, CqlError> {
        self.specs
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                s.ok_or_else(|| CqlError::server(format!("bind marker {i} was not given a type")))
            })
            .collect()
    }

    fn spec(&mut self, m: &ast::Marker, schema: &TableSchema, name: &str, ty: &CqlType) {
        if let Some(slot) = self.specs.get_mut(m.index) {
            *slot = Some(BindSpec {
                keyspace: schema.keyspace.clone(),
                table: schema.name.clone(),
                name: m.name.clone().unwrap_or_else(|| name.to_string()),
                ty: ty.clone(),
            });
        }
    }

    /// The operand for `term` bound to a receiver called `name` of type `ty`.
    pub(crate) fn operand(
        &mut self,
        term: &Term,
        schema: &TableSchema,
        name: &str,
        ty: &CqlType,
    ) -> Result<Operand, CqlError> {
        match term {
            Term::Marker(m) => {
                self.spec(m, schema, name, ty);
                Ok(Operand::Marker(m.index))
            }
            Term::Literal(l) => Ok(Operand::Const(value::from_literal(ty, l, name)?)),
            Term::Call(f, args) => {
                let t = ty.unfrozen();
                let is_now =
                    |a: &[Term]| matches!(a, [Term::Call(f, x)] if f == "now" && x.is_empty());
                match (f.as_str(), args.as_slice()) {
                    ("now", []) if *t == CqlType::Timeuuid => Ok(Operand::Now),
                    ("uuid", []) if *t == CqlType::Uuid => Ok(Operand::RandomUuid),
                    ("currenttimestamp", []) if *t == CqlType::Timestamp => {
                        Ok(Operand::CurrentTimestamp)
                    }
                    ("totimestamp", a) if is_now(a) && *t == CqlType::Timestamp => {
                        Ok(Operand::CurrentTimestamp)
                    }
                    _ => Err(CqlError::invalid(format!(
                        "function {f}() is not supported here by the lockshift CQL emulator for \"{name}\" of type {ty} \
                         (supported: now() for timeuuid, uuid(), currentTimestamp())"
                    ))),
                }
            }
        }
    }

    fn in_operand(
        &mut self,
        values: &InValues,
        schema: &TableSchema,
        name: &str,
        ty: &CqlType,
    ) -> Result<InOperand, CqlError> {
        match values {
            InValues::Marker(m) => {
                self.spec(
                    m,
                    schema,
                    &format!("in({name})"),
                    &CqlType::list_of(ty.clone()),
                );
                Ok(InOperand::Marker(m.index))
            }
            InValues::List(terms) => Ok(InOperand::List(
                terms
                    .iter()
                    .map(|t| self.operand(t, schema, name, ty))
                    .collect::<Result<_, _>>()?,
            )),
        }
    }
}

// ===== INSERT / UPDATE / DELETE =====

/// A lightweight transaction's condition, compiled: checked against the
/// addressed row's current values before the change is applied.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum CasCondition {
    /// `INSERT … IF NOT EXISTS`: applies iff the row is not live.
    NotExists,
    /// `UPDATE|DELETE … IF EXISTS`: applies iff the row is live.
    Exists,
    /// `IF col op v AND …`: applies iff every regular column compares as
    /// written with its value — by the column type's order; `= null`
    /// matches a missing cell or a missing row, and any other operator
    /// fails on a missing cell, as in Cassandra.
    Compare(Vec<(usize, ast::Op, Operand)>),
}

impl CasCondition {
    /// The regular columns the condition names, in the order written (the
    /// columns of a not-applied result besides `[applied]`; `None`: all).
    pub(crate) fn columns(&self) -> Option<Vec<usize>> {
        match self {
            CasCondition::NotExists | CasCondition::Exists => None,
            CasCondition::Compare(list) => {
                let mut out: Vec<usize> = Vec::new();
                for (i, _, _) in list {
                    if !out.contains(i) {
                        out.push(*i);
                    }
                }
                Some(out)
            }
        }
    }
}

fn compile_condition(
    schema: &TableSchema,
    c: &ast::Condition,
    b: &mut Binder,
) -> Result<CasCondition, CqlError> {
    match c {
        ast::Condition::Exists => Ok(CasCondition::Exists),
        ast::Condition::Compare(list) => {
            let mut out = Vec::new();
            for (name, op, term) in list {
                let i = schema.require(name)?;
                let col = &schema.columns[i];
                if col.kind != ColumnKind::Regular {
                    return Err(CqlError::invalid(format!(
                        "PRIMARY KEY column '{name}' cannot have IF conditions"
                    )));
                }
                out.push((i, *op, b.operand(term, schema, &col.name, &col.ty)?));
            }
            Ok(CasCondition::Compare(out))
        }
    }
}

/// Cassandra's rules for a conditional statement: it addresses exactly one
/// row by equality on the whole primary key (Paxos runs per partition) and
/// takes no client timestamp (the Paxos ballot orders it).
fn check_conditional(plan: &ModifyPlan, is_delete: bool) -> Result<(), CqlError> {
    if plan.condition.is_none() {
        return Ok(());
    }
    if plan.timestamp.is_some() {
        return Err(CqlError::invalid(
            "Cannot provide custom timestamp for conditional updates",
        ));
    }
    let single = |op: &InOperand| matches!(op, InOperand::List(l) if l.len() == 1);
    if !plan.keys.iter().all(single) {
        return Err(CqlError::invalid(
            "IN on the partition key is not supported with conditional updates",
        ));
    }
    let full = plan.clustering.slice.is_none()
        && plan.clustering.prefix.len() == plan.schema.clustering.len();
    if !full && is_delete {
        return Err(CqlError::invalid(
            "DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to use IF conditions",
        ));
    }
    if !plan.clustering.prefix.iter().all(single) {
        return Err(CqlError::invalid(
            "IN on the clustering key columns is not supported with conditional updates",
        ));
    }
    Ok(())
}

fn using(
    schema: &TableSchema,
    u: &ast::Using,
    b: &mut Binder,
) -> Result<(Option<Operand>, Option<Operand>), CqlError> {
    let ttl = u
        .ttl
        .as_ref()
        .map(|t| b.operand(t, schema, "[ttl]", &CqlType::Int))
        .transpose()?;
    let ts = u
        .timestamp
        .as_ref()
        .map(|t| b.operand(t, schema, "[timestamp]", &CqlType::Bigint))
        .transpose()?;
    Ok((ttl, ts))
}

/// Compiles an INSERT.
pub(crate) fn insert(
    schema: SharedSchema,
    s: &ast::Insert,
    b: &mut Binder,
) -> Result<ModifyPlan, CqlError> {
    if s.columns.len() != s.values.len() {
        return Err(CqlError::invalid("Unmatched column names/values"));
    }
    let mut by_col: BTreeMap<usize, Operand> = BTreeMap::new();
    for (name, term) in s.columns.iter().zip(&s.values) {
        let i = schema.require(name)?;
        let c = &schema.columns[i];
        let op = b.operand(term, &schema, &c.name, &c.ty)?;
        if by_col.insert(i, op).is_some() {
            return Err(CqlError::invalid(format!(
                "Multiple definitions found for column {name}"
            )));
        }
    }
    let missing = |cols: &[usize], by_col: &BTreeMap<usize, Operand>| -> Vec<String> {
        cols.iter()
            .filter(|i| !by_col.contains_key(i))
            .map(|&i| schema.columns[i].name.clone())
            .collect()
    };
    let m = missing(&schema.partition_key, &by_col);
    if !m.is_empty() {
        return Err(CqlError::invalid(format!(
            "Some partition key parts are missing: {}",
            m.join(", ")
        )));
    }
    let m = missing(&schema.clustering, &by_col);
    if !m.is_empty() {
        return Err(CqlError::invalid(format!(
            "Some clustering keys are missing: {}",
            m.join(", ")
        )));
    }
    let take = |cols: &[usize], by_col: &mut BTreeMap<usize, Operand>| -> Vec<InOperand> {
        cols.iter()
            .filter_map(|i| by_col.remove(i))
            .map(|op| InOperand::List(vec![op]))
            .collect()
    };
    let keys = take(&schema.partition_key, &mut by_col);
    let prefix = take(&schema.clustering, &mut by_col);
    let (ttl, timestamp) = using(&schema, &s.using, b)?;
    let plan = ModifyPlan {
        schema: schema.clone(),
        keys,
        clustering: ClusteringSel {
            prefix,
            slice: None,
        },
        action: Action::Insert(by_col.into_iter().collect()),
        ttl,
        timestamp,
        condition: s.if_not_exists.then_some(CasCondition::NotExists),
    };
    check_conditional(&plan, false)?;
    Ok(plan)
}

/// The WHERE of UPDATE / DELETE: full partition key; clustering as allowed.
fn modify_where(
    schema: &TableSchema,
    relations: &[Relation],
    b: &mut Binder,
    allow_range: bool,
) -> Result<(Vec<InOperand>, ClusteringSel), CqlError> {
    let mut w = group_relations(schema, relations)?;
    if !w.token.is_empty() {
        return Err(CqlError::invalid(
            "token() restrictions are only allowed in SELECT",
        ));
    }
    let keys = partition_keys(schema, &mut w, b)?.ok_or_else(|| {
        let names: Vec<&str> = schema
            .partition_key
            .iter()
            .map(|&i| schema.columns[i].name.as_str())
            .collect();
        CqlError::invalid(format!(
            "Some partition key parts are missing: {}",
            names.join(", ")
        ))
    })?;
    let mut no_filters = Vec::new();
    let clustering = clustering_sel(schema, &mut w, b, false, &mut no_filters)?;
    if let Some((&col, _)) = w.by_column.iter().next() {
        return Err(CqlError::invalid(format!(
            "Non PRIMARY KEY columns found in where clause: {}",
            schema.columns[col].name
        )));
    }
    let full = clustering.slice.is_none() && clustering.prefix.len() == schema.clustering.len();
    if !full && !allow_range {
        let missing: Vec<&str> = schema.clustering[clustering.prefix.len()..]
            .iter()
            .map(|&i| schema.columns[i].name.as_str())
            .collect();
        return Err(CqlError::invalid(format!(
            "Some clustering keys are missing: {}",
            missing.join(", ")
        )));
    }
    Ok((keys, clustering))
}

/// Compiles an UPDATE.
pub(crate) fn update(
    schema: SharedSchema,
    s: &ast::Update,
    b: &mut Binder,
) -> Result<ModifyPlan, CqlError> {
    let using = using(&schema, &s.using, b)?;
    let mut cells = Vec::new();
    for (name, term) in &s.assignments {
        let i = schema.require(name)?;
        let c = &schema.columns[i];
        if c.kind != ColumnKind::Regular {
            return Err(CqlError::invalid(format!(
                "PRIMARY KEY part {name} found in SET part"
            )));
        }
        if cells.iter().any(|(j, _)| *j == i) {
            return Err(CqlError::invalid(format!(
                "Multiple definitions found for column {name}"
            )));
        }
        cells.push((i, b.operand(term, &schema, &c.name, &c.ty)?));
    }
    let action = Action::Update(cells);
    modify_plan(schema, &s.relations, s.condition.as_ref(), action, using, b)
}

/// Compiles a DELETE.
pub(crate) fn delete(
    schema: SharedSchema,
    s: &ast::Delete,
    b: &mut Binder,
) -> Result<ModifyPlan, CqlError> {
    let timestamp = s
        .timestamp
        .as_ref()
        .map(|t| b.operand(t, &schema, "[timestamp]", &CqlType::Bigint))
        .transpose()?;
    let mut columns = Vec::new();
    for name in &s.columns {
        let i = schema.require(name)?;
        if schema.columns[i].kind != ColumnKind::Regular {
            return Err(CqlError::invalid(format!(
                "Invalid identifier {name} for deletion (should not be a PRIMARY KEY part)"
            )));
        }
        columns.push(i);
    }
    let action = Action::Delete(columns);
    let using = (None, timestamp);
    modify_plan(schema, &s.relations, s.condition.as_ref(), action, using, b)
}

/// The plan of an UPDATE or DELETE from its `action` and its `USING` ttl
/// and timestamp: both statements address rows by their WHERE and may be
/// conditional, so one function compiles those and checks the result. A
/// DELETE of whole rows (no columns named) may address a range of
/// clustering keys; anything else needs the full primary key.
fn modify_plan(
    schema: SharedSchema,
    relations: &[Relation],
    condition: Option<&ast::Condition>,
    action: Action,
    (ttl, timestamp): (Option<Operand>, Option<Operand>),
    b: &mut Binder,
) -> Result<ModifyPlan, CqlError> {
    let is_delete = matches!(action, Action::Delete(_));
    let allow_range = matches!(&action, Action::Delete(columns) if columns.is_empty());
    let (keys, clustering) = modify_where(&schema, relations, b, allow_range)?;
    let condition = condition
        .map(|c| compile_condition(&schema, c, b))
        .transpose()?;
    let plan = ModifyPlan {
        schema,
        keys,
        clustering,
        action,
        ttl,
        timestamp,
        condition,
    };
    check_conditional(&plan, is_delete)?;
    Ok(plan)
}

/// `pk_indexes`: the marker bound to each partition key column, when every
/// one is a single `= ?` (else empty: the driver cannot compute the token).
pub(crate) fn pk_indexes(keys: &[InOperand]) -> Vec<u16> {
    let mut out = Vec::new();
    for k in keys {
        match k {
            InOperand::List(l) => match l.as_slice() {
                [Operand::Marker(i)] => match u16::try_from(*i) {
                    Ok(i) => out.push(i),
                    Err(_) => return Vec::new(),
                },
                _ => return Vec::new(),
            },
            InOperand::Marker(_) => return Vec::new(),
        }
    }
    out
}

/// Whether the order of a clustering column is descending.
pub(crate) fn is_desc(schema: &TableSchema, clustering_pos: usize) -> bool {
    schema
        .clustering
        .get(clustering_pos)
        .is_some_and(|&i| schema.columns[i].order == Order::Desc)
}
