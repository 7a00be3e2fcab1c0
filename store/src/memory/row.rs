//! A row of the embedded store and the versions each of its columns
//! keeps (invariant 1 of `memory`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cell::Timestamp;
use crate::reconcile::CellVersion;

/// One row: its columns, and when it is next swept for purgeable versions.
#[derive(Debug, Default)]
pub(super) struct Row {
    pub(super) cells: BTreeMap<String, Column>,
    /// The time this row is queued under in [`State::sweeps`](super::State::sweeps), if it is.
    pub(super) sweep_at: Option<Timestamp>,
}

/// One column: its winning written version and its newest delete, kept
/// apart as Cassandra keeps a row's data and its row deletion (invariant 1 of `memory`).
///
/// A delete older than the value it meets loses — the value stays
/// visible — but the tombstone is not dropped: once the value is gone
/// (expired and purged), that tombstone costs every read until its own
/// purge time. Measured on Cassandra 4.1.1 ([`crate::tombstones`] (c)).
#[derive(Clone, Debug, Default)]
pub(super) struct Column {
    /// A `Live` version (visible or expired), newer than `deletion`.
    value: Option<CellVersion>,
    /// The newest `Tombstone`.
    deletion: Option<CellVersion>,
}

impl Column {
    /// Merges `incoming`; whether it was kept.
    pub(super) fn apply(&mut self, incoming: CellVersion, now: Timestamp, grace: Duration) -> bool {
        // Invariant 1 of `tombstones`: what is past gc grace is forgotten before a write meets it.
        self.purge(now, grace);
        match incoming {
            CellVersion::Tombstone { .. } => {
                // A delete at T hides every version at or before T.
                if self
                    .value
                    .as_ref()
                    .is_some_and(|v| v.timestamp() <= incoming.timestamp())
                {
                    self.value = None;
                }
                let newer = self
                    .deletion
                    .as_ref()
                    .is_none_or(|d| incoming.supersedes(d, now));
                if newer {
                    self.deletion = Some(incoming);
                }
                newer
            }
            CellVersion::Live { .. } => {
                // Ties go to the tombstone.
                if self
                    .deletion
                    .as_ref()
                    .is_some_and(|d| d.timestamp() >= incoming.timestamp())
                {
                    return false;
                }
                let wins = self
                    .value
                    .as_ref()
                    .is_none_or(|v| incoming.supersedes(v, now));
                if wins {
                    self.value = Some(incoming);
                }
                wins
            }
        }
    }

    /// The visible version, if any.
    pub(super) fn live(&self, now: Timestamp) -> Option<&CellVersion> {
        self.value.as_ref().filter(|v| v.is_live(now))
    }

    /// Invariant 2 of `tombstones`: the tombstones this column costs a read passing it: one while
    /// it is dead and something dead in it is not yet purgeable
    /// (Cassandra counts a row's dead cells, else its deletion, once).
    pub(super) fn tombstones(&self, now: Timestamp, grace: Duration) -> u64 {
        if self.live(now).is_some() {
            return 0;
        }
        let costs =
            |v: &Option<CellVersion>| v.as_ref().is_some_and(|v| !v.is_purgeable(now, grace));
        u64::from(costs(&self.value) || costs(&self.deletion))
    }

    /// Whether [`purge`](Self::purge) would forget anything.
    pub(super) fn has_purgeable(&self, now: Timestamp, grace: Duration) -> bool {
        self.versions().any(|v| v.is_purgeable(now, grace))
    }

    /// Forgets what is past gc grace.
    pub(super) fn purge(&mut self, now: Timestamp, grace: Duration) {
        for slot in [&mut self.value, &mut self.deletion] {
            if slot.as_ref().is_some_and(|v| v.is_purgeable(now, grace)) {
                *slot = None;
            }
        }
    }

    /// When something here becomes purgeable next.
    pub(super) fn purge_time(&self, grace: Duration) -> Option<Timestamp> {
        self.versions().filter_map(|v| v.purge_time(grace)).min()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.value.is_none() && self.deletion.is_none()
    }

    pub(super) fn versions(&self) -> impl Iterator<Item = &CellVersion> {
        self.value.iter().chain(self.deletion.iter())
    }
}
