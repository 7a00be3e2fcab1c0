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
//! Enqueue like the queue lock. When first in line: **C1** enter `main`
//! through the legacy shadow arbitration (write my `shadow` cell, read
//! `shadow` — alone? — fresh read of `main` — empty? — write my `main` cell);
//! then **C2** re-read `main` and hold the lock only if it holds just my cell,
//! else delete my `main` cell and retry. Release removes every cell the
//! acquisition wrote (`main`, `queue`, `shadow`). Uncontended it costs
//! 6 store operations in 3 round trips from stage `dual` on, 7 in 5 beside
//! legacy contenders (the queue lock: 4 in 2) — measured by
//! `locker::tests::uncontended_acquire_costs_three_round_trips_from_dual_on`,
//! `locker::tests::uncontended_acquire_costs_five_round_trips_beside_legacy`
//! and the queue lock's
//! `tests::uncontended_acquire_costs_two_round_trips_and_release_one`.
//!
//! # Safety table (docs/design.md §3): why each pair excludes
//!
//! All arguments use only Lemma 1 (thesis §5.1: of two clients that each
//! write a cell into one row and then read the row, at least one sees both
//! cells) and the lease guarantee that a holder's cells live while it holds.
//!
//! - **legacy + legacy** — holds. Two legacy winners each saw only their own
//!   `shadow` cell; by Lemma 1 their shadow phases did not overlap, so the
//!   later one's fresh read of `main` (after its shadow write) came after the
//!   earlier one's `main` write and saw it (see `lockshift_legacy`).
//! - **queue + queue** — holds. Each winner wrote `main`, then read `main`
//!   seeing only its own cell: Lemma 1 on `main` (thesis theorem 1).
//! - **legacy + combined** — holds. A combined winner passed C1, which is
//!   exactly the legacy arbitration, so against a legacy winner the
//!   legacy + legacy argument applies unchanged; C2 only removes successes.
//! - **combined + combined** — holds, by either argument: both passed C1
//!   (legacy + legacy), and both passed C2 (queue + queue).
//! - **combined + queue** — holds. The combined winner wrote `main` (in C1)
//!   and then re-read it in C2 seeing only its own cell; the queue winner
//!   wrote `main` and then read it seeing only its own: Lemma 1 on `main`.
//! - **legacy + queue** — **breaks**. The legacy writer decides on a fresh
//!   read of `main` *before* its `main` write and never reads again; a queue
//!   writer can write and verify `main` in between, and a legacy writer that
//!   read "empty" just before then writes too. Both hold the lock.
//!   `tests/simulation` keeps a negative control showing the checker finds
//!   it. The stages below make the pair impossible.
//!
//! # Stages (docs/design.md §4)
//!
//! `legacy` (legacy, combined) → `dual` (combined) → `queue` (combined,
//! queue) → `complete` (queue), and back. No stage, and no two adjacent
//! stages, allow both legacy and queue. Transitions are guarded
//! ([`rollout`]) on the registry, activity records and a census of lock
//! cells.
//!
//! # Safety argument for the rollout (beyond the thesis)
//!
//! Legacy and queue break each other only when a legacy *acquisition* and a
//! queue *acquisition* are in flight at once; a held guard is harmless to
//! later acquirers (its `main` cell is there, and every algorithm reads
//! `main` before it wins). The node runtime (`lockshift::Node`) and the
//! guards keep such acquisitions apart however nodes lag:
//!
//! - a node's stage view is confirmed only while its last stage read *and*
//!   its last heartbeat are younger than `rollout.stage_valid_for`;
//!   unconfirmed, it acts as combined;
//! - every acquisition is bound to the algorithm and stage version it
//!   resolved under; a waiting one leaves the line when the node's
//!   resolution changes, and follows the stage one version at a time only;
//! - a legacy or queue guard is handed out only under a view confirmed by
//!   the clock at that moment, of the binding's version;
//! - heartbeats report the oldest binding, registry rows outlive a silent
//!   node's view by a lease TTL, and guards read both;
//! - lockers and guards keep their node running.
//!
//! So a queue version is written only after every legacy acquisition of an
//! older version was handed out (or abandoned), and the mirror image on the
//! way back: docs/design.md §4 gives the argument step by step.
//!
//! # Invariants
//!
//! - **T1.** A node resolves its algorithm from its configured mode and the
//!   stage it has confirmed; a forbidden mode, and any mode under an
//!   unconfirmed stage, degrades to combined, never elsewhere (`resolve`).
//! - **T2.** Transitions move one stage at a time, under the rollout lock,
//!   only when every guard holds on evidence read under that lock.
//! - **T3.** The stage record's write timestamp exceeds its predecessor's.
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
