//! A fair distributed lock on Cassandra or ScyllaDB, and a rolling migration
//! to it from the legacy main/shadow lock with no moment where two holders
//! share a lock. This is the one crate a service depends on.
//!
//! ```no_run
//! use lockshift::prelude::*;
//! # async fn write_report(_token: u64) {}
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let node = Node::connect("lockshift.toml").await?; // settings + LOCKSHIFT__… env, store, registry, reload
//!     let guard = node.acquire("nightly-report").await?; // waits its turn, in arrival order
//!     let token = guard.fencing_token().await?;          // the resource refuses smaller tokens
//!     tokio::select! {
//!         why = guard.until_lost() => eprintln!("lock lost ({why}): stop writing"),
//!         _ = write_report(token) => {}
//!     }
//!     guard.release().await?;
//!     node.shutdown().await; // releases whatever is still held, leaves the registry
//!     Ok(())
//! }
//! ```
//!
//! `lockshift.toml` names the cluster and the node's mode (every key, with
//! its default: [`settings`]); any key can come from the environment
//! instead, e.g. `LOCKSHIFT__STORE__CQL__CONTACT_POINTS=10.0.0.1:9042`.
//! `migrate serve` runs a local endpoint to try it against; the repository's
//! `examples/` has this program and a fuller service.
//!
//! # What a service needs to know
//!
//! - **[`Node`]** is the handle: [`Node::connect`] opens the store, reads
//!   the rollout stage, registers in the node registry and starts the
//!   background work (heartbeats, stage re-reads, re-reading `node.mode`
//!   from the config file). It is the one handle to acquire with:
//!   [`Node::acquire`], [`Node::acquire_with`], [`Node::try_acquire`].
//!   Clone it freely; it runs while a clone or a held guard lives. [`Node::builder`] chooses each
//!   part (explicit settings, a store you opened, a test clock).
//! - **[`LockGuard`]** is the held lock; only a node hands one out. Watch [`LockGuard::lost`]: it fires
//!   before the lease can expire (a slow or unreachable store), and from
//!   then on someone else may hold the lock; [`LockGuard::until_lost`] is
//!   the same as a future for `select!`. Check
//!   [`LockGuard::is_lost`] right before each action and pass
//!   [`LockGuard::fencing_token`] to the resource: a process pause can fall
//!   between the check and the action, and the token is what stops a paused
//!   holder's late write (docs/design.md §5). When the resource is a table
//!   of the store, [`Node::fenced_writer`] writes its cells under the
//!   token, routed to the lock's home ([`fenced`]). Release with
//!   [`LockGuard::release`]; a dropped guard releases in the background.
//! - **`node.mode`** is `auto` (follow the rollout: legacy-compatible until
//!   the operator moves the fleet on, then the fair queue lock), or one of
//!   `legacy`, `combined`, `queue`. A mode the stage forbids runs as
//!   `combined`, which is safe beside every other; editing the file switches
//!   new acquisitions without a restart. The operator moves the stage with
//!   `migrate advance` (docs/operating.md).
//! - **[`Node::shutdown`]** before `main` returns: it ends waiting
//!   acquisitions, releases held locks (their `lost()` fires) and leaves
//!   the registry. A guard merely dropped at the end of `main` keeps its
//!   lock until the lease TTL runs out: the runtime that would delete it is
//!   gone.
//! - **Logs** go through [`tracing`](https://docs.rs/tracing): install a
//!   subscriber (e.g. `tracing-subscriber`) to see warnings such as a lost
//!   lease or a stage the node cannot confirm — without one they are
//!   silent. **Metrics** go through the `metrics` facade ([`metrics`] lists
//!   them): install any exporter before starting the node.
//!
//! # Why it is safe
//!
//! Exclusion rests on two storage facts — last write wins per cell, and
//! QUORUM reads see QUORUM writes (Lemma 1: of two clients that each write
//! a cell into one row and then read it, one sees both) — and on leases that
//! tell the holder before its cells can expire. Every pair of algorithms
//! that may run together excludes (docs/design.md §3); the one pair that
//! does not, legacy beside queue, is kept apart by the rollout stages and
//! the node runtime's rules R2–R8 (docs/design.md §4), so that no legacy
//! and queue acquisitions are ever in flight at once — also when nodes lag,
//! lose the database or pause.
//!
//! # Example on the embedded store
//!
//! ```
//! use std::sync::Arc;
//! use lockshift::prelude::*;
//! use lockshift::store::MemoryStore;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let node = Node::builder().store(Arc::new(MemoryStore::new())).start().await?;
//! let guard = node.acquire("accounts").await?;
//! assert!(node.try_acquire("accounts").await.unwrap_err().is_held());
//! node.shutdown().await; // releases it for the holder
//! assert!(guard.is_lost());
//! assert!(node.acquire("accounts").await.is_err(), "the node is shut down");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Modules
//!
//! [`Node`], [`NodeBuilder`] (the runtime); [`LockGuard`]; [`settings`]
//! (every key); [`metrics`] (what is measured); [`homes`] (where each lock
//! lives, with several datacenters); [`fenced`] (writes under a fencing
//! token); [`store`] (what a node is started on); [`prelude`]. The lock
//! algorithms, the rollout and the storage layer live in sibling crates
//! (`lockshift-legacy`, `-queue-lock`, `-combined`, `-rollout`, `-store`)
//! that a service does not need to name: every type this crate's API names
//! is exported here by name, none of those crates whole. The API is
//! `lockshift/public-api.txt`, rendered from rustdoc by the `public-api`
//! crate; `tests/layout/public_api.rs` checks both.

// Every public item is documented; CI denies warnings (`.ci/run`).
#![warn(missing_docs)]

mod binding;
mod election;
mod error;
pub mod metrics;
mod node;
pub mod settings;
mod sharing;

pub use election::{
    CampaignError, Election, ElectionReadError, Leader, LeaderWatch, Leadership, OBSERVE_EVERY,
};
pub use error::StartError;
pub use lockshift_decide::algorithm::{Mode, Stage};
/// The process's clock against the database's ([`NodeStatus::clock`],
/// docs/design.md §4b).
pub use lockshift_decide::offset::ClockReading;
pub use lockshift_decide::rollout::StageRecord;
/// A sharing suffix no lockshift build writes ([`Sharing::from_suffix`]).
pub use lockshift_decide::sharing::UnknownSharing;
pub use lockshift_lock::{
    AcquireError, AcquireOptions, Algorithm, FenceError, Incarnation, InvalidId, KindConflict,
    LeaseLostReason, LockGuard, LockId, NodeId, OwnerId, ReleaseError, Sharing, TryAcquireError,
    WaitWatch, WaitingFor,
};
pub use node::{Node, NodeBuilder, NodeStatus};
pub use settings::{Settings, SettingsError};
pub use sharing::{RwLock, Semaphore};
/// The lost signal's type ([`LockGuard::lost`]).
pub use tokio_util::sync::CancellationToken;

/// Homes (docs/design.md §4a): the datacenter each lock is read and
/// written at, by rule — what [`NodeStatus::homes`] reports and
/// [`settings::LockSettings::configured_homes`] gives.
pub mod homes {
    pub use lockshift_decide::home::{HomeRecord, InvalidPrefix, Rule, RuleState, Subject};
    pub use lockshift_store::homes::Configured;
}

/// Fenced writes (docs/design.md §5, "Fenced writes"): a service's own
/// cell, written under its lock's fencing token with one conditional
/// update, and refused by the database once a later holder has written.
/// [`Node::fenced_writer`] hands a writer out for a held guard.
pub mod fenced {
    pub use lockshift_decide::schema::SCRATCH;
    pub use lockshift_store::{CellWrite, FencedOutcome, FencedWriteError, FencedWriter, Table};
}

/// The storage a node runs on, for a service with no other dependency:
/// what [`NodeBuilder::store`] and [`NodeBuilder::clock`] take (the
/// in-process [`MemoryStore`](store::MemoryStore) and a
/// [`ManualClock`](store::ManualClock) for tests), the
/// [`StoreError`](store::StoreError) the lock errors carry (with the
/// [`OpKind`](store::OpKind) that failed), and the
/// [`Timestamp`](store::Timestamp) of a [`ClockReading`]. The methods of
/// [`Store`](store::Store) and [`Clock`](store::Clock) — implementing a
/// store of one's own, reading cells through one (a `CqlStore`), the
/// embedded store's simulation knobs — are `lockshift-store`'s API: a
/// service that needs them depends on that crate.
pub mod store {
    pub use lockshift_store::{
        Clock, ManualClock, MemoryStore, OpKind, SharedClock, SharedStore, Store, StoreError,
        StoreErrorKind, SystemClock, Timestamp,
    };
}

/// The tokio lockshift runs on, for a service with no other dependency:
/// `#[lockshift::tokio::main(crate = "lockshift::tokio")]`.
pub use tokio;

/// What most services need, in one `use`.
pub mod prelude {
    pub use crate::{
        AcquireError, AcquireOptions, LockGuard, LockId, Mode, Node, Settings, Stage,
        TryAcquireError,
    };
}
