//! Applying a [`Change`] to a partition (the table's invariants 1–4).

use std::ops::Bound;
use std::time::Duration;

use lockshift_store::Timestamp;
use lockshift_store::reconcile::CellVersion;

use super::{Clustering, Deletion, Partition, RangeTombstone, merge_version};

/// A change to one partition; timestamps are final (server or client chosen).
#[derive(Clone, Debug)]
pub(crate) enum Change {
    /// INSERT (with `marker`) or UPDATE: set cells; `None` writes a cell
    /// tombstone (a null value).
    Upsert {
        clustering: Clustering,
        marker: bool,
        cells: Vec<(usize, Option<Vec<u8>>)>,
        timestamp: Timestamp,
        ttl: Option<Duration>,
    },
    /// `DELETE c1, c2 FROM … WHERE <full key>`.
    DeleteCells {
        clustering: Clustering,
        columns: Vec<usize>,
        timestamp: Timestamp,
    },
    /// `DELETE FROM … WHERE <full key>`.
    DeleteRow {
        clustering: Clustering,
        timestamp: Timestamp,
    },
    /// `DELETE FROM … WHERE <prefix or slice>`.
    DeleteRange {
        start: Clustering,
        end: Clustering,
        timestamp: Timestamp,
    },
    /// `DELETE FROM … WHERE <partition key>`.
    DeletePartition { timestamp: Timestamp },
}

impl Partition {
    /// The newest deletion covering row `key` from above the row itself.
    fn covering_deletion(&self, key: &Clustering) -> Option<Deletion> {
        let mut best = self.deletion;
        for rt in self.ranges.iter().filter(|rt| rt.covers(key)) {
            best = Some(Deletion::merge(best, rt.deletion));
        }
        best
    }

    /// Applies `change` at engine time `now` (invariants 1–4) in a table whose gc
    /// grace is `grace`.
    pub(crate) fn apply(&mut self, change: Change, now: Timestamp, grace: Duration) {
        // Invariant 4: what is past gc grace is forgotten before anything meets it.
        self.ranges.retain(|rt| !rt.deletion.purgeable(now, grace));
        if self.deletion.is_some_and(|d| d.purgeable(now, grace)) {
            self.deletion = None;
        }
        let target = match &change {
            Change::Upsert { clustering, .. }
            | Change::DeleteCells { clustering, .. }
            | Change::DeleteRow { clustering, .. } => Some(clustering),
            Change::DeleteRange { .. } | Change::DeletePartition { .. } => None,
        };
        if let Some(row) = target.and_then(|ck| self.rows.get_mut(ck)) {
            row.purge(now, grace);
        }
        match change {
            Change::Upsert {
                clustering,
                marker,
                cells,
                timestamp,
                ttl,
            } => self.upsert(clustering, marker, cells, timestamp, ttl, now),
            Change::DeleteCells {
                clustering,
                columns,
                timestamp,
            } => self.delete_cells(clustering, columns, timestamp, now),
            Change::DeleteRow {
                clustering,
                timestamp,
            } => self.delete_row(clustering, timestamp, now),
            Change::DeleteRange {
                start,
                end,
                timestamp,
            } => self.delete_range(start, end, timestamp, now),
            Change::DeletePartition { timestamp } => {
                let d = Deletion {
                    timestamp,
                    deleted_at: now,
                };
                for row in self.rows.values_mut() {
                    row.drop_shadowed(&d);
                }
                self.rows.retain(|_, r| !r.is_empty());
                self.ranges.retain(|rt| rt.deletion.timestamp > timestamp);
                self.deletion = Some(Deletion::merge(self.deletion, d));
            }
        }
    }

    /// INSERT or UPDATE of one row's cells, unless a deletion shadows it.
    fn upsert(
        &mut self,
        clustering: Clustering,
        marker: bool,
        cells: Vec<(usize, Option<Vec<u8>>)>,
        timestamp: Timestamp,
        ttl: Option<Duration>,
        now: Timestamp,
    ) {
        let above = self.covering_deletion(&clustering);
        if above.is_some_and(|d| d.shadows(timestamp)) {
            return;
        }
        // Whole seconds, as Cassandra counts them (a cell lives
        // `ttl - f` when written `f` into a second).
        let expires_at = ttl.map(|t| lockshift_store::reconcile::ttl_deadline(now, t));
        let row = self.rows.entry(clustering.clone()).or_default();
        if row.deletion.is_some_and(|d| d.shadows(timestamp)) {
            return;
        }
        if marker {
            let m = CellVersion::Live {
                value: Vec::new(),
                timestamp,
                expires_at,
            };
            merge_version(&mut row.marker, m, now);
        }
        for (col, value) in cells {
            let v = match value {
                Some(value) => CellVersion::Live {
                    value,
                    timestamp,
                    expires_at,
                },
                None => CellVersion::Tombstone {
                    timestamp,
                    deleted_at: now,
                },
            };
            let mut slot = row.cells.remove(&col);
            merge_version(&mut slot, v, now);
            if let Some(v) = slot {
                row.cells.insert(col, v);
            }
        }
        if row.is_empty() {
            self.rows.remove(&clustering);
        }
    }

    /// Cell tombstones in one row, unless a deletion shadows them.
    fn delete_cells(
        &mut self,
        clustering: Clustering,
        columns: Vec<usize>,
        timestamp: Timestamp,
        now: Timestamp,
    ) {
        let above = self.covering_deletion(&clustering);
        if above.is_some_and(|d| d.shadows(timestamp)) {
            return;
        }
        let row = self.rows.entry(clustering).or_default();
        if row.deletion.is_some_and(|d| d.shadows(timestamp)) {
            return;
        }
        for col in columns {
            let t = CellVersion::Tombstone {
                timestamp,
                deleted_at: now,
            };
            let mut slot = row.cells.remove(&col);
            merge_version(&mut slot, t, now);
            if let Some(v) = slot {
                row.cells.insert(col, v);
            }
        }
    }

    /// A row deletion, unless a newer one covers the row.
    fn delete_row(&mut self, clustering: Clustering, timestamp: Timestamp, now: Timestamp) {
        let d = Deletion {
            timestamp,
            deleted_at: now,
        };
        if self
            .covering_deletion(&clustering)
            .is_some_and(|c| c.timestamp >= timestamp)
        {
            return;
        }
        let row = self.rows.entry(clustering).or_default();
        row.drop_shadowed(&d);
        row.deletion = Some(Deletion::merge(row.deletion, d));
    }

    /// A range tombstone over `start..=end`.
    fn delete_range(
        &mut self,
        start: Clustering,
        end: Clustering,
        timestamp: Timestamp,
        now: Timestamp,
    ) {
        if start > end {
            return;
        }
        let d = Deletion {
            timestamp,
            deleted_at: now,
        };
        let range = (Bound::Included(start.clone()), Bound::Included(end.clone()));
        let mut emptied = Vec::new();
        for (key, row) in self.rows.range_mut(range) {
            row.drop_shadowed(&d);
            if row.is_empty() {
                emptied.push(key.clone());
            }
        }
        for key in emptied {
            self.rows.remove(&key);
        }
        self.ranges.push(RangeTombstone {
            start,
            end,
            deletion: d,
        });
    }
}
