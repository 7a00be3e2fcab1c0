//! What a waiter does on learning its place in the queue: after arriving,
//! after a poll, and when second in line, whether to reserve its cells
//! behind the waiter ahead (Q6) and for how long.

use std::time::{Duration, Instant};

use super::handoff::{Standing, others_in, standing};
use super::{Action, Arrived, Context, Reservation, State, Then, Waiter};
use crate::algorithm::Algorithm;
use crate::queue::Position;

/// How long, in measured round trips, a waiter keeps its cells reserved
/// behind the same waiter ahead (Q6) before it gives that up — and with
/// `head_poll`, at least. A reservation behind pays off when holds are
/// shorter than a few round trips (the waiter ahead takes the lock within
/// about three); past that the plain preparation, made once the waiter
/// ahead holds, hands off as fast. The bound turns any wait the reservation
/// takes part in into a bounded delay: a waiter ahead that does not
/// disregard it (a lockshift build from before Q6, in a rolling upgrade of
/// lockshift itself) waits at most this long.
const RESERVE_BEHIND_ROUND_TRIPS: u32 = 16;

impl Waiter {
    pub(super) fn arrived(&mut self, arrived: Arrived, cx: &Context) -> Action {
        let Arrived {
            position,
            main,
            wrote,
        } = arrived;
        let alone = main
            .as_deref()
            .is_some_and(|m| standing(&self.me, &self.mark, m) == Standing::Alone);
        if main
            .as_deref()
            .is_some_and(|m| others_in(&self.me, &self.mark, m))
        {
            self.contended = true;
        }
        match position {
            Position::Missing => self.reenqueue(cx.now),
            // Q1 on the fast path: my `main` write, then a read showing it
            // alone — and first in line, so nobody waiting is overtaken.
            p if p.is_first() && alone => self.acquired(false),
            p if p.is_first() && wrote => self.withdraw(Then::Enter),
            Position::First | Position::FirstPastDead => self.enter(false, Duration::ZERO),
            Position::Queued {
                ahead,
                head,
                head_algorithm,
            } => {
                self.contended = true;
                self.moved_to(ahead, cx.now);
                let after = self.interval(ahead, cx.now);
                // Second in line: reserve behind the first (Q6) — over
                // what the fast path wrote, if it did.
                if let Some(reserve) = self.reserve_behind(ahead, &head, head_algorithm, cx) {
                    return reserve;
                }
                if wrote {
                    // Q2: a waiter not first keeps no `main` cell.
                    self.withdraw(Then::Poll(after))
                } else {
                    self.queued(ahead, after)
                }
            }
        }
    }

    pub(super) fn position(&mut self, position: Position, cx: &Context) -> Action {
        // Q5: asking the queue who stays — with a reservation (`Deciding`)
        // or blocked with only reservations in the way (`Checking`).
        let position = match self.settle_reservations(position, cx) {
            Ok(action) => return action,
            Err(position) => position,
        };
        match position {
            Position::Missing => self.reenqueue(cx.now),
            p if p.is_first() && self.cleanup_pending => self.withdraw(Then::Enter),
            // First with no reservation behind anyone; or past dead-looking
            // cells, or with the entry not ready (Q6 does not hold): enter
            // plainly, over my reservation if any — Q1 alone decides.
            Position::First | Position::FirstPastDead => self.enter(false, Duration::ZERO),
            Position::Queued {
                ahead,
                head,
                head_algorithm,
            } => {
                self.contended = true;
                self.moved_to(ahead, cx.now);
                let after = self.sleep_before_poll(ahead, cx);
                if self.cleanup_pending {
                    // Q2: leftovers of a failed step go before waiting on.
                    return self.withdraw(Then::Poll(after));
                }
                let reservation = self.reservation().cloned();
                // Still second, after the one I named, and still preparing
                // (a node beside legacy contenders prepares nothing).
                let still_second = ahead == 1
                    && cx.prepares(self.policy)
                    && !head.is_empty()
                    && reservation.as_ref().map(|r| r.behind.as_str()) == Some(head.as_str());
                if still_second && self.reserved_behind_too_long(cx.now) {
                    // The waiter ahead is taking its time: give the
                    // reservation up for good (see the bound's docs).
                    self.declined = reservation.map(|r| r.behind);
                    return self.withdraw(Then::Poll(after));
                }
                if !still_second {
                    if let Some(reserve) = self.reserve_behind(ahead, &head, head_algorithm, cx) {
                        return reserve;
                    }
                    if reservation.is_some() {
                        // Q2: no longer second, after the one I named.
                        return self.withdraw(Then::Poll(after));
                    }
                }
                self.queued(ahead, after)
            }
        }
    }

    /// Q5's answer, while `Deciding` or `Checking`: the action, or (in any
    /// other state) the position back to be handled plainly.
    fn settle_reservations(
        &mut self,
        position: Position,
        cx: &Context,
    ) -> Result<Action, Position> {
        match *self.state {
            State::Deciding { cell } => Ok(match position {
                Position::Missing => self.reenqueue(cx.now),
                // The first in line keeps its reservation.
                Position::First | Position::FirstPastDead => {
                    let after = self.next_main_poll(None, cx);
                    self.prepare(cell, after)
                }
                // Not first: withdraw the reservation.
                Position::Queued { ahead, .. } => {
                    self.moved_to(ahead, cx.now);
                    let after = self.interval(ahead, cx.now);
                    self.withdraw(Then::Poll(after))
                }
            }),
            State::Checking { shadow_checked } => Ok(match position {
                Position::Missing => self.reenqueue(cx.now),
                // Still first, blocked: the reservations go by their own
                // rules (Q5, Q6); watch `main` on.
                Position::First | Position::FirstPastDead => {
                    self.block(shadow_checked, Duration::ZERO)
                }
                // Not first: withdraw what was prepared (the combined
                // lock's `shadow` cell, in the first's way).
                Position::Queued { ahead, .. } => {
                    self.moved_to(ahead, cx.now);
                    let after = self.interval(ahead, cx.now);
                    self.withdraw(Then::Poll(after))
                }
            }),
            _ => Err(position),
        }
    }

    /// Second in line, right after a queue or combined waiter (one whose
    /// every path disregards cells naming it), preparing, with nothing left
    /// over: reserve behind it (Q6). `None` otherwise.
    pub(super) fn reserve_behind(
        &mut self,
        ahead: u32,
        head: &str,
        head_algorithm: Option<Algorithm>,
        cx: &Context,
    ) -> Option<Action> {
        if ahead != 1
            || !cx.prepares(self.policy)
            || self.cleanup_pending
            || !matches!(head_algorithm, Some(Algorithm::Queue | Algorithm::Combined))
        {
            return None;
        }
        if head.is_empty() {
            return None;
        }
        let ahead = head.to_string();
        if self.declined.as_ref() == Some(&ahead) {
            return None;
        }
        let since = match self.reservation() {
            Some(r) if r.behind == ahead => r.since,
            _ => cx.now,
        };
        Some(self.reserve(Reservation {
            behind: ahead,
            since,
        }))
    }

    /// Whether the reservation behind the current waiter ahead has lasted
    /// past its bound ([`RESERVE_BEHIND_ROUND_TRIPS`]).
    pub(super) fn reserved_behind_too_long(&self, now: Instant) -> bool {
        let Some(reservation) = self.reservation() else {
            return false;
        };
        let round_trip = self.polling.round_trip.get().unwrap_or(self.bounds.head);
        let bound = round_trip
            .saturating_mul(RESERVE_BEHIND_ROUND_TRIPS)
            .max(self.bounds.head);
        now.saturating_duration_since(reservation.since) > bound
    }

    /// Look at the queue after `after` — with what the entry's claim needs,
    /// when reserved behind someone.
    pub(super) fn poll(&self, after: Duration) -> Action {
        if self.reservation().is_some() {
            Action::PollBehind { after }
        } else {
            Action::Poll { after }
        }
    }
}
