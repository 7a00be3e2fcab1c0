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
//! The legacy rules G1–G3, and their proof (legacy + legacy), are in
//! docs/design.md §2. A queue holder writes `main` without `shadow`, so
//! legacy and queue must never run together (docs/design.md §3); the
//! combined lock enters `main` through this very protocol (G1).
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
