//! The combined lock, the locker factory, the rollout state machine and
//! the node registry: how a running fleet moves from the legacy lock to the
//! queue lock with no downtime and never two holders at once.
//!
//! A service does not depend on this crate: the `lockshift` crate's node
//! runs the algorithm the stage allows and reports to the registry. This
//! crate is for the parts around it — the operator tool reads and moves the
//! stage with [`Rollout`] (guards evaluated on [`Rollout::evidence`]), and
//! every locker in the workspace is built by [`Lockers`], which gives each
//! locker the time service it needs for as long as it lives.
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
//! Every pair of algorithms excludes by Lemma 1 — a combined winner passed
//! both G1 and Q1 — except legacy beside queue, which breaks (the safety
//! table, docs/design.md §3). So the stages
//! `legacy` → `dual` → `queue` → `complete` never let the two run together
//! (R1), moved by [`rollout`] under guards on the registry, activity
//! records and a census of lock cells; the node runtime keeps lagging nodes
//! apart (R2–R8). The argument is written once, in docs/design.md §4.
//!
//! # Modules
//! [`CombinedLocker`]; [`Lockers`] (the one locker factory); [`stage`],
//! [`rollout`] (transitions, guards, [`rollout::Evidence`]), [`registry`],
//! [`census`]; [`LockSettings`] and [`RolloutSettings`] (the whole settings
//! file is `lockshift::Settings`).

pub mod census;
mod error;
mod locker;
mod lockers;
mod mode;
pub mod registry;
pub mod remedy;
pub mod rollout;
mod settings;
pub mod stage;

pub use error::{EvidenceError, RolloutError};
pub use locker::CombinedLocker;
/// How combined waiters pace themselves beside legacy contenders: one
/// [`LegacyPacing`] is shared by every combined locker of a process
/// (`Lockers::with_pacing`). The node runtime (`lockshift::Node`), the
/// benchmark's workers and the simulation's fleet build one per process.
pub use locker::LegacyPacing;
pub use lockers::{LockerSettings, Lockers};
pub use mode::Mode;
pub use rollout::{Rollout, StageRecord, TransitionReport, TransitionRequest, Verdict};
pub use settings::{LockSettings, RolloutSettings};
pub use stage::Stage;
/// How the node runtime (the `lockshift` crate) resolves its algorithm:
/// moved to `lockshift_decide::algorithm`, re-exported here.
pub use stage::{Resolution, resolve};
