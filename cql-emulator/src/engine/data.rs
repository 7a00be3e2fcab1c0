//! Stored data: partitions of rows of cells, with Cassandra's deletion
//! model (cell, row, range and partition tombstones) on top of
//! [`CellVersion`], the embedded store's reconciliation rule.
//!
//! # Invariants
//!
//! 1. **Nothing stored is shadowed by a stored deletion.** When a row,
//!    range or partition tombstone at `T` is applied, every cell and row
//!    marker with a timestamp `<= T` under it is dropped; a write arriving
//!    later with a timestamp `<= T` is dropped on arrival. A read therefore
//!    only asks each cell [`CellVersion::is_live`], and purging a tombstone
//!    after `gc_grace` can never resurrect data it shadowed (there is none).
//! 2. **One version per cell and per row marker**: the winner of
//!    [`CellVersion::supersedes`] among everything written there (the
//!    embedded store's invariant 1 in store/src/memory/mod.rs, so both
//!    backends agree cell by cell).
//! 3. **TTL deadlines come from the engine clock at apply time**
//!    (store invariant S3), never from the write timestamp.
//! 4. **Past gc grace is gone.** A tombstone (or an expired cell) past
//!    the table's gc grace ([`lockshift_store::reconcile::purge_time`]) is
//!    forgotten before a change meets it, as the embedded store forgets it:
//!    both behave as if compaction ran the moment it became purgeable, so a
//!    late older write resurrects the cell on both alike.
//!
//! A lockshift "cell" is a CQL row `(row_key, column_name, value)`: its row
//! marker and its `value` cell carry the same timestamp and TTL, so the row
//! is live exactly when the embedded store's single `CellVersion` would be.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lockshift_store::Timestamp;
use lockshift_store::reconcile::CellVersion;

use crate::engine::schema::TableSchema;
use crate::murmur3;
use crate::value::Collation;

mod change;
pub(crate) use change::Change;

// ===== Keys =====

/// A partition key: its Murmur3 token and its serialised bytes (one
/// component as is; several in Cassandra's composite form). Partitions are
/// ordered by token, then bytes, as in Cassandra.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct PartitionKey {
    pub(crate) token: i64,
    pub(crate) bytes: Vec<u8>,
}

impl PartitionKey {
    /// The key of the given component values.
    pub(crate) fn new(components: &[&[u8]]) -> PartitionKey {
        let bytes = if components.len() == 1 {
            components[0].to_vec()
        } else {
            let mut out = Vec::new();
            for c in components {
                // Components are checked to be at most 65535 bytes before.
                out.extend_from_slice(&u16::try_from(c.len()).unwrap_or(u16::MAX).to_be_bytes());
                out.extend_from_slice(c);
                out.push(0);
            }
            out
        };
        PartitionKey {
            token: murmur3::token(&bytes),
            bytes,
        }
    }

    /// The key of already serialised bytes.
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> PartitionKey {
        PartitionKey {
            token: murmur3::token(&bytes),
            bytes,
        }
    }

    /// The component values, given how many there are.
    pub(crate) fn components(&self, n: usize) -> Vec<&[u8]> {
        if n == 1 {
            return vec![&self.bytes];
        }
        let mut out = Vec::with_capacity(n);
        let mut rest = self.bytes.as_slice();
        while rest.len() >= 2 && out.len() < n {
            let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
            let end = (2 + len).min(rest.len());
            out.push(&rest[2..end]);
            rest = rest.get(end + 1..).unwrap_or(&[]);
        }
        out
    }
}

/// Where a clustering prefix sits relative to the full keys it prefixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Edge {
    /// Before every key with this prefix (an inclusive start, an exclusive end).
    Before,
    /// A full key.
    Exact,
    /// After every key with this prefix.
    After,
}

/// One clustering component: raw bytes plus how they sort.
#[derive(Clone, Debug)]
pub(crate) struct KeyPart {
    pub(crate) raw: Vec<u8>,
    pub(crate) collation: Collation,
    pub(crate) desc: bool,
}

impl KeyPart {
    fn cmp_part(&self, other: &KeyPart) -> Ordering {
        let o = self.collation.compare(&self.raw, &other.raw);
        if self.desc { o.reverse() } else { o }
    }
}

/// A clustering key or a bound between keys: components in the table's
/// clustering order, and an [`Edge`]. Sorting follows each column's
/// collation and ASC/DESC, so `BTreeMap` order is CQL clustering order.
#[derive(Clone, Debug)]
pub(crate) struct Clustering {
    pub(crate) parts: Vec<KeyPart>,
    pub(crate) edge: Edge,
}

impl Clustering {
    pub(crate) fn exact(parts: Vec<KeyPart>) -> Clustering {
        Clustering {
            parts,
            edge: Edge::Exact,
        }
    }

    pub(crate) fn bound(parts: Vec<KeyPart>, edge: Edge) -> Clustering {
        Clustering { parts, edge }
    }

    pub(crate) fn raw_parts(&self) -> Vec<Vec<u8>> {
        self.parts.iter().map(|p| p.raw.clone()).collect()
    }
}

fn edge_rank(e: Edge) -> i8 {
    match e {
        Edge::Before => -1,
        Edge::Exact => 0,
        Edge::After => 1,
    }
}

impl Ord for Clustering {
    fn cmp(&self, other: &Self) -> Ordering {
        for (a, b) in self.parts.iter().zip(&other.parts) {
            match a.cmp_part(b) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        match self.parts.len().cmp(&other.parts.len()) {
            Ordering::Equal => edge_rank(self.edge).cmp(&edge_rank(other.edge)),
            // self is a proper prefix of other.
            Ordering::Less => match self.edge {
                Edge::After => Ordering::Greater,
                Edge::Before | Edge::Exact => Ordering::Less,
            },
            Ordering::Greater => match other.edge {
                Edge::After => Ordering::Less,
                Edge::Before | Edge::Exact => Ordering::Greater,
            },
        }
    }
}

impl PartialOrd for Clustering {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Clustering {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Clustering {}

// ===== Rows =====

/// A deletion marker covering a row, a range or a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deletion {
    pub(crate) timestamp: Timestamp,
    /// When it was applied, on the engine clock (for purging).
    pub(crate) deleted_at: Timestamp,
}

impl Deletion {
    /// Whether a version at `ts` is shadowed: ties go to the tombstone.
    fn shadows(&self, ts: Timestamp) -> bool {
        ts <= self.timestamp
    }

    fn merge(existing: Option<Deletion>, incoming: Deletion) -> Deletion {
        match existing {
            Some(e) if (e.timestamp, e.deleted_at) >= (incoming.timestamp, incoming.deleted_at) => {
                e
            }
            _ => incoming,
        }
    }

    /// Past gc grace in whole seconds, as a cell tombstone
    /// ([`lockshift_store::reconcile::purge_time`]).
    pub(crate) fn purgeable(&self, now: Timestamp, gc_grace: Duration) -> bool {
        lockshift_store::reconcile::purge_time(self.deleted_at, gc_grace) <= now
    }
}

/// One CQL row: its liveness marker (written by INSERT), its deletion, and
/// its regular cells keyed by column index.
#[derive(Clone, Debug, Default)]
pub(crate) struct Row {
    pub(crate) marker: Option<CellVersion>,
    pub(crate) deletion: Option<Deletion>,
    pub(crate) cells: BTreeMap<usize, CellVersion>,
}

fn merge_version(slot: &mut Option<CellVersion>, incoming: CellVersion, now: Timestamp) {
    match slot {
        Some(existing) if !incoming.supersedes(existing, now) => {}
        _ => *slot = Some(incoming),
    }
}

impl Row {
    /// Whether the row shows up in a SELECT at `now`.
    pub(crate) fn is_live(&self, now: Timestamp) -> bool {
        self.marker.as_ref().is_some_and(|m| m.is_live(now))
            || self.cells.values().any(|c| c.is_live(now))
    }

    /// The live value of column `col`: bytes, write time, expiry.
    pub(crate) fn live_cell(
        &self,
        col: usize,
        now: Timestamp,
    ) -> Option<(&[u8], Timestamp, Option<Timestamp>)> {
        let v = self.cells.get(&col)?;
        v.live_value(now).map(|(b, exp)| (b, v.timestamp(), exp))
    }

    fn is_empty(&self) -> bool {
        self.marker.is_none() && self.deletion.is_none() && self.cells.is_empty()
    }

    /// Invariant 1: drops everything `d` shadows.
    fn drop_shadowed(&mut self, d: &Deletion) {
        if self
            .marker
            .as_ref()
            .is_some_and(|m| d.shadows(m.timestamp()))
        {
            self.marker = None;
        }
        self.cells.retain(|_, c| !d.shadows(c.timestamp()));
        if self
            .deletion
            .is_some_and(|own| own.timestamp <= d.timestamp)
        {
            self.deletion = None;
        }
    }

    /// Whether [`Row::purge`] would forget anything.
    pub(crate) fn has_purgeable(&self, now: Timestamp, gc_grace: Duration) -> bool {
        self.marker
            .as_ref()
            .is_some_and(|m| m.is_purgeable(now, gc_grace))
            || self.cells.values().any(|c| c.is_purgeable(now, gc_grace))
            || self.deletion.is_some_and(|d| d.purgeable(now, gc_grace))
    }

    fn purge(&mut self, now: Timestamp, gc_grace: Duration) {
        if self
            .marker
            .as_ref()
            .is_some_and(|m| m.is_purgeable(now, gc_grace))
        {
            self.marker = None;
        }
        self.cells.retain(|_, c| !c.is_purgeable(now, gc_grace));
        if self.deletion.is_some_and(|d| d.purgeable(now, gc_grace)) {
            self.deletion = None;
        }
    }
}

/// A range tombstone between two clustering bounds (inclusive in bound order).
#[derive(Clone, Debug)]
pub(crate) struct RangeTombstone {
    pub(crate) start: Clustering,
    pub(crate) end: Clustering,
    pub(crate) deletion: Deletion,
}

impl RangeTombstone {
    fn covers(&self, key: &Clustering) -> bool {
        &self.start <= key && key <= &self.end
    }
}

/// One partition.
#[derive(Clone, Debug, Default)]
pub(crate) struct Partition {
    pub(crate) deletion: Option<Deletion>,
    pub(crate) ranges: Vec<RangeTombstone>,
    pub(crate) rows: BTreeMap<Clustering, Row>,
}

impl Partition {
    /// Forgets dead data older than `gc_grace` (Cassandra's compaction).
    pub(crate) fn purge(&mut self, now: Timestamp, gc_grace: Duration) {
        for row in self.rows.values_mut() {
            row.purge(now, gc_grace);
        }
        self.rows.retain(|_, r| !r.is_empty());
        self.ranges
            .retain(|rt| !rt.deletion.purgeable(now, gc_grace));
        if self.deletion.is_some_and(|d| d.purgeable(now, gc_grace)) {
            self.deletion = None;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.deletion.is_none() && self.ranges.is_empty() && self.rows.is_empty()
    }
}

/// A table's rows.
#[derive(Clone, Debug)]
pub(crate) struct TableData {
    pub(crate) schema: Arc<TableSchema>,
    pub(crate) partitions: BTreeMap<PartitionKey, Partition>,
}

impl TableData {
    pub(crate) fn new(schema: Arc<TableSchema>) -> TableData {
        TableData {
            schema,
            partitions: BTreeMap::new(),
        }
    }

    pub(crate) fn apply(&mut self, key: PartitionKey, change: Change, now: Timestamp) {
        let grace = self.schema.gc_grace();
        let part = self.partitions.entry(key.clone()).or_default();
        part.apply(change, now, grace);
        if part.is_empty() {
            self.partitions.remove(&key);
        }
    }

    /// Purges the given rows of one partition (those a read passed over),
    /// dropping the partition if nothing is left. Purging only what a read
    /// visits keeps a read's cost proportional to what it returns, as in the
    /// embedded store.
    pub(crate) fn purge_rows(&mut self, key: &PartitionKey, rows: &[Clustering], now: Timestamp) {
        let grace = self.schema.gc_grace();
        let Some(p) = self.partitions.get_mut(key) else {
            return;
        };
        for ck in rows {
            if let Some(r) = p.rows.get_mut(ck) {
                r.purge(now, grace);
                if r.is_empty() {
                    p.rows.remove(ck);
                }
            }
        }
        p.ranges.retain(|rt| !rt.deletion.purgeable(now, grace));
        if p.deletion.is_some_and(|d| d.purgeable(now, grace)) {
            p.deletion = None;
        }
        if p.is_empty() {
            self.partitions.remove(key);
        }
    }
}

#[cfg(test)]
#[path = "data_tests.rs"]
mod tests;
