//! One datacenter's copy of the data: the tables, the sweep that forgets
//! what is past gc grace (invariant 3 of `memory`), and the operations a
//! coordinator runs on it — apply versions, read a slice, scan keys, and
//! hand a row's versions to another replica (read repair, hints).
//!
//! The embedded store keeps one `Replica` per datacenter and treats it as
//! that datacenter's whole replica set: a `LOCAL_QUORUM` there is this
//! copy. Failures of single nodes inside a datacenter are not modelled
//! (`memory/network.rs` says why).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::time::Duration;

use super::row::{Part, Row};
use crate::cell::{Cell, RowCells, RowQuery, Table, Timestamp, TokenRange};
use crate::reconcile::CellVersion;

/// A table's rows in token order, as Cassandra's partitioner places them:
/// scans of keys and of cells walk them so.
type TableData = BTreeMap<RowKey, Row>;

/// A row's place in its table: its partition token, then its key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct RowKey {
    token: i64,
    key: String,
}

impl RowKey {
    pub(super) fn of(key: &str) -> Self {
        RowKey {
            token: crate::tombstones::token(key),
            key: key.to_string(),
        }
    }
}

/// One datacenter's data.
#[derive(Debug, Default)]
pub(super) struct Replica {
    tables: HashMap<Table, TableData>,
    /// Rows to sweep, by the time they may next hold a purgeable version
    /// (invariant 3 of `memory`). At most one entry per row: the row's
    /// `sweep_at`.
    sweeps: BTreeSet<(Timestamp, Table, String)>,
}

/// What a slice read found: the live cells, the tombstones passed, and
/// whether it stopped for passing more than the failure threshold.
pub(super) struct Slice {
    pub(super) cells: Vec<Cell>,
    pub(super) tombstones: u64,
    pub(super) failed: bool,
}

/// What one page of a key scan found.
pub(super) struct ScanPage {
    pub(super) keys: Vec<String>,
    pub(super) more: bool,
    pub(super) tombstones: u64,
    pub(super) failed: bool,
}

/// How long after its due time a swept row is swept again at the
/// earliest: sweeps cost a pass over the row, so a row whose dead versions
/// come due one after another is swept a few times per gc grace rather
/// than once per second. Reads count by the exact rule whatever the sweep
/// has done (invariant 3 of `memory`).
fn sweep_slack(grace: Duration) -> Duration {
    (grace / 8).clamp(Duration::from_secs(1), Duration::from_secs(3600))
}

impl Replica {
    /// Invariant 3 of `memory`: sweeps every row due at `now`.
    pub(super) fn sweep_due(&mut self, now: Timestamp, grace_of: &dyn Fn(Table) -> Duration) {
        while let Some(first) = self.sweeps.first() {
            if first.0 > now {
                break;
            }
            let Some((due, table, key)) = self.sweeps.pop_first() else {
                break;
            };
            let grace = grace_of(table);
            let Some(rows) = self.tables.get_mut(&table) else {
                continue;
            };
            // An entry the row no longer owns (it was emptied by a read and
            // made again since) is stale: its own entry covers it.
            let rk = RowKey::of(&key);
            let Some(row) = rows.get_mut(&rk).filter(|r| r.sweep_at == Some(due)) else {
                continue;
            };
            row.sweep_at = None;
            row.cells.retain(|_, c| {
                c.purge(now, grace);
                !c.is_empty()
            });
            if row.cells.is_empty() {
                rows.remove(&rk);
                continue;
            }
            let next = row.cells.values().filter_map(|c| c.purge_time(grace)).min();
            if let Some(next) = next {
                let at = next.max(now.saturating_add(sweep_slack(grace)));
                row.sweep_at = Some(at);
                self.sweeps.insert((at, table, key));
            }
        }
    }

    /// Merges `incoming` versions into `row` of `table`.
    pub(super) fn apply(
        &mut self,
        table: Table,
        row: &str,
        incoming: impl Iterator<Item = (String, Part, CellVersion)>,
        now: Timestamp,
        grace: Duration,
    ) {
        let Replica { tables, sweeps } = self;
        let data = tables
            .entry(table)
            .or_default()
            .entry(RowKey::of(row))
            .or_default();
        let mut earliest: Option<Timestamp> = None;
        for (column, part, version) in incoming {
            let purge_at = version.purge_time(grace);
            let col = data.cells.entry(column).or_default();
            let stored = col.apply(part, version, now, grace);
            if stored && let Some(at) = purge_at {
                earliest = Some(earliest.map_or(at, |e| e.min(at)));
            }
        }
        data.cells.retain(|_, c| !c.is_empty());
        // Invariant 3 of `memory`: every version that will die is covered by its row's sweep.
        if let Some(at) = earliest
            && data.sweep_at.is_none_or(|queued| at < queued)
        {
            if let Some(queued) = data.sweep_at.replace(at) {
                sweeps.remove(&(queued, table, row.to_string()));
            }
            sweeps.insert((at, table, row.to_string()));
        }
    }

    /// Every version held for `row` of `table`, dead ones and fences
    /// included, in column order, each with its part.
    pub(super) fn versions(&self, table: Table, row: &str) -> Vec<(String, Part, CellVersion)> {
        self.tables
            .get(&table)
            .and_then(|t| t.get(&RowKey::of(row)))
            .map(|r| {
                r.cells
                    .iter()
                    .flat_map(|(c, col)| col.parts().map(|(p, v)| (c.clone(), p, v.clone())))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The fencing token recorded for `column` of `row` of `table`, and
    /// the newest timestamp of its versions (a fenced write is stamped above it).
    pub(super) fn fence(
        &self,
        table: Table,
        row: &str,
        column: &str,
        now: Timestamp,
    ) -> (Option<u64>, Option<Timestamp>) {
        self.tables
            .get(&table)
            .and_then(|t| t.get(&RowKey::of(row)))
            .and_then(|r| r.cells.get(column))
            .map_or((None, None), |c| (c.fence(now), c.newest_timestamp()))
    }

    /// The keys of `table` this replica holds anything for.
    pub(super) fn keys(&self, table: Table) -> Vec<String> {
        self.tables
            .get(&table)
            .map(|t| t.keys().map(|k| k.key.clone()).collect())
            .unwrap_or_default()
    }

    /// Whether any row is queued for a sweep.
    #[cfg(test)]
    pub(super) fn sweeps_pending(&self) -> bool {
        !self.sweeps.is_empty()
    }

    /// How many versions this replica holds, dead ones included.
    pub(super) fn stored_versions(&self) -> usize {
        self.tables
            .values()
            .flat_map(|t| t.values())
            .flat_map(|r| r.cells.values())
            .map(|c| c.versions().count())
            .sum()
    }

    /// Reads a slice of `row` of `table` (invariants 1–3 of `tombstones`):
    /// live cells from `query.start_column` on, up to its limit, counting
    /// the dead versions passed on the way and forgetting the purgeable
    /// ones.
    pub(super) fn read(
        &mut self,
        table: Table,
        row: &str,
        query: &RowQuery,
        now: Timestamp,
        grace: Duration,
        fail_above: u64,
    ) -> Slice {
        let limit = query.limit.map_or(usize::MAX, |n| n.get() as usize);
        let mut out = Vec::new();
        let mut tombstones = 0u64;
        let mut failed = false;
        let rk = RowKey::of(row);
        if let Some(rows) = self.tables.get_mut(&table)
            && let Some(data) = rows.get_mut(&rk)
        {
            let lower = match &query.start_column {
                Some(start) => Bound::Included(start.clone()),
                None => Bound::Unbounded,
            };
            let mut purgeable = Vec::new();
            // Invariant 2 of `tombstones`: count the dead versions passed until the limit of live
            // cells is reached; nothing after the last live cell returned.
            for (column, col) in data.cells.range((lower, Bound::Unbounded)) {
                if out.len() >= limit {
                    break;
                }
                if let Some(cell) = col.live_cell(column, now) {
                    out.push(cell);
                    continue;
                }
                // Invariant 1 of `tombstones`: past gc grace it costs nothing, and goes.
                if col.has_purgeable(now, grace) {
                    purgeable.push(column.clone());
                }
                tombstones += col.tombstones(now, grace);
                if tombstones > fail_above {
                    failed = true;
                    break;
                }
            }
            for column in purgeable {
                if let Some(col) = data.cells.get_mut(&column) {
                    col.purge(now, grace);
                    if col.is_empty() {
                        data.cells.remove(&column);
                    }
                }
            }
            if data.cells.is_empty() {
                rows.remove(&rk);
            }
        }
        Slice {
            cells: out,
            tombstones,
            failed,
        }
    }

    /// One page of the keys of `table` holding live cells, after `after`
    /// (invariant 4 of `tombstones`: each partition up to its first live
    /// cell).
    pub(super) fn scan(
        &self,
        table: Table,
        after: Option<String>,
        page_size: usize,
        now: Timestamp,
        grace: Duration,
        fail_above: u64,
    ) -> ScanPage {
        let lower = match after {
            Some(key) => Bound::Excluded(RowKey::of(&key)),
            None => Bound::Unbounded,
        };
        let mut page = ScanPage {
            keys: Vec::new(),
            more: false,
            tombstones: 0,
            failed: false,
        };
        let Some(rows) = self.tables.get(&table) else {
            return page;
        };
        'rows: for (key, data) in rows.range((lower, Bound::Unbounded)) {
            if page.keys.len() >= page_size {
                // A full page says another may follow whenever a row does,
                // as a cluster's paging state does: the next page passes
                // that row's tombstones, even if it then finds nothing
                // live (a row of tombstones after the last live one must
                // still cost, and refuse, its scan).
                page.more = true;
                break;
            }
            for col in data.cells.values() {
                if col.live(now).is_some() {
                    page.keys.push(key.key.clone());
                    break;
                }
                page.tombstones += col.tombstones(now, grace);
                if page.tombstones > fail_above {
                    page.failed = true;
                    break 'rows;
                }
            }
        }
        page
    }
}

/// What one page of a scan of cells found.
pub(super) struct CellScan {
    pub(super) rows: Vec<RowCells>,
    /// Where the next page starts (the last row and column returned), if
    /// more live cells follow in the range.
    pub(super) more: Option<(String, String)>,
    pub(super) tombstones: u64,
    pub(super) failed: bool,
}

/// The rows of a token range, from a row (and after a column of it) on:
/// the bounds of a `BTreeMap` range over [`RowKey`]s.
fn row_bounds(
    range: TokenRange,
    after: Option<&(String, String)>,
) -> Option<(Bound<RowKey>, Bound<RowKey>)> {
    let lower = match after {
        Some((key, _)) => Bound::Included(RowKey::of(key)),
        None => Bound::Included(RowKey {
            token: range.start.checked_add(1)?,
            key: String::new(),
        }),
    };
    let upper = match range.end.checked_add(1) {
        Some(token) => Bound::Excluded(RowKey {
            token,
            key: String::new(),
        }),
        None => Bound::Unbounded,
    };
    Some((lower, upper))
}

impl Replica {
    /// The keys of `table` whose tokens fall in `range` after `after`'s
    /// row (its row included), at most `limit` of them: the rows a page of
    /// a cell scan can reach, to repair before a quorum scan reads them.
    pub(super) fn keys_in(
        &self,
        table: Table,
        range: TokenRange,
        after: Option<&(String, String)>,
        limit: usize,
    ) -> Vec<String> {
        let (Some(rows), Some(bounds)) = (self.tables.get(&table), row_bounds(range, after)) else {
            return Vec::new();
        };
        rows.range(bounds)
            .take(limit)
            .map(|(k, _)| k.key.clone())
            .collect()
    }

    /// One page of the live cells of `table`'s rows in `range` (invariant
    /// 4 of `tombstones`: a scan passes every dead version on its way, and
    /// fails past `fail_above`), after the row and column of `after`, at
    /// most `page_size` cells.
    #[allow(clippy::too_many_arguments)] // each is one of the scan's inputs
    pub(super) fn scan_cells(
        &self,
        table: Table,
        range: TokenRange,
        after: Option<(String, String)>,
        page_size: usize,
        now: Timestamp,
        grace: Duration,
        fail_above: u64,
    ) -> CellScan {
        let mut page = CellScan {
            rows: Vec::new(),
            more: None,
            tombstones: 0,
            failed: false,
        };
        let (Some(rows), Some(bounds)) =
            (self.tables.get(&table), row_bounds(range, after.as_ref()))
        else {
            return page;
        };
        let mut taken = 0;
        for (key, data) in rows.range(bounds) {
            let columns = match &after {
                Some((row, column)) if *row == key.key => data
                    .cells
                    .range::<String, _>((Bound::Excluded(column.clone()), Bound::Unbounded)),
                _ => data.cells.range::<String, _>(..),
            };
            let mut cells = Vec::new();
            for (column, col) in columns {
                if taken >= page_size {
                    // A full page says another may follow whenever a
                    // column does, as a cluster's paging state does: the
                    // next page passes its tombstones, even if it then
                    // finds nothing live.
                    if !cells.is_empty() {
                        page.rows.push(RowCells {
                            key: key.key.clone(),
                            token: key.token,
                            cells,
                        });
                    }
                    page.more = page
                        .rows
                        .last()
                        .and_then(|r| r.cells.last().map(|c| (r.key.clone(), c.column.clone())));
                    return page;
                }
                if let Some(cell) = col.live_cell(column, now) {
                    taken += 1;
                    cells.push(cell);
                    continue;
                }
                page.tombstones += col.tombstones(now, grace);
                if page.tombstones > fail_above {
                    page.failed = true;
                    return page;
                }
            }
            if !cells.is_empty() {
                page.rows.push(RowCells {
                    key: key.key.clone(),
                    token: key.token,
                    cells,
                });
            }
        }
        page
    }
}
