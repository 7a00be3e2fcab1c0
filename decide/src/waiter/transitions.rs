//! Every state change of a waiter, each a named transition: the only code
//! that assigns [`Waiter::state`] — its [`Phase`] can be made nowhere
//! else. A transition moves to its state and returns the action that
//! state starts with; the handlers (`queue.rs`, `main.rs`, `attempt.rs`,
//! the dispatch in `mod.rs`) only choose which transition follows an
//! observation.

use std::time::{Duration, Instant};

use super::{Action, Leaving, MainCell, Polling, Reservation, State, Then, Waiter};

/// A waiter's state, which only the transitions below assign: its field is
/// private to this module, so the handlers read it and never write it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Phase(State);

impl Phase {
    /// Where a new waiter starts: arriving.
    pub(super) const START: Phase = Phase(State::Arriving);
}

impl std::ops::Deref for Phase {
    type Target = State;

    fn deref(&self) -> &State {
        &self.0
    }
}

impl Waiter {
    /// Moves to `to`, which must be a state a transition may leave: a
    /// reservation names another waiter than this one, and a waiter in
    /// line has someone ahead of it.
    fn go(&mut self, to: State) {
        match &to {
            State::Reserving { reservation }
            | State::Queued {
                reservation: Some(reservation),
                ..
            } => debug_assert!(
                reservation.behind != self.mark && !reservation.behind.is_empty(),
                "{} reserved behind {:?}",
                self.mark,
                reservation.behind
            ),
            _ => {}
        }
        if let State::Queued { ahead, .. } = &to {
            debug_assert!(*ahead >= 1, "{} queued with nobody ahead", self.mark);
        }
        self.state = Phase(to);
    }

    /// Puts the waiter in `state` as it stands, for the decision tables.
    #[cfg(test)]
    pub(super) fn put(&mut self, state: State) {
        self.state = Phase(state);
    }
}

impl Waiter {
    /// Writes the queue cell (and on the fast path the entry's own cells)
    /// after `after`.
    pub(super) fn arrive(&mut self, after: Duration, fast: bool) -> Action {
        self.go(State::Arriving);
        Action::Arrive { after, fast }
    }

    /// A try looks at `main` before it arrives.
    pub(super) fn peek(&mut self) -> Action {
        self.go(State::Peeking);
        Action::Peek
    }

    /// The place (and any reservation with it) is gone or given up: the
    /// same waiter arrives again, slowly. What it measured of the store and
    /// the line stays, and it counts as having met contention.
    pub(super) fn reenqueue(&mut self, now: Instant) -> Action {
        let fresh = Waiter::new(self.bounds, self.holder_stale_after, &self.me, now);
        *self = Waiter {
            polling: Polling {
                round_trip: self.polling.round_trip,
                pace: self.polling.pace,
                ..fresh.polling
            },
            contended: true,
            mark: self.mark.clone(),
            policy: self.policy,
            goal: self.goal,
            tries_left: self.tries_left,
            ..fresh
        };
        self.arrive(Duration::ZERO, false)
    }

    /// Waits in line `ahead` places back, keeping the reservation my cells
    /// hold, and looks again after `after`.
    pub(super) fn queued(&mut self, ahead: u32, after: Duration) -> Action {
        let reservation = self.reservation().cloned();
        self.go(State::Queued { ahead, reservation });
        self.poll(after)
    }

    /// Second in line: writes my cells reserved behind the waiter ahead
    /// (Q6).
    pub(super) fn reserve(&mut self, reservation: Reservation) -> Action {
        let ahead = reservation.behind.clone();
        self.go(State::Reserving { reservation });
        Action::ReserveBehind { ahead }
    }

    /// First in line: writes my `main` cell after `after`, building on the
    /// checked `shadow` cell if `shadow_checked`.
    pub(super) fn enter(&mut self, shadow_checked: bool, after: Duration) -> Action {
        self.go(State::First);
        Action::Enter {
            shadow_checked,
            after,
        }
    }

    /// My cell waits in `main` beside someone else's; `main` is read again
    /// after `after`.
    pub(super) fn prepare(&mut self, cell: MainCell, after: Duration) -> Action {
        self.go(State::Prepared { cell });
        Action::PollMain { after }
    }

    /// Only reservations beside my cell: asks the queue who stays (Q5).
    pub(super) fn decide_who_stays(&mut self, cell: MainCell) -> Action {
        self.go(State::Deciding { cell });
        Action::AskQueue {
            after: Duration::ZERO,
        }
    }

    /// First, not preparing: watches `main` until it empties, first after
    /// `after`.
    pub(super) fn block(&mut self, shadow_checked: bool, after: Duration) -> Action {
        self.go(State::Blocked { shadow_checked });
        Action::PollMain { after }
    }

    /// Blocked by reservations only: asks the queue whether I still am
    /// first, after `after` (Q5).
    pub(super) fn check_first(&mut self, shadow_checked: bool, after: Duration) -> Action {
        self.go(State::Checking { shadow_checked });
        Action::AskQueue { after }
    }

    /// Removes my `main` cells, then `then`.
    pub(super) fn withdraw(&mut self, then: Then) -> Action {
        let reservation = self.reservation().cloned();
        self.go(State::Withdrawing { then, reservation });
        Action::Withdraw
    }

    /// Withdrawn: no cell, no reservation, no preparation is left; the
    /// queue says where I stand after `after`.
    pub(super) fn withdrawn_unsure(&mut self, after: Duration) -> Action {
        self.cleanup_pending = false;
        self.go(State::Unsure { reservation: None });
        Action::Poll { after }
    }

    /// A write failed in an unknown way and may have left cells: they go
    /// before anything else, and the queue says where I stand after
    /// `after`.
    pub(super) fn unsure(&mut self, after: Duration) -> Action {
        self.cleanup_pending = true;
        let reservation = self.reservation().cloned();
        self.go(State::Unsure { reservation });
        Action::Poll { after }
    }

    /// The lock is mine.
    pub(super) fn acquired(&mut self, marked_reservation: bool) -> Action {
        self.go(State::Holding);
        Action::Acquired { marked_reservation }
    }

    /// Ends without the lock.
    pub(super) fn leave(&mut self, why: Leaving) -> Action {
        self.go(State::Left);
        Action::Leave(why)
    }
}
