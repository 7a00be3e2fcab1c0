//! A row of the embedded store and the versions each of its columns
//! keeps (invariant 1 of `memory`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cell::{Cell, Timestamp};
use crate::reconcile::{CellVersion, ttl_seconds_left};

/// One row: its columns, and when it is next swept for purgeable versions.
#[derive(Debug, Default)]
pub(super) struct Row {
    pub(super) cells: BTreeMap<String, Column>,
    /// The time this row is queued under in
    /// [`MemoryState::sweeps`](super::MemoryState::sweeps), if it is.
    pub(super) sweep_at: Option<Timestamp>,
}

/// Which cell of a CQL row a version belongs to: the `value` every write
/// sets, or the `fence` a fenced write records beside it
/// ([`Store::write_fenced_via`](crate::Store::write_fenced_via)). A delete
/// (a tombstone, always [`Part::Value`]) removes the whole CQL row, both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Part {
    /// The cell's value (and the row's deletion).
    Value,
    /// The fencing token recorded by the last fenced write.
    Fence,
}

/// One column: its winning written version and its newest delete, kept
/// apart as Cassandra keeps a row's data and its row deletion (invariant 1 of `memory`),
/// and the fence a fenced write recorded, which a delete at or after its
/// timestamp removes with the value (it is a cell of the same CQL row).
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
    /// The fence: a `Live` version whose value is the token (8 bytes, big
    /// endian), newer than `deletion`.
    fence: Option<CellVersion>,
}

impl Column {
    /// Merges `incoming` into `part`; whether it was kept.
    pub(super) fn apply(
        &mut self,
        part: Part,
        incoming: CellVersion,
        now: Timestamp,
        grace: Duration,
    ) -> bool {
        // Invariant 1 of `tombstones`: what is past gc grace is forgotten before a write meets it.
        self.purge(now, grace);
        if part == Part::Fence {
            return self.apply_fence(incoming, now);
        }
        match incoming {
            CellVersion::Tombstone { .. } => {
                // A delete at T hides every version at or before T — the
                // fence too: it deletes the whole CQL row.
                for slot in [&mut self.value, &mut self.fence] {
                    if slot
                        .as_ref()
                        .is_some_and(|v| v.timestamp() <= incoming.timestamp())
                    {
                        *slot = None;
                    }
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

    /// Merges a fence version: like a value, it loses to a delete at or
    /// after its timestamp, and the newer fence wins.
    fn apply_fence(&mut self, incoming: CellVersion, now: Timestamp) -> bool {
        if !matches!(incoming, CellVersion::Live { .. })
            || self
                .deletion
                .as_ref()
                .is_some_and(|d| d.timestamp() >= incoming.timestamp())
        {
            return false;
        }
        let wins = self
            .fence
            .as_ref()
            .is_none_or(|f| incoming.supersedes(f, now));
        if wins {
            self.fence = Some(incoming);
        }
        wins
    }

    /// The token the live fence records, if any.
    pub(super) fn fence(&self, now: Timestamp) -> Option<u64> {
        let (bytes, _) = self.fence.as_ref()?.live_value(now)?;
        Some(u64::from_be_bytes(bytes.try_into().ok()?))
    }

    /// The newest timestamp any version here carries: a fenced write is
    /// stamped above it, as a Paxos ballot is above every earlier one.
    pub(super) fn newest_timestamp(&self) -> Option<Timestamp> {
        self.versions().map(CellVersion::timestamp).max()
    }

    /// The visible version, if any.
    pub(super) fn live(&self, now: Timestamp) -> Option<&CellVersion> {
        self.value.as_ref().filter(|v| v.is_live(now))
    }

    /// The visible version as the cell a read returns, named `column`:
    /// its value, write time and the whole seconds its TTL has left.
    pub(super) fn live_cell(&self, column: &str, now: Timestamp) -> Option<Cell> {
        let version = self.live(now)?;
        let (value, expires_at) = version.live_value(now)?;
        Some(Cell {
            column: column.to_string(),
            value: value.to_vec(),
            writetime: version.timestamp(),
            ttl: expires_at.map(|at| Duration::from_secs(u64::from(ttl_seconds_left(at, now)))),
        })
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
        for slot in [&mut self.value, &mut self.deletion, &mut self.fence] {
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
        self.value.is_none() && self.deletion.is_none() && self.fence.is_none()
    }

    /// Every version held, the fence's included.
    pub(super) fn versions(&self) -> impl Iterator<Item = &CellVersion> {
        self.parts().map(|(_, v)| v)
    }

    /// Every version held, each with the part it belongs to.
    pub(super) fn parts(&self) -> impl Iterator<Item = (Part, &CellVersion)> {
        let value = self.value.iter().chain(self.deletion.iter());
        value
            .map(|v| (Part::Value, v))
            .chain(self.fence.iter().map(|f| (Part::Fence, f)))
    }
}
