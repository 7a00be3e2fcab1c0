//! The lock API shared by lockshift's algorithms: acquire, try-acquire, a
//! guard that releases, and leases that tell the holder when they are lost.
//! A service meets these types through the `lockshift` crate, which
//! re-exports them (all but [`Locker`], [`Binding`], [`LegacySightings`]
//! and [`Revoker`]: its node is the one handle to acquire with, and binds
//! every acquisition itself):
//!
//! - [`LockGuard`]: the held lock, the one guard a locker and a node hand
//!   out — lock id, owner, algorithm, a fencing token on request (two
//!   store round trips the first time), the lost signal
//!   ([`LockGuard::lost`], [`LockGuard::until_lost`]) and
//!   [`LockGuard::is_lost`] checked against the clock, explicit
//!   `release().await`, release on drop. `#[must_use]`; a locker makes one
//!   from its [`Lease`] ([`Lease::into_guard`]); a node keeps a
//!   [`Revoker`] for each it hands out, to release it for the holder at
//!   shutdown.
//! - [`Locker`]: what every algorithm implements (`acquire`, `acquire_with`
//!   a timeout or a cancellation token, `try_acquire`), and
//!   [`AcquireOptions`]. Each acquisition also takes a [`Binding`] from
//!   whoever runs it (a node; [`Binding::unbound`] for a locker run alone):
//!   the one contract between the two — its pacing, its invalidation
//!   (the binder's cancel: the acquisition ends as
//!   [`AcquireError::Cancelled`]), and the
//!   [`LegacySightings`] its reads of `main` write into.
//! - [`LockId`], [`NodeId`], [`OwnerId`]: a lock is a row key; every
//!   acquisition writes under an owner id `node/IIIIIIIISSSSSSSS` — its
//!   process and a slot, reused by the process's next acquisition of the
//!   lock (L7) — the column name it writes. The ids are pure data from
//!   `lockshift_decide`; what they take from the operating system or a
//!   random draw comes from here: [`node_id_for_this_process`],
//!   [`derived_node_id`], [`new_incarnation`], [`host_name`].
//! - The errors, one per operation: [`AcquireError`], [`TryAcquireError`],
//!   [`FenceError`], [`ReleaseError`], and [`LeaseLostReason`].
//! - [`LeaseSettings`]: lease TTL, renewal period, when a lease counts as
//!   lost; [`metrics`]: the renewal-failure counter.
//!
//! The legacy, queue and combined lockers (sibling crates) implement
//! [`Locker`] over the `store` interface only, so one node can switch
//! between them under a single handle. They are built from parts a service
//! never needs (the `lockshift` crate does not re-export them), documented
//! here for algorithm crates built on this one:
//!
//! - [`LockContext`]: store, clock, node id, lease settings and seeded
//!   randomness, shared by every locker of a node; it hands out owner
//!   [`Slot`]s (L7) and starts leases.
//! - [`Waiting`]: the wait helper enforcing deadlines, cancellation and
//!   invalidation ([`Interrupted`], [`Stop`]); [`pause`]: pauses shorter than tokio's
//!   millisecond tick.
//! - [`lease`]: every cell an acquisition writes, waiter or holder, goes
//!   through its [`Lease`], which gives the cell its TTL ([`WaitingTerms`]
//!   while it waits), rewrites it in the background ([`ReadMark`]: a
//!   rewrite riding on the waiter's own read), removes it on release, and
//!   fires the one-way lost signal.
//! - [`scale_duration`]: settings arithmetic shared by the algorithms'
//!   settings.
//!
//! # Invariants
//!
//! The lock API's rules are the lease's, defined in [`lease`]: a slot is
//! reused only once its cells are gone (L7); every cell an acquisition
//! writes goes through its lease and is removed on release or drop (L4);
//! the holder is told before its cell can expire, and the signal is never
//! un-fired (L3); no resurrection (L2), but for a late write, which holds
//! nothing (L5).
//!
//! # Safety argument (what this crate contributes)
//!
//! Exclusion itself is each algorithm's business (Lemma 1 of the thesis on
//! the main or shadow row). This crate guarantees the conditions the
//! arguments assume: that a holder's main cell exists for as long as the
//! holder believes it holds the lock (L3: it is told before the cell can
//! expire), and that a cell removed by anyone stays removed (L2) — but for
//! a write of a lost lease landing late, which only makes others wait (L5).
//!
//! # How a locker writes through a lease
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
//! let lease = ctx.start_lease(ctx.take_slot(&lock), Algorithm::Queue, None);
//! let owner = lease.owner().clone();
//! lease.write(schema::MAIN, owner.as_str(), b"queue").await?;
//! assert_eq!(store.read(schema::MAIN, "accounts", &RowQuery::all()).await?.len(), 1);
//! lease.release().await?;
//! assert!(store.read(schema::MAIN, "accounts", &RowQuery::all()).await?.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod api;
mod binding;
mod cells;
mod context;
mod error;
mod guard;
mod id;
mod leader;
pub mod lease;
pub mod metrics;
pub mod pause;
mod settings;
mod slots;

pub use api::{AcquireOptions, Algorithm, KindConflict, Locker, Sharing, WaitWatch, WaitingFor};
pub use binding::Binding;
pub use cells::LegacySightings;
pub use context::{Interrupted, LockContext, Stop, Waiting};
pub use error::{AcquireError, FenceError, LeaseLostReason, ReleaseError, Seen, TryAcquireError};
pub use guard::{LockGuard, Revoker};
/// The ids: pure data (`lockshift_decide::id`), which the lock API takes
/// and returns.
pub use id::{
    Incarnation, InvalidId, LockId, MAX_LOCK_ID_LEN, MAX_NODE_ID_LEN, NodeId, OwnerId, cut_short,
};
pub use id::{derived_node_id, host_name, new_incarnation, node_id_for_this_process};
pub use leader::{read_leader, write_leader};
pub use lease::{Lease, ReadMark, WaitingTerms};
pub use settings::scale_duration;
pub use settings::{LeaseSettings, MIN_LEASE_TTL};
pub use slots::Slot;
