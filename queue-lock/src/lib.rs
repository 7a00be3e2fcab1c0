//! The fair queue lock of the thesis (§5, listings 6–9), with leases that
//! tell the holder when they are lost, a non-decreasing time service and
//! fencing tokens — on the `store` interface only.
//!
//! Per lock, a **queue row** orders waiters and the **main row** (the same
//! `main` table the legacy lock uses) records the holder. A waiter writes a
//! queue cell named `20-digit time ‖ owner id` (listing 6), so the row's
//! byte order is arrival order. When its cell is the first live one, it
//! writes its `main` cell and re-reads `main`: if only its own cell is there
//! it holds the lock, otherwise it deletes its `main` cell and tries again
//! (listing 7). Release deletes the `main` and queue cells.
//!
//! # Invariants
//!
//! - **Q1.** A waiter holds the lock only after a read of `main`, made after
//!   its own `main` write, showed its cell alone.
//! - **Q2.** A waiter has a `main` cell only while it is first in line, or
//!   while it is next behind a head that holds `main` alone (a reservation,
//!   see [`Line`]: "Preparing the hand-off"); it removes any other leftover
//!   before waiting on.
//! - **Q3.** Queue cells and `main` cells carry the lease TTL and are renewed
//!   while their owner waits or holds; a waiter whose queue cell is gone
//!   re-enqueues, one whose lease is lost re-enqueues with a new owner id.
//! - **Q4.** A waiter `k` live cells from the front polls every
//!   `k × head_poll` (at most `waiter_poll`), backing off while the line
//!   stands still: only the next waiter polls at full speed, and no waiter
//!   loops hot against the store.
//! - **Q5.** Reservations never wait for each other for ever: a
//!   reservation is marked (`RESERVED_VALUE`), nobody reserves while `main`
//!   holds two cells or behind a cell so marked, and a claimed reservation
//!   is re-marked a holding. Reserving is check-then-act, so two waiters can
//!   still reserve at once; a prepared waiter that sees only reservations
//!   beside its own asks the queue, and every reservation that is not first
//!   in line withdraws.
//!
//! # Safety argument (queue + queue; thesis theorem 1)
//!
//! If A and B both hold the lock, each wrote its `main` cell and then read
//! `main` seeing only its own (Q1) — impossible by Lemma 1 while both cells
//! live. Both cells live while their holders believe they hold (the lease
//! fires its lost signal before a cell can expire). The queue only orders
//! entries: nothing about exclusion depends on it, which is why skipping a
//! dead head (a cell not renewed for `stale_after`) is safe. A legacy holder
//! writes `main` without re-reading it, which breaks this argument: see
//! docs/design.md §3 for why legacy and queue must never run together.
//!
//! # Fairness (theorem 2)
//!
//! Waiters enter in queue order; with a non-decreasing time service a new
//! arrival queues behind everyone already waiting. Dead waiters are skipped
//! after `stale_after`, a crashed holder's `main` cell expires after the TTL.
//!
//! # Modules
//! [`QueueLocker`]; [`Line`] and [`MainEntry`] (the waiting loop, shared with
//! the combined lock); [`queue`] (naming, positions); [`time`] (the time
//! service); [`QueueSettings`], [`TimeSettings`].

mod line;
mod locker;
pub mod queue;
mod settings;
pub mod time;

pub use line::{Entry, Line, MainEntry, Place, Prepared, verdict_on_main};
pub use locker::{QueueEntry, QueueLocker};
pub use lockshift_lock::RESERVED_VALUE;
pub use settings::{QueueSettings, TimeSettings, TimeSourceKind};
pub use time::{TimeService, TimeSource};

#[cfg(test)]
mod tests;
