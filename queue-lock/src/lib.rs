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
//! waiter is an explicit state machine (`Line`; `line/waiter/`).
//!
//! # Invariants
//!
//! - **Q1.** A waiter holds the lock only after a read of `main`, made after
//!   its own `main` write, showed its cell alone — or beside cells that
//!   name it as the waiter they are reserved behind (Q6).
//! - **Q2.** A waiter has a `main` cell only while it is first in line
//!   (entering, or a reservation beside a holder), second in line reserved
//!   behind the first (Q6), or for the one round trip of a fast-path
//!   arrival; it removes any other leftover before waiting on. A holder
//!   leaves the queue once it holds: its queue cell is deleted after its
//!   verifying read, so a waiter that finds itself first knows whoever is
//!   alone in `main` has verified (or is an arrival that is not first and
//!   withdraws).
//! - **Q3.** A waiter's cells — its queue cell, its reservations in `main`
//!   (and `shadow`) — carry the waiting TTL (`lock.queue.waiting_ttl`, 4 s)
//!   and are rewritten every `waiting_renew_every` (1 s), on the back of
//!   the waiter's own reads where it reads their rows (lease L6); once it
//!   holds, its `main` cell carries the lease TTL and is renewed as any
//!   holding. A waiter whose queue cell is gone re-enqueues, one whose
//!   lease is lost re-enqueues in a slot of its own (the old one is free
//!   again once the old lease's cells are gone, L7). So a waiter killed
//!   while it waits holds the line up for at most the waiting TTL, and a
//!   waiter that looks dead (its queue cell watched unchanged for
//!   `stale_after`) is skipped early. Both are safe; the proof is written
//!   once, in docs/design.md §2 ("Why skipping a dead waiter early is
//!   safe").
//! - **Q4.** A waiter polls by the store's round trip as it measures it: the
//!   next waiter about once per round trip while the line moves, a waiter
//!   `d` places back every `d` round trips (or half the line's pace per
//!   place), everyone less often the longer nothing changes; always within
//!   `min_poll`..`waiter_poll`. No waiter loops hot against the store.
//! - **Q5.** Reservations never wait for each other for ever: a reservation
//!   is marked (`RESERVED_VALUE`, or a value naming the waiter it is behind)
//!   and re-marked a holding once claimed; a waiter that sees only
//!   reservations beside its own — or, blocked without a cell of its own,
//!   only reservations in its way — asks the queue, and every reservation
//!   that is not first in line withdraws.
//! - **Q6.** The waiter second in line may reserve behind the first, X: its
//!   cell's value names X, and X disregards cells that name it (and only
//!   those). A waiter whose cell names X reads `main` for a claim only
//!   after a queue read that found X's queue cell gone — not merely dead —
//!   has ended; it keeps the cell only while X is directly ahead, and for a
//!   bounded time (16 measured round trips, at least `head_poll`).
//!
//! # Safety argument (queue + queue; thesis theorem 1)
//!
//! If A and B both hold the lock, each wrote its `main` cell and then read
//! `main` (Q1). Both cells live while their holders believe they hold (the
//! lease fires its lost signal before a cell can expire), so by Lemma 1 one
//! read — say A's — started after B's write ended and saw B's cell, with
//! the value B last wrote before its claim or a later one. A held anyway,
//! so that value named A (Q6): B was reserved behind A, and B's read of
//! `main` started after a queue read found A's queue cell gone. A deletes
//! it only after its own verifying read, so B's read followed A's `main`
//! write and saw A's cell — which never names B (B was behind A in the
//! queue's total order) — and B did not hold. Without Q6 it is plain
//! Lemma 1. This covers every way in: entering, claiming a reservation,
//! and the fast path, whose `main` read follows its `main` write just the
//! same; "first in line" is fairness, not exclusion. The queue orders
//! entries, and carries exclusion only through Q6's "X's cell is gone"; a
//! holder may leave the queue because it has verified. That skipping a dead
//! waiter early — a queue cell watched unchanged for `stale_after`, or
//! cells that expired with the waiting TTL — keeps this argument is Q3's
//! proof, in docs/design.md §2. A legacy
//! holder writes `main` without re-reading it, which breaks this argument:
//! see docs/design.md §3 for why legacy and queue must never run together.
//!
//! # Fairness (theorem 2)
//!
//! Waiters enter in queue order: only the first in line writes `main` to
//! enter (the second's reservation behind it is claimed only once the
//! first has left the queue), and a fast-path arrival holds only if it is
//! first in line. With a
//! non-decreasing time service a new arrival queues behind everyone already
//! waiting. Dead waiters are skipped after `stale_after` and their cells
//! expire after the waiting TTL; a crashed holder's `main` cell expires
//! after the lease TTL.
//!
//! # Modules
//! [`QueueLocker`] (a node builds it: `lockshift_combined::Lockers`);
//! [`QueueSettings`], [`TimeSettings`] (the `lock.queue` and `time`
//! settings). The rest is shared with the combined lock, the census and the
//! operator tool, and documented for them (a service never needs it; the
//! `lockshift` crate does not re-export it):
//!
//! - the waiting line: [`Line`], the driver both locks wait in, and
//!   [`MainEntry`], the one thing they do differently (how a waiter writes
//!   and verifies `main`), with what an entry returns ([`Arrival`],
//!   [`Arrived`], [`Entered`]) and the reads and verdicts it is built from
//!   ([`read_main`], [`verdict`], [`others_in`], [`MAIN_CELLS_READ`]);
//! - [`queue`]: queue-cell naming and a waiter's place in the row;
//! - [`time`]: the time service ([`TimeService`], [`TimeSource`]), which
//!   names queue cells with a time that does not go back.

mod line;
mod locker;
pub mod queue;
mod settings;
pub mod time;

/// The waiting line and what a [`MainEntry`] is built from, for the
/// combined lock.
pub use line::{
    Arrival, Arrived, Entered, Line, MAIN_CELLS_READ, MainEntry, StoreFuture, Verdict, others_in,
    read_main, verdict,
};
pub use locker::QueueLocker;
pub use settings::{QueueSettings, TimeSettings, TimeSourceKind};
/// The time service: built by the locker factory
/// (`lockshift_combined::Lockers`), which keeps it alive for as long as a
/// locker needs it.
pub use time::{TimeService, TimeSource};

#[cfg(test)]
mod tests;
