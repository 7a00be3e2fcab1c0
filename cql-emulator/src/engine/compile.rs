//! Compiling a parsed statement against the schema: resolve names, type
//! every bind marker (its role decides its type, which drivers check values
//! against), apply Cassandra's rules on what a WHERE clause may restrict, and
//! produce a plan the executor runs with bound values.

use std::collections::BTreeMap;

use crate::engine::schema::{ColumnKind, SharedSchema, TableSchema};
use crate::error::CqlError;
use crate::parse::ast::{self, InValues, Op, Order, Relation, Selector, Term};
use crate::types::CqlType;
use crate::value;

/// What one bind marker expects: the prepared statement's variable metadata.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BindSpec {
    pub(crate) keyspace: String,
    pub(crate) table: String,
    pub(crate) name: String,
    pub(crate) ty: CqlType,
}

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
    Token,
    Count,
}

/// A result column's metadata.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ResultColumn {
    pub(crate) keyspace: String,
    pub(crate) table: String,
    pub(crate) name: String,
    pub(crate) ty: CqlType,
}

/// A compiled SELECT.
#[derive(Clone, Debug)]
pub(crate) struct SelectPlan {
    pub(crate) schema: SharedSchema,
    pub(crate) distinct: bool,
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

// ===== WHERE =====

/// The restrictions of one column, grouped.
#[derive(Default)]
struct ColumnRestrictions {
    eq: Option<InValues>,
    lower: Option<(Term, bool)>,
    upper: Option<(Term, bool)>,
}

impl ColumnRestrictions {
    fn is_slice(&self) -> bool {
        self.lower.is_some() || self.upper.is_some()
    }
}

struct Where {
    by_column: BTreeMap<usize, ColumnRestrictions>,
    token: Vec<(Op, Term)>,
}

fn group_relations(schema: &TableSchema, relations: &[Relation]) -> Result<Where, CqlError> {
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
fn partition_keys(
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
fn clustering_sel(
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

fn push_filters(
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

const FILTERING_MESSAGE: &str = "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING";

fn token_bounds(
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

// ===== SELECT =====

/// Compiles a SELECT on `schema`.
pub(crate) fn select(
    schema: SharedSchema,
    s: &ast::Select,
    b: &mut Binder,
) -> Result<(SelectPlan, Vec<ResultColumn>), CqlError> {
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
                let (kind, name, ty) = match sel {
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
                };
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

    // ORDER BY: clustering columns in key order, all in the declared order
    // or all reversed.
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

// ===== INSERT / UPDATE / DELETE =====

const LWT_MESSAGE: &str = "Conditional statements (IF NOT EXISTS, IF EXISTS, IF …; lightweight transactions) are not supported by the lockshift CQL emulator";

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
    if s.if_not_exists {
        return Err(CqlError::invalid(LWT_MESSAGE));
    }
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
    Ok(ModifyPlan {
        schema: schema.clone(),
        keys,
        clustering: ClusteringSel {
            prefix,
            slice: None,
        },
        action: Action::Insert(by_col.into_iter().collect()),
        ttl,
        timestamp,
    })
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
    if s.conditional {
        return Err(CqlError::invalid(LWT_MESSAGE));
    }
    let (ttl, timestamp) = using(&schema, &s.using, b)?;
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
    let (keys, clustering) = modify_where(&schema, &s.relations, b, false)?;
    Ok(ModifyPlan {
        schema: schema.clone(),
        keys,
        clustering,
        action: Action::Update(cells),
        ttl,
        timestamp,
    })
}

/// Compiles a DELETE.
pub(crate) fn delete(
    schema: SharedSchema,
    s: &ast::Delete,
    b: &mut Binder,
) -> Result<ModifyPlan, CqlError> {
    if s.conditional {
        return Err(CqlError::invalid(LWT_MESSAGE));
    }
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
    let (keys, clustering) = modify_where(&schema, &s.relations, b, columns.is_empty())?;
    Ok(ModifyPlan {
        schema: schema.clone(),
        keys,
        clustering,
        action: Action::Delete(columns),
        ttl: None,
        timestamp,
    })
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
