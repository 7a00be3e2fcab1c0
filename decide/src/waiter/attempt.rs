//! A try (listing 8, [`Goal::Try`](super::Goal::Try)): the same waiter,
//! taking the lock only if it is free now. It looks at `main` before it
//! arrives, arrives on the fast path, gives up when anyone is ahead in
//! line, and enters `main` at most its attempts' number of times, a head
//! poll apart. Any store error or a lost lease ends it. Exclusion is Q1's,
//! as for a waiting acquisition: the lock is mine only on a read of `main`,
//! made after my write, that shows my cell alone.

use std::time::Duration;

use super::handoff::{Standing, standing};
use super::{Action, Arrived, Entered, Leaving, Observation, State, Then, Waiter};
use crate::cell::Cell;

impl Waiter {
    /// A try's decision after `observation`.
    pub(super) fn on_try(&mut self, observation: Observation) -> Action {
        match observation {
            // A try waits for nothing, a moving home included.
            Observation::Failed | Observation::Fatal | Observation::Moving { .. } => {
                self.leave(Leaving::Failed)
            }
            Observation::Interrupted => self.leave(Leaving::Interrupted),
            Observation::LeaseLost => self.leave(Leaving::LeaseLost),
            // Listing 8 line 1: someone in `main` — busy, without touching
            // the queue.
            Observation::Main { cells, .. } if *self.state == State::Peeking => {
                self.saw_main(&cells);
                if cells.is_empty() {
                    self.arrive(Duration::ZERO, true)
                } else {
                    self.give_up()
                }
            }
            Observation::Arrived(arrived) => self.try_arrived(arrived),
            Observation::Entered(Entered::Read {
                main,
                marked_reservation,
            }) => {
                self.saw_main(&main);
                if standing(&self.me, &self.mark, &main) == Standing::Alone {
                    self.acquired(marked_reservation)
                } else {
                    self.withdraw(Then::Retry)
                }
            }
            Observation::Entered(Entered::Blocked { shadow_checked }) => self.retry(shadow_checked),
            Observation::Withdrawn => self.withdrawn(),
            // A try never waits in line: nothing else is asked of the
            // driver.
            Observation::Main { .. }
            | Observation::Position(_)
            | Observation::ReservedBehind
            | Observation::PlaceBehind { .. } => self.give_up(),
        }
    }

    /// Listing 8 lines 3–13, on the arrival's reads.
    fn try_arrived(&mut self, arrived: Arrived) -> Action {
        let Arrived {
            position,
            main,
            wrote,
        } = arrived;
        if let Some(main) = &main {
            self.saw_main(main);
        }
        let alone = main
            .as_deref()
            .is_some_and(|m| standing(&self.me, &self.mark, m) == Standing::Alone);
        match (position.is_first(), alone, wrote) {
            (true, true, _) => self.acquired(false),
            // Lines 8–10: first, but `main` was busy: what the fast path
            // wrote goes, then another look shortly.
            (true, false, true) => self.withdraw(Then::Retry),
            (true, false, false) => self.attempt(false, Duration::ZERO),
            // Lines 11–13: someone else is ahead.
            (false, _, true) => self.withdraw(Then::GiveUp),
            (false, _, false) => self.give_up(),
        }
    }

    /// Another entry after a head poll, building on the checked `shadow`
    /// cell if `shadow_checked`, while attempts are left.
    pub(super) fn retry(&mut self, shadow_checked: bool) -> Action {
        self.attempt(shadow_checked, self.bounds.head)
    }

    fn attempt(&mut self, shadow_checked: bool, after: Duration) -> Action {
        if self.tries_left == 0 {
            return self.give_up();
        }
        self.tries_left -= 1;
        self.enter(shadow_checked, after)
    }

    /// Busy: names the other owner `main` showed last.
    pub(super) fn give_up(&mut self) -> Action {
        let holder = self.holder_seen.clone();
        self.leave(Leaving::Busy { holder })
    }

    fn saw_main(&mut self, main: &[Cell]) {
        if let Some(other) = main.iter().find(|c| c.column != self.me) {
            self.holder_seen = Some(other.column.clone());
        }
    }
}
