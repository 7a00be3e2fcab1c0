//! Every table lockshift uses. All share one shape — `(row_key text,
//! column_name text, value blob, PRIMARY KEY ((row_key), column_name))` with
//! ascending clustering order — so one set of statements serves them all.

use crate::cell::Table;

/// Legacy and queue locks: row = lock id, column = owner id of the holder
/// (shared by every algorithm; docs/design.md §3).
pub const MAIN: Table = Table::new("main");
/// Legacy shadow arbitration: row = lock id, column = owner id of a contender.
pub const SHADOW: Table = Table::new("shadow");
/// Queue lock waiting line: row = lock id, column = 20-digit time + owner id.
pub const QUEUE: Table = Table::new("queue");
/// The time service's `GlobalTime` cell (thesis §5.4).
pub const GLOBAL_TIME: Table = Table::new("global_time");
/// The rollout stage and its history.
pub const ROLLOUT: Table = Table::new("rollout");
/// The node registry: one row per node, refreshed by heartbeat.
pub const NODES: Table = Table::new("nodes");
/// Free space for conformance tests and probes; no lock reads it.
pub const SCRATCH: Table = Table::new("scratch");

/// Every table, in creation order.
pub const ALL: [Table; 7] = [MAIN, SHADOW, QUEUE, GLOBAL_TIME, ROLLOUT, NODES, SCRATCH];

/// Looks a table up by its CQL name.
pub fn by_name(name: &str) -> Option<Table> {
    ALL.iter().copied().find(|t| t.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for t in ALL {
            assert_eq!(by_name(t.name()), Some(t));
        }
        let mut names: Vec<_> = ALL.iter().map(|t| t.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        assert_eq!(by_name("nope"), None);
    }
}
