//! The lock API shared by lockshift's algorithms: acquire, try-acquire, a
//! guard that releases, and leases that tell the holder when they are lost.
//!
//! The legacy lock, the queue lock and the combined lock each implement
//! [`Locker`] over the `store` interface only, so one service can switch
//! between them behind a single handle. What they share lives here:
//!
//! - [`LockId`], [`NodeId`], [`OwnerId`]: a lock is a row key; every
//!   acquisition gets a fresh owner id `node/nonce`, the column name it writes.
//! - [`Lease`]: every cell an acquisition writes — waiter or holder — goes
//!   through its lease, which gives it the TTL, rewrites it in the background,
//!   removes it on release, and fires the one-way lost signal.
//! - [`LockGuard`]: lock id, owner, algorithm, fencing token (any
//!   algorithm, on request), lost signal checked against the clock,
//!   explicit `release().await`, release on drop.
//! - [`LockContext`] and [`Waiting`]: the parts lockers are built from.
//!
//! # Invariants
//!
//! - **K1.** An owner id is used by exactly one acquisition.
//! - **K2.** Every cell an acquisition writes is registered with its lease
//!   before the write is sent, and the lease deletes it on release, on drop,
//!   or it expires within one TTL (thesis §5.3).
//! - **K3.** The lost signal fires no later than `lost_after_fraction × TTL`
//!   after the last renewal that was proven (sent and acknowledged), i.e.
//!   before the cell can expire — TTLs count in whole seconds, so that is
//!   `sent + ttl − 1 s − skew allowance`, which [`LeaseSettings::problems`]
//!   enforces — and it is never un-fired. See [`lease`].
//! - **K4.** A lease never writes a cell it has begun to delete, and never
//!   rewrites a cell a renewal found gone (no resurrection).
//!
//! # Safety argument (what this crate contributes)
//!
//! Exclusion itself is each algorithm's business (Lemma 1 of the thesis on
//! the main or shadow row). This crate guarantees the conditions the
//! arguments assume: that a holder's main cell exists for as long as the
//! holder believes it holds the lock (K3: it is told before the cell can
//! expire), and that a cell removed by anyone stays removed (K4).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use lockshift_lock::{Algorithm, LeaseSettings, LockContext, LockId, NodeId};
//! use lockshift_store::{MemoryStore, RowQuery, Store, SystemClock, schema};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let store = Arc::new(MemoryStore::new());
//! let ctx = LockContext::new(store.clone(), Arc::new(SystemClock), NodeId::new("n1")?,
//!     LeaseSettings::default(), Some(7))?;
//! let lock = LockId::new("accounts")?;
//! let owner = ctx.new_owner();
//! let lease = ctx.start_lease(&lock, &owner, Algorithm::Queue);
//! lease.write(schema::MAIN, owner.as_str(), b"queue").await?;
//! assert_eq!(store.read(schema::MAIN, "accounts", &RowQuery::all()).await?.len(), 1);
//! lease.release().await?;
//! assert!(store.read(schema::MAIN, "accounts", &RowQuery::all()).await?.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod api;
pub mod cells;
mod context;
mod error;
mod guard;
mod id;
pub mod lease;
pub mod metrics;
mod settings;

pub use api::{AcquireOptions, Algorithm, Locker};
pub use cells::{
    ActivityObserver, FENCE_COLUMN, RESERVED_VALUE, is_legacy_evidence, lockshift_writer,
};
pub use context::{Interrupted, LockContext, Stop, Waiting};
pub use error::{
    AcquireError, FenceError, InvalidId, LeaseLostReason, ReleaseError, TryAcquireError,
};
pub use guard::{LockGuard, Revoker};
pub use id::{LockId, MAX_LOCK_ID_LEN, MAX_NODE_ID_LEN, NodeId, OwnerId, host_name};
pub use lease::Lease;
pub use settings::{
    LeaseSettings, MIN_LEASE_TTL, TTL_SKEW_ALLOWANCE, fmt_duration, scale_duration,
};
