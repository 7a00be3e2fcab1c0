//! The fair queue lock of the thesis (§5, listings 6–9), with leases that
//! tell the holder when they are lost, a non-decreasing time service and
//! fencing tokens — on the `store` interface only.
//!
//! Per lock, a **queue row** orders waiters and the **main row** (the same
//! `main` table the legacy lock uses) records the holder. A waiter writes a
//! queue cell saying its arrival time (listing 6 puts the time in the name;
//! here the name is the owner id, reused by the process's next acquisition,
//! so a lock's rows hold one tombstone per slot rather than one per
//! acquisition — `queue.rs`, docs/design.md §2a), and the line is read in
//! arrival order. When its cell is the first live one, it
//! writes its `main` cell and re-reads `main`: if only its own cell is there
//! it holds the lock (listing 7). Release deletes the `main` cell.
//!
//! Beyond the thesis: an uncontended acquisition takes Lemma 1's minimum,
//! one write round and one read round (the queue and `main` cells written
//! together, read back together); the next waiter's `main` cell waits beside
//! the holder's as a reservation, so a hand-off is the holder's delete and
//! one read; waiters poll by the store's measured round trip; a holder keeps
//! only its `main` cell, so renewing costs two operations per lock. The
//! waiter is an explicit state machine (docs/design.md §3,
//! `lockshift_decide::waiter`), driven by [`Line`].
//!
//! # Invariants
//!
//! The queue rules Q1–Q5 (docs/design.md §2) and Q6, the reservation behind
//! the waiter ahead (docs/design.md §3), each proved once there: queue +
//! queue (thesis theorem 1) under Q1 and Q6, skipping dead waiters under Q3.
//! Legacy and queue must never run together (docs/design.md §3).
//!
//! # Fairness (theorem 2)
//!
//! Waiters enter in queue order: only the first in line writes `main` to
//! enter (the second's reservation behind it is claimed only once the
//! first has left the queue), and a fast-path arrival holds only if it is
//! first in line. With a
//! non-decreasing time service a new arrival queues after everyone already
//! waiting. Dead waiters are skipped after `stale_after` and their cells
//! expire after the waiting TTL; a crashed holder's `main` cell expires
//! after the lease TTL.
//!
//! # Modules
//! [`QueueLocker`] (a node builds it: `lockshift_rollout::Lockers`);
//! [`QueueSettings`], [`TimeSettings`] (the `lock.queue` and `time`
//! settings). The rest is shared with the combined lock, the census and the
//! operator tool, and documented for them (a service never needs it; the
//! `lockshift` crate does not re-export it):
//!
//! - the waiting line: [`Line`], the driver both locks wait in, and
//!   [`MainEntry`], the one thing they do differently (how a waiter writes
//!   and verifies `main`), with what it is handed ([`Arrival`]) and the
//!   read it is built from ([`read_main`]); what an entry returns and
//!   where a read of `main` shows a cell standing are pure data and live in
//!   [`lockshift_decide::waiter`];
//! - [`queue`]: queue-cell naming and a waiter's place in the row;
//! - [`time`]: the time service ([`TimeService`], [`TimeSource`]), which
//!   names queue cells with a time that does not go back;
//! - [`metrics`]: the one metric the line records itself.

mod line;
mod locker;
pub mod metrics;
pub mod queue;
mod settings;
pub mod time;

/// The waiting line and what a [`MainEntry`] is built from, for the
/// combined lock.
pub use line::{Arrival, Line, MainEntry, StoreFuture, read_main};
pub use locker::{LineLocker, QueueEntry, QueueLocker};
pub use settings::{QueueSettings, TimeSettings, TimeSourceKind};
/// The time service: started by the locker factory
/// (`lockshift_rollout::Lockers`); each locker holds a source of it, which
/// keeps it running for as long as the locker lives.
pub use time::{TimeService, TimeSource};

#[cfg(test)]
mod tests;
