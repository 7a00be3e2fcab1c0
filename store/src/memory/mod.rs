//! The embedded backend: an in-process store with exact Cassandra semantics.
//!
//! It is the reference implementation of the [`Store`] contract and what tests,
//! the demo and the local CQL endpoint run on. It models datacenters too —
//! one replica per datacenter, links that can be cut, the coordinator's
//! datacenter deciding what LOCAL means (`network.rs`) — so that the
//! simulations can split a cluster. One mutex guards all of it:
//! every operation is a few map look-ups, far below the cost of the tokio
//! scheduling around it, and a single lock makes each operation trivially
//! atomic, which is exactly the "one row, one write" guarantee.
//!
//! # Invariants
//!
//! 1. A row maps each column to at most two versions: the winner of
//!    [`CellVersion::supersedes`] among the values written there, and the
//!    newest delete, kept only while it is older than that value (a newer
//!    delete drops the value) — dead versions purged after the table's gc
//!    grace. The visible cell is the value, if live. Keeping the losing
//!    delete is Cassandra's (a row deletion outlives the newer data it lost
//!    to, and costs reads once that data is gone).
//! 2. TTL deadlines are computed from the store's clock when the write
//!    is applied, never from the write's timestamp, and in whole seconds:
//!    the start of that second plus the TTL (Cassandra's `localDeletionTime`;
//!    see [`ttl_deadline`]).
//! 3. Every row holding a version that is or will be dead is queued
//!    for a sweep no later than that version's purge time
//!    ([`CellVersion::purge_time`]); a sweep forgets what is purgeable and
//!    re-queues the row. So memory holds only live cells and dead ones
//!    younger than gc grace (plus at most an eighth of it), whether or not
//!    anything reads them again. Reads never depend on the sweep: they count
//!    a dead version only while it is not purgeable (invariants 1–2 of
//!    [`crate::tombstones`]), and forget the purgeable ones they pass.

mod cluster;
mod fenced;
mod network;
mod ops;
mod replica;
mod row;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

#[cfg(doc)]
use crate::api::Store;
use crate::cell::Table;
use crate::clock::{SharedClock, SystemClock};
use crate::reconcile::CellVersion;
use crate::route::Datacenter;
use crate::schema;
use crate::settings::Consistency;
use crate::tombstones::TombstoneThresholds;

pub use network::HintDelivery;
use network::{Client, Network};
use replica::Replica;

/// The largest tombstone counts seen, per table.
#[derive(Clone, Copy, Debug, Default)]
struct TombstoneStats {
    max_per_read: u64,
    max_per_scan: u64,
}

/// Everything behind the store's one mutex: every datacenter's replica,
/// the network between them, and the statistics.
#[derive(Debug)]
struct MemoryState {
    replicas: Vec<Replica>,
    network: Network,
    stats: HashMap<Table, TombstoneStats>,
    /// How far each datacenter's nodes' clock reads off the store's, µs
    /// ([`MemoryStore::skew_node_clock`]).
    clock_offsets: Vec<i64>,
}

/// The name of the one datacenter of [`MemoryStore::new`]: Cassandra's
/// default (`SimpleSnitch`).
pub const DEFAULT_DATACENTER: &str = "datacenter1";

/// The in-process store. Cheap to share behind an `Arc`; safe for any number
/// of concurrent tasks.
///
/// # Tombstones, as on Cassandra
///
/// A delete, and a TTL cell once expired, stays a tombstone for its
/// table's gc grace — by default the table's `gc_grace_seconds` from
/// [`schema::options`], Cassandra's 10 days unless the schema says
/// otherwise — and every read that passes it counts it ([`crate::tombstones`]
/// invariants 1–4): above the warn threshold the [`ReadOutcome`](crate::ReadOutcome) carries
/// Cassandra's warning, above the failure threshold the read fails with
/// [`StoreErrorKind::TooManyTombstones`](crate::StoreErrorKind::TooManyTombstones). Settings: [`with_gc_grace`],
/// [`with_table_gc_grace`], [`with_tombstone_thresholds`] (defaults 1 000 /
/// 100 000), [`with_keyspace`] (the keyspace named in warnings). Statistics
/// for tests: [`max_tombstones_per_read`], [`max_tombstones_per_scan`],
/// [`reset_tombstone_stats`].
///
/// [`with_gc_grace`]: MemoryStore::with_gc_grace
/// [`with_table_gc_grace`]: MemoryStore::with_table_gc_grace
/// [`with_tombstone_thresholds`]: MemoryStore::with_tombstone_thresholds
/// [`with_keyspace`]: MemoryStore::with_keyspace
/// [`max_tombstones_per_read`]: MemoryStore::max_tombstones_per_read
/// [`max_tombstones_per_scan`]: MemoryStore::max_tombstones_per_scan
/// [`reset_tombstone_stats`]: MemoryStore::reset_tombstone_stats
///
/// # Datacenters
///
/// [`MemoryStore::new`] is one datacenter, `datacenter1`. A cluster of
/// several is made with [`with_datacenters`](MemoryStore::with_datacenters);
/// each process of a simulation then gets a handle of its own placed in
/// its datacenter ([`client_in`](MemoryStore::client_in)), sharing the
/// data. Requests on [`Route::Default`](crate::Route::Default) run at the handle's consistency
/// ([`with_consistency`](MemoryStore::with_consistency), QUORUM by
/// default), coordinated in its datacenter — or, for a handle whose driver
/// was not told its datacenter ([`without_local_datacenter`](MemoryStore::without_local_datacenter)),
/// in one drawn per request. Faults: [`cut_link`](MemoryStore::cut_link),
/// [`restore_link`](MemoryStore::restore_link),
/// [`stop_datacenter`](MemoryStore::stop_datacenter),
/// [`start_datacenter`](MemoryStore::start_datacenter),
/// [`deliver_hints`](MemoryStore::deliver_hints). The rules are
/// `memory/network.rs`'s.
///
/// # Examples
///
/// ```
/// use lockshift_store::{CellWrite, MemoryStore, RowQuery, Store, Timestamp, WriteOptions, schema};
///
/// # tokio_test_block_on(async {
/// let store = MemoryStore::new();
/// let at = |us| WriteOptions::at(Timestamp::from_micros(us));
/// store.write(schema::MAIN, "lock-1", &[CellWrite::new("owner-a", b"x".to_vec())], at(10)).await?;
/// store.delete(schema::MAIN, "lock-1", &["owner-a".to_string()], Timestamp::from_micros(10)).await?;
/// // On a tie the tombstone wins, and the read passed it.
/// let read = store.read_observed(schema::MAIN, "lock-1", &RowQuery::all()).await?;
/// assert!(read.cells.is_empty());
/// assert_eq!(read.tombstones, Some(1));
/// assert_eq!(store.max_tombstones_per_read(schema::MAIN), 1);
/// # Ok::<(), lockshift_store::StoreError>(())
/// # }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug)]
pub struct MemoryStore {
    clock: SharedClock,
    /// Gc grace for every table, when set ([`MemoryStore::with_gc_grace`]).
    gc_grace_all: Option<Duration>,
    /// Gc grace per table, when set; wins over `gc_grace_all`.
    gc_grace_table: HashMap<Table, Duration>,
    thresholds: TombstoneThresholds,
    keyspace: String,
    /// The data, shared by every handle of one cluster.
    state: Arc<Mutex<MemoryState>>,
    /// Where this handle's requests come from.
    client: Client,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

/// The keyspace an embedded store names in its warnings unless told
/// otherwise: the CQL backend's default.
pub const DEFAULT_KEYSPACE: &str = "lockshift";

fn one_datacenter() -> Vec<(Datacenter, u32)> {
    // A constant that passes the rule; `new` cannot fail.
    let name = Datacenter::new(DEFAULT_DATACENTER).unwrap_or_else(|_| unreachable!());
    vec![(name, 1)]
}

impl MemoryStore {
    /// An empty store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(std::sync::Arc::new(SystemClock))
    }

    /// An empty store whose TTLs run on `clock`.
    pub fn with_clock(clock: SharedClock) -> Self {
        MemoryStore {
            clock,
            gc_grace_all: None,
            gc_grace_table: HashMap::new(),
            thresholds: TombstoneThresholds::default(),
            keyspace: DEFAULT_KEYSPACE.to_string(),
            state: Arc::new(Mutex::new(MemoryState::new(one_datacenter(), 0))),
            client: Client {
                datacenter: None,
                names_local: false,
                consistency: Consistency::Quorum,
            },
        }
    }

    /// This store keeping dead cells of *every* table for `gc_grace` (not
    /// each table's own [`schema::options`]) before forgetting them. A
    /// table given its own with [`with_table_gc_grace`](Self::with_table_gc_grace)
    /// keeps that.
    pub fn with_gc_grace(mut self, gc_grace: Duration) -> Self {
        self.gc_grace_all = Some(gc_grace);
        self
    }

    /// This store keeping dead cells of `table` for `gc_grace`.
    pub fn with_table_gc_grace(mut self, table: Table, gc_grace: Duration) -> Self {
        self.gc_grace_table.insert(table, gc_grace);
        self
    }

    /// This store warning and failing reads at `thresholds` instead of
    /// Cassandra's defaults (1 000 / 100 000).
    pub fn with_tombstone_thresholds(mut self, thresholds: TombstoneThresholds) -> Self {
        self.thresholds = thresholds;
        self
    }

    /// This store naming `keyspace` in its warnings' queries (default
    /// [`DEFAULT_KEYSPACE`]), as a cluster serving that keyspace would.
    pub fn with_keyspace(mut self, keyspace: impl Into<String>) -> Self {
        self.keyspace = keyspace.into();
        self
    }

    /// The store's clock.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// How long dead cells of `table` are kept (and cost reads).
    pub fn gc_grace(&self, table: Table) -> Duration {
        self.gc_grace_table
            .get(&table)
            .copied()
            .or(self.gc_grace_all)
            .unwrap_or_else(|| schema::options(table).gc_grace())
    }

    /// The warn and failure thresholds.
    pub fn tombstone_thresholds(&self) -> TombstoneThresholds {
        self.thresholds
    }

    /// The most tombstones any single read of `table` passed since the
    /// store was made or [`reset_tombstone_stats`](Self::reset_tombstone_stats)
    /// (a read that failed for too many counts as the threshold + 1).
    pub fn max_tombstones_per_read(&self, table: Table) -> u64 {
        self.lock().stats.get(&table).map_or(0, |s| s.max_per_read)
    }

    /// The most tombstones any single page of a key scan of `table` passed
    /// (invariant 4 of `tombstones`), like
    /// [`max_tombstones_per_read`](Self::max_tombstones_per_read).
    pub fn max_tombstones_per_scan(&self, table: Table) -> u64 {
        self.lock().stats.get(&table).map_or(0, |s| s.max_per_scan)
    }

    /// Forgets the statistics of every table.
    pub fn reset_tombstone_stats(&self) {
        self.lock().stats.clear();
    }

    /// Every version held for `row` of `table`, dead ones included, in column
    /// order — in this handle's datacenter (the first one for the test's
    /// own handle): for tests and the operator tool's forensic views. The
    /// fences of fenced writes are not among them ([`Store::write_fenced_via`]).
    pub fn raw_row(&self, table: Table, row: &str) -> Vec<(String, CellVersion)> {
        let at = self.client.datacenter.unwrap_or(0);
        self.lock().replicas[at]
            .versions(table, row)
            .into_iter()
            .filter(|(_, part, _)| *part == row::Part::Value)
            .map(|(c, _, v)| (c, v))
            .collect()
    }

    /// How many versions the store holds, dead ones included, over every
    /// datacenter: for tests that check memory stays bounded.
    pub fn stored_versions(&self) -> usize {
        self.lock()
            .replicas
            .iter()
            .map(Replica::stored_versions)
            .sum()
    }

    /// Whether any row of any datacenter is queued for a sweep (tests).
    #[cfg(test)]
    fn sweeps_pending(&self) -> bool {
        self.lock().replicas.iter().any(Replica::sweeps_pending)
    }

    fn lock(&self) -> MutexGuard<'_, MemoryState> {
        // No code path panics while holding the lock, but if one ever did the
        // maps are still consistent (every mutation is a single insert), so
        // carry on rather than poison every later operation.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[path = "datacenter_tests.rs"]
mod datacenter_tests;

#[cfg(test)]
#[path = "fenced_tests.rs"]
mod fenced_tests;
