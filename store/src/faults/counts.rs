//! What a [`FaultyStore`](super::FaultyStore) counted.

use std::collections::BTreeMap;
use std::fmt;

use crate::cell::{OpKind, Table};

/// Operations seen by a [`FaultyStore`](super::FaultyStore), per table and kind, failed ones
/// included.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpCounts(pub(super) BTreeMap<(Table, OpKind), u64>);

impl OpCounts {
    /// Operations of `op` on `table`.
    pub fn get(&self, table: Table, op: OpKind) -> u64 {
        self.0.get(&(table, op)).copied().unwrap_or(0)
    }

    /// Operations of `op` on any table.
    pub fn of_kind(&self, op: OpKind) -> u64 {
        self.0
            .iter()
            .filter(|((_, o), _)| *o == op)
            .map(|(_, n)| n)
            .sum()
    }

    /// All operations.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Reads and scans.
    pub fn reads(&self) -> u64 {
        self.of_kind(OpKind::Read) + self.of_kind(OpKind::Scan)
    }

    /// Writes and deletes.
    pub fn writes(&self) -> u64 {
        self.of_kind(OpKind::Write) + self.of_kind(OpKind::Delete)
    }

    /// The counts added since `earlier` (a previous snapshot of the same store).
    pub fn since(&self, earlier: &OpCounts) -> OpCounts {
        OpCounts(
            self.0
                .iter()
                .map(|(k, n)| (*k, n.saturating_sub(earlier.0.get(k).copied().unwrap_or(0))))
                .filter(|(_, n)| *n > 0)
                .collect(),
        )
    }

    /// Every non-zero count.
    pub fn iter(&self) -> impl Iterator<Item = (Table, OpKind, u64)> + '_ {
        self.0.iter().map(|((t, o), n)| (*t, *o, *n))
    }
}

impl fmt::Display for OpCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (table, op, n) in self.iter() {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{table}.{op}={n}")?;
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}
