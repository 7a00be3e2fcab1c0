//! One page of a SELECT, stage by stage: the limits it runs under and
//! where it resumes ([`Limits`]), the walk over the partitions it names
//! (by key, one command each; or a token scan, one command for the page),
//! what the reads were charged ([`Charged`]), and the page cut from the
//! walk's rows with its paging state.

use std::cmp::Ordering;
use std::ops::Bound;

use super::paging::PagingState;
use super::ranges::{later_lower, token_bound, valid_range};
use super::{Emitted, Page, RowFilter, Walk, clustering_ranges, cost};
use crate::engine::bind::{self, Bound as Values};
use crate::engine::compile::{InOperand, OutputKind, PartitionSel, SelectPlan, SliceBound};
use crate::engine::data::{Clustering, PartitionKey, TableData};
use crate::engine::schema::TableSchema;
use crate::error::CqlError;

/// The limits a SELECT runs under, and where a later page resumes.
struct Limits {
    /// Rows still allowed by LIMIT (what is left of it on a later page).
    limit: Option<u32>,
    per_partition: Option<u32>,
    count_only: bool,
    page_size: Option<usize>,
    resume: Option<(PartitionKey, Option<Clustering>, Option<u32>)>,
}

impl Limits {
    fn of(
        plan: &SelectPlan,
        values: &Values,
        page_size: Option<usize>,
        paging_state: Option<&[u8]>,
        schema: &TableSchema,
    ) -> Result<Limits, CqlError> {
        let positive = |v: Option<i32>, what: &str| -> Result<Option<u32>, CqlError> {
            match v {
                None => Ok(None),
                Some(n) if n > 0 => Ok(Some(n as u32)),
                Some(_) => Err(CqlError::invalid(format!(
                    "{what} must be strictly positive"
                ))),
            }
        };
        let limit = positive(values.int(plan.limit.as_ref(), "limit")?, "LIMIT")?;
        let per_partition = positive(
            values.int(plan.per_partition_limit.as_ref(), "per partition limit")?,
            "PER PARTITION LIMIT",
        )?;
        let count_only = plan.outputs.contains(&OutputKind::Count);
        if plan.sort_across_partitions && page_size.is_some() {
            return Err(CqlError::invalid(
                "Cannot page queries with both ORDER BY and a IN restriction on the partition key; \
                 you must either remove the ORDER BY or the IN and sort client side, or disable paging for this query",
            ));
        }
        let page_size = if count_only { None } else { page_size };
        let state = match paging_state {
            Some(b) if !count_only => Some(PagingState::decode(b, schema)?),
            _ => None,
        };
        let resume = state.as_ref().map(|s| {
            let key = PartitionKey::from_bytes(s.partition.clone());
            let ck = s
                .clustering
                .as_ref()
                .map(|c| Clustering::exact(schema.key_parts(c.clone())));
            (key, ck, s.partition_remaining)
        });
        Ok(Limits {
            limit: state.as_ref().map_or(limit, |s| s.remaining.or(limit)),
            per_partition,
            count_only,
            page_size,
            resume,
        })
    }

    /// How Cassandra would print the command's limits: the statement's
    /// LIMIT (what is left of it on a later page), or the page size when
    /// smaller; DISTINCT reads one row per partition.
    fn shown(&self, plan: &SelectPlan) -> (Option<u64>, Option<u32>) {
        let limit = match (self.limit.map(u64::from), self.page_size.map(|p| p as u64)) {
            (Some(l), Some(p)) => Some(l.min(p)),
            (l, p) => l.or(p),
        };
        let per_partition = if plan.distinct {
            Some(1)
        } else {
            self.per_partition
        };
        (limit, per_partition)
    }
}

/// What a charged read found: its warnings, and the most tombstones one
/// command passed.
#[derive(Default)]
struct Charged {
    warnings: Vec<String>,
    most: Option<u64>,
}

impl Charged {
    /// Charges one command's `count`: the read fails past the failure
    /// threshold, and is warned of past the warning one (the warning names
    /// the `command` and the `token` it read at).
    fn command(
        &mut self,
        c: &cost::Charging,
        count: cost::Count,
        command: impl FnOnce() -> String,
        token: i64,
    ) -> Result<(), CqlError> {
        self.most = self.most.max(Some(count.tombstones));
        if let Some(e) = cost::failure(c, count) {
            return Err(e);
        }
        if count.tombstones > c.thresholds.warn {
            self.warnings
                .extend(cost::warning(c, count, &command(), token));
        }
        Ok(())
    }
}

/// What every stage of one page reads.
struct Read<'a> {
    plan: &'a SelectPlan,
    values: &'a Values<'a>,
    schema: &'a TableSchema,
    charging: Option<&'a cost::Charging>,
    /// The command's limits as Cassandra prints them.
    shown: (Option<u64>, Option<u32>),
}

impl Read<'_> {
    /// The command's text, on one partition (`key`) or the token range.
    fn command(&self, key: Option<&PartitionKey>) -> String {
        cost::command_cql(self.plan, self.values, key, self.shown.0, self.shown.1)
    }
}

/// Runs `plan` on `table`, charging its tombstones when `charging` says how
/// (invariants 1–5 of `cost`; `None` for tables Cassandra exempts).
pub(crate) fn run(
    table: &mut TableData,
    plan: &SelectPlan,
    values: &Values,
    page_size: Option<usize>,
    paging_state: Option<&[u8]>,
    charging: Option<&cost::Charging>,
) -> Result<Page, CqlError> {
    let schema = table.schema.clone();
    let limits = Limits::of(plan, values, page_size, paging_state, &schema)?;
    let read = Read {
        plan,
        values,
        schema: &schema,
        charging,
        shown: limits.shown(plan),
    };
    let mut walk = walk(&read, &limits)?;
    let mut charged = Charged::default();
    match &plan.partition {
        PartitionSel::Keys(ops) => by_keys(table, &read, ops, &mut walk, &mut charged)?,
        PartitionSel::Scan { start, end } => {
            by_scan(table, &read, (start, end), &mut walk, &mut charged)?;
        }
    }
    Ok(cut(plan, walk, &limits, charged))
}

/// The walk over the partitions: ranges, filters and limits resolved.
fn walk<'a>(read: &Read<'a>, limits: &Limits) -> Result<Walk<'a>, CqlError> {
    let (plan, values, schema) = (read.plan, read.values, read.schema);
    Ok(Walk {
        plan,
        now: values.now,
        ranges: clustering_ranges(schema, &plan.clustering, values)?,
        filters: plan
            .filters
            .iter()
            .map(|f| {
                let name = &schema.columns[f.column].name;
                Ok(RowFilter {
                    column: f.column,
                    op: f.op,
                    values: values.list(&f.value, name)?,
                })
            })
            .collect::<Result<_, CqlError>>()?,
        // Sorting across partitions needs every row before the LIMIT cut.
        limit: if plan.sort_across_partitions {
            None
        } else {
            limits.limit.map(u64::from)
        },
        per_partition: limits.per_partition,
        cap: limits.page_size.map(|p| p.saturating_add(1)),
        page_size: limits.page_size,
        count: cost::Count::default(),
        resume: limits.resume.clone(),
        out: Vec::new(),
        counted: 0,
        count_only: limits.count_only,
        grace: schema.gc_grace(),
        dead: Vec::new(),
    })
}

/// The partitions named by key, in key order: one command each
/// (invariant 4 of `cost`).
fn by_keys(
    table: &mut TableData,
    read: &Read<'_>,
    ops: &[InOperand],
    walk: &mut Walk<'_>,
    charged: &mut Charged,
) -> Result<(), CqlError> {
    let (schema, values) = (read.schema, read.values);
    let mut lists = Vec::new();
    for (op, &i) in ops.iter().zip(&schema.partition_key) {
        lists.push(values.list(op, &schema.columns[i].name)?);
    }
    for key in bind::partition_keys(lists)? {
        if walk.resume.as_ref().is_some_and(|(rk, _, _)| &key < rk) {
            continue;
        }
        let Some(part) = table.partitions.get(&key) else {
            continue;
        };
        walk.count = cost::Count::default();
        let more = walk.partition(&key, part, schema);
        let dead = std::mem::take(&mut walk.dead);
        table.purge_rows(&key, &dead, values.now);
        if let Some(c) = read.charging {
            charged.command(c, walk.count, || read.command(Some(&key)), key.token)?;
        }
        if !more {
            break;
        }
    }
    Ok(())
}

/// The partitions in token order between `bounds`, from where a later
/// page resumes: one command for the page (invariant 4 of `cost`).
fn by_scan(
    table: &mut TableData,
    read: &Read<'_>,
    (start, end): (&SliceBound, &SliceBound),
    walk: &mut Walk<'_>,
    charged: &mut Charged,
) -> Result<(), CqlError> {
    let (schema, values) = (read.schema, read.values);
    let mut lo = token_bound(values, start, true)?;
    let hi = token_bound(values, end, false)?;
    if let Some((rk, ck, _)) = &walk.resume {
        let from = if ck.is_some() {
            Bound::Included(rk.clone())
        } else {
            Bound::Excluded(rk.clone())
        };
        lo = later_lower(lo, from);
    }
    if !valid_range(&lo, &hi) {
        return Ok(());
    }
    let grace = schema.gc_grace();
    let mut emptied = Vec::new();
    let mut last_token = None;
    for (key, part) in table.partitions.range_mut((lo, hi)) {
        part.purge(values.now, grace);
        if part.is_empty() {
            emptied.push(key.clone());
            continue;
        }
        if walk.counting() {
            last_token = Some(key.token);
        }
        let more = walk.partition(key, part, schema);
        // The partition was purged whole above.
        walk.dead.clear();
        if !more {
            break;
        }
    }
    for k in emptied {
        table.partitions.remove(&k);
    }
    if let Some(c) = read.charging {
        let token = last_token.unwrap_or_default();
        charged.command(c, walk.count, || read.command(None), token)?;
    }
    Ok(())
}

/// The page cut from the walk's rows: sorted across partitions and cut
/// at the LIMIT if the plan asks, cut at the page size, with the paging
/// state of its last row when more follow.
fn cut(plan: &SelectPlan, walk: Walk<'_>, limits: &Limits, charged: Charged) -> Page {
    let Charged { warnings, most } = charged;
    if limits.count_only {
        return Page {
            rows: vec![
                plan.outputs
                    .iter()
                    .map(|_| Some((walk.counted as i64).to_be_bytes().to_vec()))
                    .collect(),
            ],
            paging_state: None,
            warnings,
            tombstones: most,
        };
    }
    let mut out: Vec<Emitted> = walk.out;
    if plan.sort_across_partitions {
        out.sort_by(|a, b| match (&a.clustering, &b.clustering) {
            (Some(x), Some(y)) => {
                if plan.reversed {
                    y.cmp(x)
                } else {
                    x.cmp(y)
                }
            }
            _ => Ordering::Equal,
        });
        if let Some(l) = limits.limit {
            out.truncate(l as usize);
        }
    }
    let mut paging_state = None;
    if let Some(p) = limits.page_size
        && out.len() > p
    {
        out.truncate(p);
        if let Some(last) = out.last() {
            paging_state = Some(
                PagingState {
                    partition: last.key.bytes.clone(),
                    clustering: last.clustering.as_ref().map(Clustering::raw_parts),
                    remaining: limits.limit.map(|l| l.saturating_sub(out.len() as u32)),
                    partition_remaining: limits
                        .per_partition
                        .map(|ppl| ppl.saturating_sub(last.in_partition)),
                }
                .encode(),
            );
        }
    }
    Page {
        rows: out.into_iter().map(|e| e.values).collect(),
        paging_state,
        warnings,
        tombstones: most,
    }
}
