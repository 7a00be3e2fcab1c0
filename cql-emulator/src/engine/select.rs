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

use crate::engine::compile::{OutputKind, SelectPlan};
use crate::engine::data::{Clustering, Partition, PartitionKey, Row};
use crate::engine::schema::{ColumnKind, TableSchema};
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
            self.charge_markers(part, (start, end), stop);
            if stop.is_some() {
                break;
            }
        }
        self.ranges = ranges;
        !done
    }

    /// Charges the range tombstones of `part` the walk of the range
    /// `start..=end` passed: up to where it `stop`ped, if it did.
    fn charge_markers(
        &mut self,
        part: &Partition,
        (start, end): (&Clustering, &Clustering),
        stop: Option<&Clustering>,
    ) {
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

pub(crate) mod cost;
mod page;
mod paging;
mod ranges;

pub(crate) use page::run;

pub(crate) use ranges::clustering_ranges;
