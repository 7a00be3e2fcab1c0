//! What a waiter does on a read of `main`: after writing its own cell
//! there, while it waits beside others, and while blocked; and once its
//! `main` cells are withdrawn.

use std::time::Duration;

use super::handoff::{Standing, only_reservations_in_my_way, others_in, standing};
use super::{Action, Context, Entered, MainCell, State, Then, Waiter};
use crate::cell::Cell;

impl Waiter {
    pub(super) fn entered(&mut self, entered: Entered, cx: &Context) -> Action {
        match entered {
            Entered::Read {
                main,
                marked_reservation,
            } => {
                let cell = MainCell { marked_reservation };
                match standing(&self.me, &self.mark, &main) {
                    Standing::Alone => self.acquired(marked_reservation),
                    Standing::Missing => {
                        // My acknowledged write is not there: someone else
                        // removed it. Start over from the queue.
                        self.cleanup_pending = true;
                        self.withdraw(Then::Poll(Duration::ZERO))
                    }
                    Standing::Wait { .. } | Standing::OnlyReservations
                        if !cx.prepares(self.policy) =>
                    {
                        self.contended = true;
                        let pause = self.blocked_pause(Some(&main), cx);
                        self.withdraw(Then::WaitForMain(pause))
                    }
                    Standing::Wait { .. } => {
                        self.contended = true;
                        self.see(&main, cx.now);
                        let after = self.next_main_poll(Some(&main), cx);
                        self.prepare(cell, after)
                    }
                    Standing::OnlyReservations => {
                        self.contended = true;
                        self.decide_who_stays(cell)
                    }
                }
            }
            Entered::Blocked { shadow_checked } => {
                self.contended = true;
                let after = self.blocked_pause(None, cx);
                self.block(shadow_checked, after)
            }
        }
    }

    pub(super) fn main(&mut self, cells: &[Cell], can_claim: bool, cx: &Context) -> Action {
        let shadow_checked = match *self.state {
            State::Prepared { cell } => return self.main_beside_others(cell, cells, can_claim, cx),
            State::Blocked { shadow_checked } | State::Checking { shadow_checked } => {
                shadow_checked
            }
            _ => false,
        };
        // Blocked: wait for `main` to empty, then enter.
        if cells.iter().any(|c| c.column == self.me) {
            self.cleanup_pending = true;
            return self.withdraw(Then::Enter);
        }
        if !others_in(&self.me, &self.mark, cells) {
            return self.enter(shadow_checked, Duration::ZERO);
        }
        self.see(cells, cx.now);
        let after = self.blocked_pause(Some(cells), cx);
        if only_reservations_in_my_way(&self.me, &self.mark, cells) {
            return self.check_first(shadow_checked, after);
        }
        Action::PollMain { after }
    }

    /// `main` read while my cell waits in it beside others (`Prepared`).
    pub(super) fn main_beside_others(
        &mut self,
        cell: MainCell,
        cells: &[Cell],
        can_claim: bool,
        cx: &Context,
    ) -> Action {
        match standing(&self.me, &self.mark, cells) {
            Standing::Alone if can_claim => self.acquired(cell.marked_reservation),
            // The preparation needs something that no longer holds (the
            // combined lock's `shadow` cell): start over.
            Standing::Alone => self.withdraw(Then::Poll(Duration::ZERO)),
            Standing::Wait { .. } => {
                self.see(cells, cx.now);
                Action::PollMain {
                    after: self.next_main_poll(Some(cells), cx),
                }
            }
            Standing::OnlyReservations => self.decide_who_stays(cell),
            Standing::Missing => {
                self.cleanup_pending = true;
                self.withdraw(Then::Poll(Duration::ZERO))
            }
        }
    }

    /// My `main` cells are withdrawn: what the withdrawal was for follows.
    pub(super) fn withdrawn(&mut self) -> Action {
        self.cleanup_pending = false;
        let State::Withdrawing { then, .. } = *self.state else {
            // Not expected; the queue will say where we stand.
            return self.withdrawn_unsure(Duration::ZERO);
        };
        match then {
            Then::Poll(after) => self.withdrawn_unsure(after),
            Then::Enter => self.enter(false, Duration::ZERO),
            Then::WaitForMain(after) => self.block(false, after),
            Then::Retry => self.retry(false),
            Then::GiveUp => self.give_up(),
        }
    }
}
