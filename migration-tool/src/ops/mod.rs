//! One module per command (and [`lock_session`], what `run-with-lock` and
//! `lock` share). Each takes typed values and an [`Env`], returns a
//! typed report (documented as its JSON schema), and never prints: progress
//! and notes go through callbacks the caller supplies (see `render`).
//!
//! Operations work on any [`SharedStore`], so their unit tests run on the
//! embedded store; the binary gives them a CQL connection.

use std::sync::Arc;
use std::time::Duration;

use lockshift::Settings;
use lockshift_decide::census::Staleness;
use lockshift_rollout::census::FleetStaleness;
use lockshift_rollout::rollout::Rollout;
use lockshift_store::{SharedClock, SharedStore, SystemClock, Table, Timestamp};
use serde::Serialize;

use crate::cli::ConnectOpts;
use crate::connect;

pub mod advance;
pub mod bench;
pub mod child;
pub mod clean;
pub mod demo;
pub mod home;
pub mod home_forget;
pub mod inspect;
pub mod leader;
#[cfg(test)]
mod leader_tests;
pub mod lock;
pub mod lock_session;
pub mod node_clocks;
pub mod rollback;
pub mod run_with_lock;
pub mod schema;
pub mod schema_home;
pub mod serve;
pub mod status;
mod status_views;

/// The database refused to read `lock`'s rows (more tombstones than its
/// failure threshold): an error naming the refusal and what to do, for
/// `inspect` and `run-with-lock` (exit 1).
pub fn refused_read(
    lock: &lockshift_lock::LockId,
    e: &lockshift_store::StoreError,
) -> anyhow::Error {
    anyhow::anyhow!(
        "the database refuses to read lock {lock}: {e}. Nothing is known about who holds or \
         waits for it. To do: {}",
        lockshift_decide::remedy::UNREADABLE_ACTION
    )
}

/// What an operation runs against: settings, store and clock.
#[derive(Debug, Clone)]
pub struct Env {
    /// The effective settings (flags, environment, file).
    pub settings: Settings,
    /// The store, every request routed to its row's home (docs/design.md
    /// §4a; the default route where no home is recorded).
    pub store: SharedStore,
    /// The same store unrouted: what a [`lockshift::Node`] the tool starts
    /// runs on (a node routes by homes of its own).
    pub raw: SharedStore,
    /// "Now", for ages and timestamps.
    pub clock: SharedClock,
    /// Keeps the routed store's view of the homes confirmed while the
    /// environment lives.
    _homes: Option<Arc<lockshift_rollout::homes::Refresher>>,
}

impl Env {
    /// Loads settings from `opts`, connects (checking the schema unless
    /// told to create it), and reads the homes from every datacenter.
    ///
    /// # Errors
    /// Settings (usage) or connection errors, explained.
    pub async fn open(opts: &ConnectOpts) -> anyhow::Result<Env> {
        let settings = connect::store_settings(opts, false)?;
        let store = connect::open(&settings).await?;
        Ok(Env::routed(settings, store, Arc::new(SystemClock)).await)
    }

    /// An environment over an already open store, its requests routed by
    /// the homes it reads from every datacenter now — and again every
    /// `rollout.stage_reread_every` while the environment lives.
    pub async fn routed(settings: Settings, raw: SharedStore, clock: SharedClock) -> Env {
        use lockshift_rollout::homes::{HomesRouter, HomesView, keep_fresh, refresh};
        let view = Arc::new(HomesView::new(
            clock.clone(),
            raw.topology().local,
            settings.lock.configured_homes(),
            settings.rollout.stage_valid_for,
        ));
        let store: SharedStore = Arc::new(HomesRouter::new(raw.clone(), view.clone()));
        refresh(&store, &view).await;
        let refresher = keep_fresh(store.clone(), view, settings.rollout.stage_reread_every);
        Env {
            settings,
            store,
            raw,
            clock,
            _homes: Some(Arc::new(refresher)),
        }
    }

    /// An environment over an already open store, as it is (no homes:
    /// tests on one datacenter).
    pub fn new(settings: Settings, store: SharedStore, clock: SharedClock) -> Env {
        Env {
            settings,
            raw: store.clone(),
            store,
            clock,
            _homes: None,
        }
    }

    /// The rollout state machine with this fleet's settings.
    pub fn rollout(&self) -> Rollout {
        Rollout::new(
            self.store.clone(),
            self.clock.clone(),
            self.settings.rollout.clone(),
            self.settings.lock.lease(),
            self.settings.lock.queue.clone(),
        )
    }

    /// The staleness thresholds of the fleet's census: the one nodes skip
    /// queue cells by (waiters' cells), and three lease renewal periods
    /// (holdings) — as the rollout guards judge them.
    pub fn stale_after(&self) -> Staleness {
        Staleness::of(&self.settings.lock.queue, &self.settings.lock.lease())
    }
}

/// Progress of a long scan: which table, how many rows so far.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// What is being done ("scanning", "deleting").
    pub phase: &'static str,
    /// The table, when scanning.
    pub table: Option<Table>,
    /// Items done.
    pub done: usize,
    /// Items in all, when known.
    pub total: Option<usize>,
}

/// Milliseconds in `d`, for JSON (`*_ms` fields).
pub fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A point in time and its age. In every report a duration is a `*_ms`
/// field (u64 milliseconds) and an instant a `*_us` field (i64 µs since the
/// Unix epoch).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct At {
    /// µs since the Unix epoch.
    pub at_us: i64,
    /// How long ago, by this tool's clock.
    pub age_ms: u64,
}

impl At {
    /// `t` seen at `now`.
    pub fn new(t: Timestamp, now: Timestamp) -> At {
        At {
            at_us: t.as_micros(),
            age_ms: ms(now.duration_since(t)),
        }
    }
}

/// Test support: stores with a lock the database refuses to read.
#[cfg(test)]
pub(crate) mod jammed {
    use lockshift_store::{
        CellWrite, Clock, MemoryStore, SharedClock, Store, Table, TombstoneThresholds, WriteOptions,
    };

    /// An embedded store on `clock` that fails reads passing more than 10
    /// tombstones (Cassandra: 100 000).
    pub(crate) fn store(clock: SharedClock) -> MemoryStore {
        MemoryStore::with_clock(clock)
            .with_tombstone_thresholds(TombstoneThresholds { warn: 5, fail: 10 })
    }

    /// Leaves 20 fresh tombstones and nothing live in `lock`'s row of
    /// `table`: reads of it are refused.
    pub(crate) async fn jam(store: &dyn Store, clock: &dyn Clock, table: Table, lock: &str) {
        let gone: Vec<String> = (0..20).map(|i| format!("gone-{i:02}")).collect();
        let cells: Vec<CellWrite> = gone
            .iter()
            .map(|c| CellWrite::new(c.clone(), b"queue".to_vec()))
            .collect();
        let t0 = clock.now();
        store
            .write(table, lock, &cells, WriteOptions::at(t0))
            .await
            .unwrap();
        store
            .delete(table, lock, &gone, t0.offset_micros(1))
            .await
            .unwrap();
    }
}

/// Test support: a store whose lock rows fail every request.
#[cfg(test)]
pub(crate) mod failing {
    use async_trait::async_trait;
    use lockshift_store::{
        MemoryStore, OpKind, Request, Response, Store, StoreError, StoreErrorKind, Table, schema,
    };

    /// An embedded store whose `main`, `shadow` and `queue` rows fail every
    /// read, write and delete with `kind` and `message` (as a cluster that
    /// lost its quorum, or a lock whose home datacenter is out of reach);
    /// the other tables (stage, registry, time) work.
    #[derive(Debug)]
    pub(crate) struct FailingLocks {
        pub(crate) inner: MemoryStore,
        pub(crate) kind: StoreErrorKind,
        pub(crate) message: &'static str,
    }

    impl FailingLocks {
        fn check(&self, op: OpKind, table: Table) -> Result<(), StoreError> {
            if [schema::MAIN, schema::SHADOW, schema::QUEUE].contains(&table) {
                return Err(StoreError::new(self.kind, op, Some(table), self.message));
            }
            Ok(())
        }
    }

    #[async_trait]
    impl Store for FailingLocks {
        async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
            self.check(request.kind(), request.table)?;
            self.inner.call(request).await
        }
        fn describe(&self) -> String {
            "failing locks".into()
        }

        fn topology(&self) -> lockshift_store::Topology {
            self.inner.topology()
        }
    }
}
