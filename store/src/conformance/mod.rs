//! The backend conformance suite: the [`Store`] contract as executable checks,
//! written once and run against every backend.
//!
//! Each check takes a [`Target`] (a store plus the means to let time pass on
//! its clock) and panics with a message naming the broken rule. Test crates
//! instantiate the whole suite with [`conformance_tests!`](crate::conformance_tests):
//!
//! ```ignore
//! lockshift_store::conformance_tests!(my_target());
//! ```
//!
//! Rows are named with [`Target::unique`] so the suite can share a keyspace
//! with other runs on a real cluster; everything lives in
//! [`schema::SCRATCH`](crate::schema::SCRATCH).
//!
//! # The checks, by rule
//!
//! Each check is a public function of this module, grouped in files by the
//! rule of the [`Store`] contract it checks:
//!
//! - S1–S2, the reconciliation of versions: [`last_write_wins`],
//!   [`tie_goes_to_tombstone`], [`delete_shadows_older_not_newer`],
//!   [`concurrent_writers`] (in `conformance/reconcile.rs`);
//! - S3, TTLs: [`ttl_expiry`], [`ttl_counts_whole_seconds`] (in
//!   `conformance/ttl.rs`);
//! - S4, order and limit, and key scans: [`column_order`],
//!   [`limit_and_start_column`], [`scan_pages_through_keys`],
//!   [`scan_cells_pages_through_token_ranges`],
//!   [`server_time_reads_the_coordinators_clock`],
//!   [`each_host_answers_its_own_clock`] (in `conformance/reads.rs`);
//! - S6, tombstones cost reads: [`tombstones_cost_reads`],
//!   [`too_many_tombstones_fail_the_read`] (in `conformance/tombstones.rs`);
//! - fenced writes (docs/design.md §5): [`fenced_writes_refuse_smaller_tokens`],
//!   [`concurrent_fenced_writers_end_with_the_largest_token`] (in
//!   `conformance/fenced.rs`).

mod fenced;
mod reads;
mod reconcile;
mod tombstones;
mod ttl;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::cell::{CellWrite, RowQuery, Timestamp, WriteOptions};
use crate::clock::ManualClock;
use crate::schema::SCRATCH;
use crate::{Clock, MemoryStore, Store};

pub use fenced::{
    concurrent_fenced_writers_end_with_the_largest_token, fenced_writes_refuse_smaller_tokens,
};
pub use reads::{
    column_order, each_host_answers_its_own_clock, limit_and_start_column,
    scan_cells_pages_through_token_ranges, scan_pages_through_keys,
    server_time_reads_the_coordinators_clock,
};
pub use reconcile::{
    concurrent_writers, delete_shadows_older_not_newer, last_write_wins, tie_goes_to_tombstone,
};
pub use tombstones::{tombstones_cost_reads, too_many_tombstones_fail_the_read};
pub use ttl::{ttl_counts_whole_seconds, ttl_expiry};

/// A backend under test.
#[async_trait]
pub trait Target: Send + Sync + Debug {
    /// The store under test.
    fn store(&self) -> &dyn Store;
    /// A timestamp base for writes: the client's "now".
    fn now(&self) -> Timestamp;
    /// Lets `d` pass on the store's TTL clock: a manual clock moves, a real
    /// cluster is waited for.
    async fn advance(&self, d: Duration);
    /// A row key unique to this run and `name`.
    fn unique(&self, name: &str) -> String;
    /// The keyspace the store's tables live in, as a cluster names it in
    /// its warnings ([`crate::tombstones::read_cql`]).
    fn keyspace(&self) -> String {
        crate::memory::DEFAULT_KEYSPACE.to_string()
    }
    /// A target beside this one, for a test that leaves a row of
    /// tombstones behind, whose tables no other test of the suite scans: a
    /// real cluster keeps tombstones for `gc_grace_seconds` (10 days on
    /// `scratch`), and a later run's scan of the whole ring would pass them
    /// and be refused. `None` (the default): this target will do, its
    /// tables being new with each target.
    async fn apart(&self) -> Option<Box<dyn Target>> {
        None
    }
}

/// The embedded store on a manual clock: time passes instantly.
#[derive(Debug)]
pub struct MemoryTarget {
    clock: Arc<ManualClock>,
    store: MemoryStore,
}

impl MemoryTarget {
    /// A fresh embedded store on a manual clock.
    pub fn new() -> Self {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(
            1_700_000_000_000_000,
        )));
        MemoryTarget {
            store: MemoryStore::with_clock(clock.clone()),
            clock,
        }
    }
}

impl Default for MemoryTarget {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Target for MemoryTarget {
    fn store(&self) -> &dyn Store {
        &self.store
    }
    fn now(&self) -> Timestamp {
        self.clock.now()
    }
    async fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }
    fn unique(&self, name: &str) -> String {
        name.to_string()
    }
}

pub(super) fn at(t: Timestamp, offset: i64) -> WriteOptions {
    WriteOptions::at(t.offset_micros(offset))
}

pub(super) fn cell(column: &str, value: &str) -> CellWrite {
    CellWrite::new(column, value.as_bytes().to_vec())
}

pub(super) async fn values(t: &dyn Target, row: &str) -> Vec<(String, String)> {
    t.store()
        .read(SCRATCH, row, &RowQuery::all())
        .await
        .expect("read")
        .into_iter()
        .map(|c| (c.column, String::from_utf8_lossy(&c.value).into_owned()))
        .collect()
}

pub(super) async fn value_of(t: &dyn Target, row: &str, column: &str) -> Option<String> {
    values(t, row)
        .await
        .into_iter()
        .find(|(c, _)| c == column)
        .map(|(_, v)| v)
}

/// Instantiates every conformance check as a `#[tokio::test]`. `$make` is an
/// expression evaluating to a future of a [`Target`]; it runs once per test.
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@each $make;
            last_write_wins, tie_goes_to_tombstone, delete_shadows_older_not_newer,
            ttl_expiry, ttl_counts_whole_seconds, column_order, limit_and_start_column, scan_pages_through_keys,
            scan_cells_pages_through_token_ranges, server_time_reads_the_coordinators_clock,
            each_host_answers_its_own_clock, concurrent_writers, tombstones_cost_reads, too_many_tombstones_fail_the_read,
            fenced_writes_refuse_smaller_tokens, concurrent_fenced_writers_end_with_the_largest_token);
    };
    (@each $make:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let target = $make.await;
                $crate::conformance::$name(&target).await;
            }
        )*
    };
}
