//! What the endpoint's reads cost in tombstones, per table, for whoever
//! runs it in-process ([`EmulatorHandle::take_read_costs`](crate::EmulatorHandle::take_read_costs)).
//!
//! Over the wire a client learns a read's tombstone count only from
//! Cassandra's warning, above the warn threshold (1 000) — the endpoint
//! answers exactly as Cassandra does. The endpoint itself counts every
//! read (`engine::select::cost`), and keeps the tally here: how many reads
//! each table served and the most tombstones one of them passed. A
//! benchmark that starts the endpoint reads it after a run to know the
//! worst read, not only whether one passed the threshold.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// What the reads of one table cost, since the endpoint started or since
/// the tally was last taken.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableReadCosts {
    /// The keyspace.
    pub keyspace: String,
    /// The table.
    pub table: String,
    /// Reads answered (a page reading several partition keys counts once,
    /// as its costliest key). Reads that failed for too many tombstones
    /// are not among them: the client gets the failure.
    pub reads: u64,
    /// Tombstones they passed, in all.
    pub tombstones: u64,
    /// The most tombstones one read passed.
    pub max_tombstones: u64,
    /// Reads whose answer carried a warning (above the warn threshold).
    pub warned: u64,
}

/// The tally, shared by the engine (which records) and the handle (which
/// takes).
#[derive(Clone, Debug, Default)]
pub(crate) struct ReadCostLog(Arc<Mutex<BTreeMap<(String, String), TableReadCosts>>>);

impl ReadCostLog {
    /// One charged read of `keyspace.table` that passed `tombstones`.
    pub(crate) fn record(&self, keyspace: &str, table: &str, tombstones: u64, warned: bool) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = map
            .entry((keyspace.to_string(), table.to_string()))
            .or_insert_with(|| TableReadCosts {
                keyspace: keyspace.to_string(),
                table: table.to_string(),
                ..TableReadCosts::default()
            });
        entry.reads += 1;
        entry.tombstones = entry.tombstones.saturating_add(tombstones);
        entry.max_tombstones = entry.max_tombstones.max(tombstones);
        entry.warned += u64::from(warned);
    }

    /// Every table's tally, in (keyspace, table) order, and a fresh start.
    pub(crate) fn take(&self) -> Vec<TableReadCosts> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut *map).into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_per_table_and_takes_afresh() {
        let log = ReadCostLog::default();
        log.record("ks", "main", 3, false);
        log.record("ks", "main", 1_200, true);
        log.record("ks", "queue", 0, false);
        let taken = log.take();
        assert_eq!(
            taken,
            [
                TableReadCosts {
                    keyspace: "ks".into(),
                    table: "main".into(),
                    reads: 2,
                    tombstones: 1_203,
                    max_tombstones: 1_200,
                    warned: 1,
                },
                TableReadCosts {
                    keyspace: "ks".into(),
                    table: "queue".into(),
                    reads: 1,
                    ..TableReadCosts::default()
                },
            ]
        );
        assert!(log.take().is_empty());
    }
}
