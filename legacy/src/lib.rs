//! The legacy lock: main and shadow tables, faithful to the thesis (§4,
//! listings 4–5), on the `store` interface only.
//!
//! A service does not use this crate directly: it depends on `lockshift`,
//! whose node picks this algorithm when `node.mode` (or the rollout stage)
//! says `legacy`. It is here to run beside the binaries that predate
//! lockshift, with exactly their protocol, until the rollout retires it.
//!
//! Row = lock id in both tables; column = owner id. `TryLock` reads `main`;
//! if it holds exactly one cell of another owner the answer is
//! `AnotherThreadIsOwner` (the thesis answers `Success` for a cell of my
//! own: lockshift never does, G3). Otherwise it writes its `shadow` cell, reads
//! `shadow`, and — if its cell is the only one and a fresh read of `main` is
//! empty — writes its `main` cell, deletes its `shadow` cell and succeeds;
//! else it deletes its `shadow` cell: `ConcurrentAttempt`. `GetLock` repeats
//! `TryLock`, pausing U[0, 1 s) after another owner and U[0, 50 ms × attempt)
//! after a concurrent attempt (or the shipped C# lock's 50 ms × e^min(attempt, 5)).
//!
//! # Invariants
//!
//! - **G1.** A contender writes `main` only while its own `shadow` cell is
//!   the only one it saw, and only after a fresh read of `main` was empty.
//! - **G2.** Every cell carries the lease TTL and is renewed while needed
//!   (see `lockshift_lock::lease`); a failed step's cells are deleted before
//!   the next attempt.
//! - **G3.** A contender succeeds only through G1: a `main` cell under its
//!   own owner id that this acquisition did not write is not its holding.
//!   The thesis' owner id was a thread's, so a lone cell of its own meant
//!   it already held the lock; lockshift's names a *slot* (L7), which the
//!   process's next acquisition of the lock reuses, and a write of the
//!   slot's previous lease answered with a timeout may land after that
//!   lease ended (lockshift_lock L5). Such a leftover holds nothing (its
//!   lease is over) and would expire under a "holder" that never renews
//!   it: the contender deletes it — stamped above every write of the slot's
//!   earlier leases (L1) — and enters through shadow as usual.
//!
//! # Safety argument (legacy + legacy)
//!
//! Suppose A and B both succeed. Each wrote its shadow cell and then read
//! shadow seeing only its own, which Lemma 1 (thesis §5.1) forbids if their
//! shadow cells were both present — so their shadow phases did not overlap:
//! say A deleted its shadow cell before B wrote its own. A wrote main before
//! deleting its shadow cell, so B's fresh read of main (after B's shadow
//! write) sees A's cell and B does not write main (G1). Hence at most one
//! holder, as long as A's main cell lives — which its lease guarantees for
//! as long as A is told it holds the lock.
//!
//! The argument needs every contender to respect shadow. A queue-lock holder
//! writes main without shadow, so legacy and queue must never run together
//! (docs/design.md §3); the combined lock enters main through this very protocol.
//!
//! # Fairness
//!
//! None: the winner of a release is whoever retries first, which starves
//! others under contention (thesis table 2: 5 processes, max wait 502 s).
//!
//! # Modules
//! [`LegacyLocker`] (listing 5; its `try_lock` is listing 4, with the
//! shadow arbitration of lines 7–15), [`LegacySettings`].

mod locker;
mod protocol;
mod settings;

pub use locker::LegacyLocker;
pub use settings::{Backoff, LegacySettings};

#[cfg(test)]
mod tests;
