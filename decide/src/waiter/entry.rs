//! What the driver's entry into `main` reports to the waiter: an arrival
//! ([`Arrived`]) and one attempt at `main` by the first waiter in line
//! ([`Entered`]). The entry does the I/O and says what it read; what to
//! make of it is the waiter's decision.

use crate::cell::Cell;
use crate::queue::Position;

/// What an arrival found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrived {
    /// Where the queue cell stands.
    pub position: Position,
    /// The read of `main` made after the entry's own `main` write, when it
    /// made one (the fast path); the lock is the waiter's iff it is first in
    /// line and this read shows its cell alone (Q1).
    pub main: Option<Vec<Cell>>,
    /// Whether the entry wrote cells besides the queue cell (they must go
    /// if the lock was not taken: Q2).
    pub wrote: bool,
}

/// What one attempt at `main` by the first waiter found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entered {
    /// My `main` cell is written; `main` is a read of `main` made after
    /// that write. `marked_reservation`: the cell is marked [`RESERVED_VALUE`] (it
    /// becomes a reservation if someone else holds, and is re-marked a
    /// holding once the lock is mine).
    ///
    /// [`RESERVED_VALUE`]: crate::cells::RESERVED_VALUE
    Read {
        /// The read of `main` after my write.
        main: Vec<Cell>,
        /// Whether my cell is marked a reservation.
        marked_reservation: bool,
    },
    /// Nothing of mine is left in `main`: someone else was in the way (in
    /// `main`, or arbitrating in `shadow`). Wait for `main` to empty, then
    /// enter again. `shadow_checked`: what the entry readied stands (the
    /// combined lock's `shadow` cell, checked alone), and the entry's next
    /// attempt may build on it.
    Blocked {
        /// Whether the checked `shadow` cell stands.
        shadow_checked: bool,
    },
}
