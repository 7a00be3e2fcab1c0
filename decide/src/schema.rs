//! Every table lockshift uses. All share one shape — `(row_key text,
//! column_name text, value blob, PRIMARY KEY ((row_key), column_name))` with
//! ascending clustering order — so one set of statements serves them all.
//!
//! # Table options
//!
//! Each table's options are one constant beside it ([`MAIN_OPTIONS`], …),
//! read by everything that states or follows them: the CQL backend's
//! `CREATE TABLE … WITH gc_grace_seconds = …` (so `migrate schema` prints
//! them too) and the embedded store's default gc grace per table, which is
//! what decides how long a delete or an expired cell keeps costing reads
//! (the store's `tombstones` module). Change a table's number here and
//! every backend follows.
//!
//! The tables whose cells lockshift deletes keep tombstones only as long
//! as the cells they delete can live. The lock tables — `main`, `shadow`,
//! `queue` — keep them for [`LOCK_TABLES_GC_GRACE_SECONDS`] (2 minutes):
//! every cell written there carries a lease TTL (60 s by default) or a
//! waiter's (4 s). The registry (`nodes`) keeps them for
//! [`REGISTRY_GC_GRACE_SECONDS`] (10 minutes): its cells live up to the
//! longest registry TTL, 5 minutes. So by the time a tombstone may be
//! purged every cell it deleted has expired anyway, and a replica that
//! missed the delete cannot bring one back live (docs/design.md §2a, the
//! gc grace rule). Together with names reused per process that bounds
//! what a read of a lock passes: about one tombstone per process that
//! took the lock in the last gc grace and lease TTL. The other tables are
//! only ever overwritten and keep Cassandra's default, 864 000 s (10 days).
//!
//! No `compaction` option is stated: the tombstone cost a read pays does not
//! depend on it (Cassandra drops tombstones older than `gc_grace_seconds`
//! from every read before counting them, compacted or not; see the store's
//! `tombstones` module), and the default strategy suits rows this small.

use std::time::Duration;

use crate::cell::Table;

/// Cassandra's default `gc_grace_seconds`: 10 days.
pub const CASSANDRA_DEFAULT_GC_GRACE_SECONDS: u32 = 864_000;

/// `gc_grace_seconds` of the lock tables (`main`, `shadow`, `queue`):
/// 2 minutes, twice the default lease TTL (see the module docs). A lease
/// TTL above [`LOCK_TABLES_GC_GRACE_SECONDS`] less [`GC_GRACE_SLACK`]
/// costs liveness, never exclusion (docs/design.md §2a).
pub const LOCK_TABLES_GC_GRACE_SECONDS: u32 = 120;

/// `gc_grace_seconds` of the registry (`nodes`): 10 minutes, above the
/// longest registry TTL (5 minutes).
pub const REGISTRY_GC_GRACE_SECONDS: u32 = 600;

/// How far below a table's gc grace the TTL of its cells must stay for a
/// purged tombstone never to uncover a live cell: a second for TTLs and
/// deletes counted in whole seconds, and the nodes' clocks up to a second
/// apart on either side (the tolerance `migrate status` checks).
pub const GC_GRACE_SLACK: Duration = Duration::from_secs(3);

/// Whether cells written with `ttl` into a table kept at `gc_grace` are
/// sure to have expired before any tombstone that deletes them may be
/// purged: `ttl + GC_GRACE_SLACK ≤ gc_grace`.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use lockshift_decide::schema::{MAIN_OPTIONS, ttl_within_gc_grace};
///
/// assert!(ttl_within_gc_grace(Duration::from_secs(60), MAIN_OPTIONS.gc_grace()));
/// assert!(!ttl_within_gc_grace(Duration::from_secs(118), MAIN_OPTIONS.gc_grace()));
/// ```
pub fn ttl_within_gc_grace(ttl: Duration, gc_grace: Duration) -> bool {
    ttl.saturating_add(GC_GRACE_SLACK) <= gc_grace
}

/// Options of one table, stated in its `CREATE TABLE` and followed by the
/// embedded store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// `gc_grace_seconds`: how long a tombstone (a delete, or a TTL cell once
    /// expired) is kept — and counted by every read that passes it — before
    /// it may be forgotten.
    pub gc_grace_seconds: u32,
}

impl TableOptions {
    /// `gc_grace_seconds` as a [`Duration`].
    pub const fn gc_grace(self) -> Duration {
        Duration::from_secs(self.gc_grace_seconds as u64)
    }

    /// The options as CQL table properties, without the leading `WITH` /
    /// `AND`: `gc_grace_seconds = 864000`.
    pub fn to_cql(self) -> String {
        format!("gc_grace_seconds = {}", self.gc_grace_seconds)
    }
}

/// Legacy and queue locks: row = lock id, column = owner id of the holder
/// (shared by every algorithm; docs/design.md §3).
pub const MAIN: Table = Table::new("main");
/// Legacy shadow arbitration: row = lock id, column = owner id of a contender.
pub const SHADOW: Table = Table::new("shadow");
/// Queue lock waiting line: row = lock id, column = owner id, value = the
/// arrival and the algorithm (docs/design.md §2a).
pub const QUEUE: Table = Table::new("queue");
/// The time service's `GlobalTime` cell (thesis §5.4).
pub const GLOBAL_TIME: Table = Table::new("global_time");
/// The rollout stage and its history.
pub const ROLLOUT: Table = Table::new("rollout");
/// The node registry: one cell per process, refreshed by heartbeat.
pub const NODES: Table = Table::new("nodes");
/// Free space for conformance tests and probes; no lock reads it.
pub const SCRATCH: Table = Table::new("scratch");

/// Options of [`MAIN`].
pub const MAIN_OPTIONS: TableOptions = TableOptions {
    gc_grace_seconds: LOCK_TABLES_GC_GRACE_SECONDS,
};
/// Options of [`SHADOW`].
pub const SHADOW_OPTIONS: TableOptions = TableOptions {
    gc_grace_seconds: LOCK_TABLES_GC_GRACE_SECONDS,
};
/// Options of [`QUEUE`].
pub const QUEUE_OPTIONS: TableOptions = TableOptions {
    gc_grace_seconds: LOCK_TABLES_GC_GRACE_SECONDS,
};
/// Options of [`GLOBAL_TIME`].
pub const GLOBAL_TIME_OPTIONS: TableOptions = TableOptions {
    gc_grace_seconds: CASSANDRA_DEFAULT_GC_GRACE_SECONDS,
};
/// Options of [`ROLLOUT`].
pub const ROLLOUT_OPTIONS: TableOptions = TableOptions {
    gc_grace_seconds: CASSANDRA_DEFAULT_GC_GRACE_SECONDS,
};
/// Options of [`NODES`].
pub const NODES_OPTIONS: TableOptions = TableOptions {
    gc_grace_seconds: REGISTRY_GC_GRACE_SECONDS,
};
/// Options of [`SCRATCH`].
pub const SCRATCH_OPTIONS: TableOptions = TableOptions {
    gc_grace_seconds: CASSANDRA_DEFAULT_GC_GRACE_SECONDS,
};

/// Every table, in creation order.
pub const ALL: [Table; 7] = [MAIN, SHADOW, QUEUE, GLOBAL_TIME, ROLLOUT, NODES, SCRATCH];

/// The options of `table`: its constant above for lockshift's tables,
/// Cassandra's defaults for any other.
pub fn options(table: Table) -> TableOptions {
    match table {
        MAIN => MAIN_OPTIONS,
        SHADOW => SHADOW_OPTIONS,
        QUEUE => QUEUE_OPTIONS,
        GLOBAL_TIME => GLOBAL_TIME_OPTIONS,
        ROLLOUT => ROLLOUT_OPTIONS,
        NODES => NODES_OPTIONS,
        SCRATCH => SCRATCH_OPTIONS,
        _ => TableOptions {
            gc_grace_seconds: CASSANDRA_DEFAULT_GC_GRACE_SECONDS,
        },
    }
}

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

    #[test]
    fn every_table_has_its_own_options_constant() {
        let pairs = [
            (MAIN, MAIN_OPTIONS),
            (SHADOW, SHADOW_OPTIONS),
            (QUEUE, QUEUE_OPTIONS),
            (GLOBAL_TIME, GLOBAL_TIME_OPTIONS),
            (ROLLOUT, ROLLOUT_OPTIONS),
            (NODES, NODES_OPTIONS),
            (SCRATCH, SCRATCH_OPTIONS),
        ];
        assert_eq!(pairs.len(), ALL.len());
        for (table, opts) in pairs {
            assert_eq!(options(table), opts, "{table}");
        }
        assert_eq!(
            options(Table::new("other")).gc_grace_seconds,
            CASSANDRA_DEFAULT_GC_GRACE_SECONDS
        );
        assert_eq!(MAIN_OPTIONS.to_cql(), "gc_grace_seconds = 120");
        assert_eq!(MAIN_OPTIONS.gc_grace(), Duration::from_secs(120));
        assert_eq!(NODES_OPTIONS.to_cql(), "gc_grace_seconds = 600");
        assert_eq!(ROLLOUT_OPTIONS.to_cql(), "gc_grace_seconds = 864000");
        // Every table whose cells lockshift deletes keeps tombstones for a
        // short, TTL-safe time (docs/design.md §2a).
        for table in [MAIN, SHADOW, QUEUE] {
            assert_eq!(
                options(table).gc_grace_seconds,
                LOCK_TABLES_GC_GRACE_SECONDS,
                "{table}"
            );
        }
    }

    /// The gc grace rule (docs/design.md §2a), as a table: the default
    /// lease TTL, the waiters' TTL and the longest registry TTL fit their
    /// tables' gc grace; a TTL within the slack of it, or above, does not.
    #[test]
    fn every_default_ttl_fits_its_tables_gc_grace() {
        let s = Duration::from_secs;
        let cases = [
            // (what, ttl, table, fits)
            ("default lease TTL", s(60), MAIN, true),
            ("waiter's TTL", s(4), QUEUE, true),
            (
                "registry TTL",
                crate::registry::MAX_REGISTRY_TTL,
                NODES,
                true,
            ),
            ("lease TTL at the slack", s(117), SHADOW, true),
            ("lease TTL inside the slack", s(118), MAIN, false),
            ("lease TTL of the old 10-minute grace", s(300), MAIN, false),
            ("registry TTL inside the slack", s(598), NODES, false),
        ];
        for (what, ttl, table, fits) in cases {
            assert_eq!(
                ttl_within_gc_grace(ttl, options(table).gc_grace()),
                fits,
                "{what}: {ttl:?} in {table}"
            );
        }
    }
}
