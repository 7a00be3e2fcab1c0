//! Writes applied under the store's mutex, the sweep that forgets what is
//! past gc grace (invariant 3 of `memory`), and the tombstone statistics.

use std::time::Duration;

use super::{MemoryStore, State};
use crate::cell::{OpKind, Table, Timestamp};
use crate::reconcile::CellVersion;

impl MemoryStore {
    /// How long after its due time a swept row is swept again at the
    /// earliest: sweeps cost a pass over the row, so a row whose dead
    /// versions come due one after another is swept a few times per gc
    /// grace rather than once per second. Reads count by the exact rule
    /// whatever the sweep has done (invariant 3 of `memory`).
    fn sweep_slack(grace: Duration) -> Duration {
        (grace / 8).clamp(Duration::from_secs(1), Duration::from_secs(3600))
    }

    /// Invariant 3 of `memory`: sweeps every row due at `now`.
    pub(super) fn sweep_due(&self, state: &mut State, now: Timestamp) {
        while let Some(first) = state.sweeps.first() {
            if first.0 > now {
                break;
            }
            let Some((due, table, key)) = state.sweeps.pop_first() else {
                break;
            };
            let grace = self.gc_grace(table);
            let Some(rows) = state.tables.get_mut(&table) else {
                continue;
            };
            // An entry the row no longer owns (it was emptied by a read and
            // made again since) is stale: its own entry covers it.
            let Some(row) = rows.get_mut(&key).filter(|r| r.sweep_at == Some(due)) else {
                continue;
            };
            row.sweep_at = None;
            row.cells.retain(|_, c| {
                c.purge(now, grace);
                !c.is_empty()
            });
            if row.cells.is_empty() {
                rows.remove(&key);
                continue;
            }
            let next = row.cells.values().filter_map(|c| c.purge_time(grace)).min();
            if let Some(next) = next {
                let at = next.max(now.saturating_add(Self::sweep_slack(grace)));
                row.sweep_at = Some(at);
                state.sweeps.insert((at, table, key));
            }
        }
    }

    pub(super) fn apply(
        &self,
        table: Table,
        row: &str,
        incoming: impl Iterator<Item = (String, CellVersion)>,
    ) {
        let now = self.clock.now();
        let grace = self.gc_grace(table);
        let mut state = self.lock();
        self.sweep_due(&mut state, now);
        let State { tables, sweeps, .. } = &mut *state;
        let data = tables
            .entry(table)
            .or_default()
            .entry(row.to_string())
            .or_default();
        let mut earliest: Option<Timestamp> = None;
        for (column, version) in incoming {
            let purge_at = version.purge_time(grace);
            let col = data.cells.entry(column).or_default();
            let stored = col.apply(version, now, grace);
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

    pub(super) fn record(&self, state: &mut State, table: Table, op: OpKind, tombstones: u64) {
        let stats = state.stats.entry(table).or_default();
        let slot = match op {
            OpKind::Scan => &mut stats.max_per_scan,
            _ => &mut stats.max_per_read,
        };
        *slot = (*slot).max(tombstones);
    }
}
