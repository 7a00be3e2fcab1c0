//! The combined lock: safe beside legacy holders, queue holders and
//! itself, so a running fleet can move from the legacy lock to the queue
//! lock with no downtime and never two holders at once.
//!
//! A service does not depend on this crate: the `lockshift` crate's node
//! runs the algorithm the stage allows. The rollout that moves the stage,
//! and the factory every locker in the workspace is built by, are
//! `lockshift-rollout`'s.
//!
//! # The combined lock (thesis §7.2)
//!
//! Enqueue like the queue lock. When first in line, the combined lock's
//! first step is the legacy arbitration G1 (write my `shadow` cell, read
//! `shadow` — alone? — fresh read of `main` — empty? — write my `main`
//! cell), its second the queue lock's check Q1 (re-read `main`, hold only
//! if it holds just my cell, else delete my `main` cell and retry). Release
//! removes every cell the acquisition wrote (`main`, `queue`, `shadow`).
//! Uncontended it costs 6 store operations in 3 round trips from stage
//! `dual` on, 7 in 5 beside legacy contenders (the queue lock: 4 in 2) —
//! measured by
//! `locker::tests::uncontended_acquire_costs_three_round_trips_from_dual_on`,
//! `locker::tests::uncontended_acquire_costs_five_round_trips_beside_legacy`
//! and the queue lock's
//! `tests::uncontended_acquire_costs_two_round_trips_and_release_one`.
//!
//! # Safety and the rollout (docs/design.md §3, §4)
//!
//! A combined winner passed both G1 and Q1, so it excludes legacy and queue
//! holders alike (the safety table, docs/design.md §3); the stages keep
//! legacy and queue from running together (R1, docs/design.md §4).
//!
//! # Modules
//! [`CombinedLocker`]. How it paces itself beside legacy contenders is each
//! acquisition's [`Pacing`](lockshift_decide::binding::Pacing), read from
//! its [`Binding`](lockshift_lock::Binding): a node binds every acquisition
//! to the pacing its confirmed stage calls for, and an unbound one paces
//! as beside legacy contenders.

mod locker;

pub use locker::CombinedLocker;
