//! Running a SELECT: choose partitions (by key or token order), walk
//! clustering ranges forwards or backwards, keep live rows that pass the
//! filters, stop at the LIMIT or the page, and hand back a paging state that
//! encodes the last position returned.
//!
//! # Paging state
//!
//! An opaque byte string (version byte, then the last partition key, the
//! last clustering key if any, and the remaining LIMIT and PER PARTITION
//! LIMIT). It encodes a *position*, not an offset, so rows written or
//! deleted between pages neither repeat nor shift the next page — what
//! Cassandra guarantees and what a key scan across pages relies on. A page
//! is only marked as having more when a further row actually exists.

use std::cmp::Ordering;
use std::ops::Bound;

use lockshift_store::Timestamp;

use crate::engine::bind::{self, Bound as Values};
use crate::engine::compile::{OutputKind, PartitionSel, SelectPlan};
use crate::engine::data::{Clustering, Partition, PartitionKey, Row, TableData};
use crate::engine::schema::{ColumnKind, TableSchema};
use crate::error::CqlError;
use crate::parse::ast::Op;

/// One page of a SELECT.
#[derive(Debug, Default)]
pub(crate) struct Page {
    pub(crate) rows: Vec<Vec<Option<Vec<u8>>>>,
    pub(crate) paging_state: Option<Vec<u8>>,
    /// Warnings for the response frame (Cassandra's tombstone warning).
    pub(crate) warnings: Vec<String>,
    /// The most tombstones one command of this page passed (invariant 4 of `cost`: a page
    /// reading several partition keys runs one command per key); `None`
    /// when the read was not charged (system keyspaces, the fault table).
    pub(crate) tombstones: Option<u64>,
}

/// One emitted row and where it sits.
struct Emitted {
    key: PartitionKey,
    clustering: Option<Clustering>,
    values: Vec<Option<Vec<u8>>>,
    in_partition: u32,
}

/// A resolved row filter (ALLOW FILTERING).
struct RowFilter {
    column: usize,
    op: Op,
    values: Vec<Vec<u8>>,
}

struct Walk<'a> {
    plan: &'a SelectPlan,
    now: Timestamp,
    ranges: Vec<(Clustering, Clustering)>,
    filters: Vec<RowFilter>,
    /// Rows still allowed by LIMIT.
    limit: Option<u64>,
    per_partition: Option<u32>,
    /// Stop after this many rows (page size + 1, to know if more follow).
    cap: Option<usize>,
    /// The page size: rows after the page's last one are not charged (invariant 3 of `cost`).
    page_size: Option<usize>,
    /// The current command's tombstone count (invariants 1–4 of `cost`).
    count: cost::Count,
    resume: Option<(PartitionKey, Option<Clustering>, Option<u32>)>,
    out: Vec<Emitted>,
    counted: u64,
    count_only: bool,
    /// gc grace of the table, and the dead rows passed over that hold
    /// something to purge.
    grace: std::time::Duration,
    dead: Vec<Clustering>,
}

impl Walk<'_> {
    /// Whether a visited row is still charged: not past the page (invariant 3 of `cost`).
    fn counting(&self) -> bool {
        self.page_size.is_none_or(|p| self.out.len() < p)
    }

    fn charge(&mut self, c: cost::Count) {
        if self.counting() {
            self.count.tombstones += c.tombstones;
            self.count.live_rows += c.live_rows;
        }
    }

    fn full(&self) -> bool {
        let taken = if self.count_only {
            self.counted
        } else {
            self.out.len() as u64
        };
        self.limit.is_some_and(|l| taken >= l) || self.cap.is_some_and(|c| self.out.len() >= c)
    }

    /// Visits one partition; false once the walk is complete.
    fn partition(&mut self, key: &PartitionKey, part: &Partition, schema: &TableSchema) -> bool {
        let mut resume_ck = None;
        let mut in_partition = 0u32;
        if let Some((rk, ck, part_left)) = &self.resume
            && rk == key
        {
            match ck {
                None => return true,
                Some(ck) => resume_ck = Some(ck.clone()),
            }
            if let (Some(ppl), Some(left)) = (self.per_partition, part_left) {
                if *left == 0 {
                    return true;
                }
                in_partition = ppl.saturating_sub(*left);
            }
        }
        if self.plan.distinct {
            let (c, live) = cost::distinct_partition(part, self.now, self.grace);
            self.charge(c);
            if live {
                self.emit(key, None, None, schema, 1);
            }
            return !self.full();
        }
        let ranges = std::mem::take(&mut self.ranges);
        let order: Box<dyn Iterator<Item = &(Clustering, Clustering)>> = if self.plan.reversed {
            Box::new(ranges.iter().rev())
        } else {
            Box::new(ranges.iter())
        };
        let mut done = false;
        for (start, end) in order {
            let rows = part
                .rows
                .range((Bound::Included(start), Bound::Included(end)));
            let rows: Box<dyn Iterator<Item = (&Clustering, &Row)>> = if self.plan.reversed {
                Box::new(rows.rev())
            } else {
                Box::new(rows)
            };
            // Where this range's walk stopped short of its end, if it did.
            let mut stop: Option<&Clustering> = None;
            for (ck, row) in rows {
                if let Some(r) = &resume_ck {
                    let passed = match ck.cmp(r) {
                        Ordering::Equal => true,
                        Ordering::Less => !self.plan.reversed,
                        Ordering::Greater => self.plan.reversed,
                    };
                    if passed {
                        continue;
                    }
                }
                self.charge(cost::Count {
                    live_rows: u64::from(row.is_live(self.now)),
                    tombstones: cost::row_tombstones(row, self.now, self.grace),
                });
                if !row.is_live(self.now) {
                    if row.has_purgeable(self.now, self.grace) {
                        self.dead.push(ck.clone());
                    }
                    continue;
                }
                if !self.passes(schema, key, ck, row) {
                    continue;
                }
                in_partition += 1;
                self.emit(key, Some(ck), Some(row), schema, in_partition);
                if self.full() {
                    done = true;
                    stop = Some(ck);
                    break;
                }
                if self.per_partition.is_some_and(|p| in_partition >= p) {
                    stop = Some(ck);
                    break;
                }
            }
            let (from, to) = match (stop, self.plan.reversed) {
                (Some(at), false) => (start, at),
                (Some(at), true) => (at, end),
                (None, _) => (start, end),
            };
            let markers = cost::range_markers(
                &part.ranges,
                from,
                to,
                stop.is_none(),
                self.plan.reversed,
                self.now,
                self.grace,
            );
            self.charge(cost::Count {
                live_rows: 0,
                tombstones: markers,
            });
            if stop.is_some() {
                break;
            }
        }
        self.ranges = ranges;
        !done
    }

    fn passes(&self, schema: &TableSchema, key: &PartitionKey, ck: &Clustering, row: &Row) -> bool {
        self.filters.iter().all(|f| {
            let Some(v) = column_value(schema, f.column, key, ck, row, self.now) else {
                return false;
            };
            let c = schema.columns[f.column].collation;
            match f.op {
                Op::Eq => f.values.iter().any(|x| c.compare(&v, x) == Ordering::Equal),
                op => f.values.first().is_some_and(|x| {
                    let o = c.compare(&v, x);
                    match op {
                        Op::Lt => o == Ordering::Less,
                        Op::Le => o != Ordering::Greater,
                        Op::Gt => o == Ordering::Greater,
                        _ => o != Ordering::Less,
                    }
                }),
            }
        })
    }

    fn emit(
        &mut self,
        key: &PartitionKey,
        ck: Option<&Clustering>,
        row: Option<&Row>,
        schema: &TableSchema,
        in_partition: u32,
    ) {
        if self.count_only {
            self.counted += 1;
            return;
        }
        let values = self
            .plan
            .outputs
            .iter()
            .map(|o| output(schema, o, key, ck, row, self.now))
            .collect();
        self.out.push(Emitted {
            key: key.clone(),
            clustering: ck.cloned(),
            values,
            in_partition,
        });
    }
}

fn column_value(
    schema: &TableSchema,
    col: usize,
    key: &PartitionKey,
    ck: &Clustering,
    row: &Row,
    now: Timestamp,
) -> Option<Vec<u8>> {
    let c = &schema.columns[col];
    match c.kind {
        ColumnKind::PartitionKey => key
            .components(schema.partition_key.len())
            .get(c.position as usize)
            .map(|b| b.to_vec()),
        ColumnKind::Clustering => ck.parts.get(c.position as usize).map(|p| p.raw.clone()),
        ColumnKind::Regular => row.live_cell(col, now).map(|(b, _, _)| b.to_vec()),
    }
}

/// `ttl()` exactly as the embedded store reports it.
fn remaining_ttl_secs(expires_at: Timestamp, now: Timestamp) -> i32 {
    i32::try_from(lockshift_store::reconcile::ttl_seconds_left(
        expires_at, now,
    ))
    .unwrap_or(i32::MAX)
}

fn output(
    schema: &TableSchema,
    o: &OutputKind,
    key: &PartitionKey,
    ck: Option<&Clustering>,
    row: Option<&Row>,
    now: Timestamp,
) -> Option<Vec<u8>> {
    match o {
        OutputKind::Token => Some(key.token.to_be_bytes().to_vec()),
        OutputKind::Count => None,
        OutputKind::UnixNow => Some((now.as_micros().div_euclid(1000)).to_be_bytes().to_vec()),
        OutputKind::Column(i) => {
            let c = &schema.columns[*i];
            match c.kind {
                ColumnKind::PartitionKey => key
                    .components(schema.partition_key.len())
                    .get(c.position as usize)
                    .map(|b| b.to_vec()),
                ColumnKind::Clustering => ck?.parts.get(c.position as usize).map(|p| p.raw.clone()),
                ColumnKind::Regular => row?.live_cell(*i, now).map(|(b, _, _)| b.to_vec()),
            }
        }
        OutputKind::WriteTime(i) => row?
            .live_cell(*i, now)
            .map(|(_, ts, _)| ts.as_micros().to_be_bytes().to_vec()),
        OutputKind::Ttl(i) => row?
            .live_cell(*i, now)
            .and_then(|(_, _, exp)| exp)
            .map(|exp| remaining_ttl_secs(exp, now).to_be_bytes().to_vec()),
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
    let now = values.now;
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
        Some(b) if !count_only => Some(PagingState::decode(b, &schema)?),
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
    let limit = state.as_ref().map_or(limit, |s| s.remaining.or(limit));
    let mut walk = Walk {
        plan,
        now,
        ranges: clustering_ranges(&schema, &plan.clustering, values)?,
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
            limit.map(u64::from)
        },
        per_partition,
        cap: page_size.map(|p| p.saturating_add(1)),
        page_size,
        count: cost::Count::default(),
        resume,
        out: Vec::new(),
        counted: 0,
        count_only,
        grace: schema.gc_grace(),
        dead: Vec::new(),
    };

    // How Cassandra would print the command's limits: the statement's
    // LIMIT (what is left of it on a later page), or the page size when
    // smaller; DISTINCT reads one row per partition.
    let shown_limit = match (limit.map(u64::from), page_size.map(|p| p as u64)) {
        (Some(l), Some(p)) => Some(l.min(p)),
        (l, p) => l.or(p),
    };
    let shown_per_partition = if plan.distinct {
        Some(1)
    } else {
        per_partition
    };
    let mut warnings = Vec::new();
    let mut most_tombstones: Option<u64> = None;
    match &plan.partition {
        PartitionSel::Keys(ops) => {
            let mut lists = Vec::new();
            for (op, &i) in ops.iter().zip(&schema.partition_key) {
                lists.push(values.list(op, &schema.columns[i].name)?);
            }
            let keys = bind::partition_keys(lists)?;
            for key in keys {
                if walk.resume.as_ref().is_some_and(|(rk, _, _)| &key < rk) {
                    continue;
                }
                let Some(part) = table.partitions.get(&key) else {
                    continue;
                };
                // Invariant 4 of `cost`: one command per partition key.
                walk.count = cost::Count::default();
                let more = walk.partition(&key, part, &schema);
                let dead = std::mem::take(&mut walk.dead);
                table.purge_rows(&key, &dead, now);
                if let Some(c) = charging {
                    most_tombstones = most_tombstones.max(Some(walk.count.tombstones));
                    if let Some(e) = cost::failure(c, walk.count) {
                        return Err(e);
                    }
                    let command = || {
                        cost::command_cql(
                            plan,
                            values,
                            Some(&key),
                            shown_limit,
                            shown_per_partition,
                        )
                    };
                    if walk.count.tombstones > c.thresholds.warn {
                        warnings.extend(cost::warning(c, walk.count, &command(), key.token));
                    }
                }
                if !more {
                    break;
                }
            }
        }
        PartitionSel::Scan { start, end } => {
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
            if valid_range(&lo, &hi) {
                let grace = schema.gc_grace();
                let mut emptied = Vec::new();
                // Invariant 4 of `cost`: one command for the page, across partitions.
                let mut last_token = None;
                for (key, part) in table.partitions.range_mut((lo, hi)) {
                    part.purge(now, grace);
                    if part.is_empty() {
                        emptied.push(key.clone());
                        continue;
                    }
                    if walk.counting() {
                        last_token = Some(key.token);
                    }
                    let more = walk.partition(key, part, &schema);
                    // The partition was purged whole above.
                    walk.dead.clear();
                    if !more {
                        break;
                    }
                }
                for k in emptied {
                    table.partitions.remove(&k);
                }
                if let Some(c) = charging {
                    most_tombstones = most_tombstones.max(Some(walk.count.tombstones));
                    if let Some(e) = cost::failure(c, walk.count) {
                        return Err(e);
                    }
                    if walk.count.tombstones > c.thresholds.warn {
                        let command =
                            cost::command_cql(plan, values, None, shown_limit, shown_per_partition);
                        warnings.extend(cost::warning(
                            c,
                            walk.count,
                            &command,
                            last_token.unwrap_or_default(),
                        ));
                    }
                }
            }
        }
    }

    if count_only {
        return Ok(Page {
            rows: vec![
                plan.outputs
                    .iter()
                    .map(|_| Some((walk.counted as i64).to_be_bytes().to_vec()))
                    .collect(),
            ],
            paging_state: None,
            warnings,
            tombstones: most_tombstones,
        });
    }
    let mut out = walk.out;
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
        if let Some(l) = limit {
            out.truncate(l as usize);
        }
    }
    let mut paging_state = None;
    if let Some(p) = page_size
        && out.len() > p
    {
        out.truncate(p);
        if let Some(last) = out.last() {
            paging_state = Some(
                PagingState {
                    partition: last.key.bytes.clone(),
                    clustering: last.clustering.as_ref().map(Clustering::raw_parts),
                    remaining: limit.map(|l| l.saturating_sub(out.len() as u32)),
                    partition_remaining: per_partition
                        .map(|ppl| ppl.saturating_sub(last.in_partition)),
                }
                .encode(),
            );
        }
    }
    Ok(Page {
        rows: out.into_iter().map(|e| e.values).collect(),
        paging_state,
        warnings,
        tombstones: most_tombstones,
    })
}

pub(crate) mod cost;
mod paging;
mod ranges;

use paging::PagingState;
pub(crate) use ranges::clustering_ranges;
use ranges::{later_lower, token_bound, valid_range};
