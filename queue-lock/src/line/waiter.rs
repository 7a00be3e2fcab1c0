//! The waiter as an explicit state machine: [`Waiter::on`] takes what the
//! driver observed (an [`Observation`] and its [`Context`]) and returns
//! the next [`Action`]; it never sleeps or touches the store, so every
//! decision is tested as a table (`waiter_tests.rs`). The driver
//! ([`super::Line`]) does the I/O each action names and feeds the result
//! back — the shape of quinn-proto's connection state machine.
//!
//! # States
//!
//! ```text
//!            Arrive ──(first, alone)─────────────────────────────▶ Holding
//!              │
//!   Queued ◀───┼──(not first; withdraw what the fast path wrote)
//!     │ ▲ │    │
//!     │ │ └─(second, after a lockshift waiter)──▶ Reserving ─▶ Queued (reserved behind it)
//!     │ │                                            │ (it left the queue: Q6)
//!     │ poll                                         └──────────────────▶ Prepared
//!     ▼        ▼
//!   First ──Enter──(alone)───────────────────────────────────────▶ Holding
//!     │         ├──(someone holds, preparing)──▶ Prepared ──(alone)─▶ Holding
//!     │         │                                  │ ▲
//!     │         │                 (only reservations) ▼ │ (first in line)
//!     │         │                               Deciding ──(not first)──▶ withdraw ▶ Queued
//!     │         └──(not preparing / blocked)──▶ Blocked ──(main empty)──▶ First
//!     │                                               │ ▲ (first)
//!     │                              (only reservations) ▼ │
//!     │                                             Checking ──(not first)──▶ withdraw ▶ Queued
//! ```
//!
//! Each state carries what only it needs: a [`Reservation`] (Q6) lives in
//! `Queued`, `Reserving`, `Withdrawing` and `Unsure`, and every transition
//! between them passes it on; my [`MainCell`] in `Prepared` and `Deciding`;
//! the checked `shadow` cell in `Blocked` and `Checking`. What spans all
//! states stays on the [`Waiter`]: polling memory, a pending cleanup, the
//! waiter declined as the one ahead, and whether anyone contended.
//!
//! Safety lives in two places only: the move to `Holding` happens on a read
//! of `main`, made after this waiter's own `main` write, that shows its cell
//! alone (Q1, [`super::handoff::verdict`]); and a waiter whose cell is
//! reserved behind another moves to `Prepared` — where such reads are made —
//! only on a queue read that found that other waiter's cell gone (Q6).
//! Everything else here — where to wait, how often to look, when to
//! withdraw — is liveness and cost.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use lockshift_lock::Algorithm;
use lockshift_store::{Cell, Timestamp};
use tokio::time::Instant;

use super::entry::{Arrived, Entered};
use super::handoff::{Verdict, only_reservations_in_my_way, others_in, verdict};
use super::poll::{self, Average, Bounds, Inputs};
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

/// Where a waiter stands, with what it knows only there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Writing the queue cell (and, on the fast path, its `main` cell).
    Arriving,
    /// Queued with `ahead` live queue cells ahead of mine; my cells
    /// reserved behind the waiter directly ahead if `reservation` (Q6).
    Queued {
        /// Live cells ahead.
        ahead: u32,
        /// The reservation my cells hold behind the waiter ahead, if any.
        reservation: Option<Reservation>,
    },
    /// Second in line: writing my cells reserved behind the waiter directly
    /// ahead (Q6).
    Reserving {
        /// The reservation being written.
        reservation: Reservation,
    },
    /// First in line, writing `main`.
    First,
    /// My cell waits in `main` beside someone else's: a reservation.
    Prepared {
        /// My `main` cell.
        cell: MainCell,
    },
    /// Only reservations beside mine: asking the queue who stays (Q5).
    Deciding {
        /// My `main` cell.
        cell: MainCell,
    },
    /// First in line, not preparing: watching `main` until it empties.
    Blocked {
        /// The combined lock's `shadow` cell is checked and stands
        /// ([`Entered::Blocked`]): the next entry may build on it.
        shadow_checked: bool,
    },
    /// Blocked, with only reservations in the way: asking the queue whether
    /// I still am first (Q5 for a waiter with no `main` cell of its own: a
    /// waiter that once found itself first never looks at the queue again
    /// while blocked, and reservations — behind someone else, or of a
    /// waiter that is first — wait for the queue, not for `main`).
    Checking {
        /// As in [`State::Blocked`].
        shadow_checked: bool,
    },
    /// Removing my `main` cells, then `then`.
    Withdrawing {
        /// What follows.
        then: Then,
        /// The reservation my cells may still hold (Q6), kept should the
        /// removal fail.
        reservation: Option<Reservation>,
    },
    /// After a store error: the queue will say.
    Unsure {
        /// The reservation my cells may still hold (Q6).
        reservation: Option<Reservation>,
    },
    /// The lock is mine.
    Holding,
}

/// My cells reserved behind another waiter (Q6): its queue cell has not yet
/// been seen gone, so no read of `main` may hand me the lock until it has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reservation {
    /// The mark of the waiter my cells are reserved behind.
    behind: String,
    /// Since when they are.
    since: Instant,
}

/// My `main` cell, written and read back while I wait beside others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MainCell {
    /// The cell is marked a reservation ([`Entered::Read`]), to be re-marked
    /// a holding once the lock is mine.
    marked_reservation: bool,
}

/// What follows a withdrawal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Then {
    /// Look at the queue after this long.
    Poll(Duration),
    /// Enter at once (first in line).
    Enter,
    /// Watch `main` until it empties, first after this long.
    WaitForMain(Duration),
}

/// What the driver does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Sleep `after`, then write the queue cell — beside the entry's own
    /// cells when `fast` — and read the place: [`Observation::Arrived`].
    Arrive {
        /// Wait this long first (after a store error).
        after: Duration,
        /// Take the fast path.
        fast: bool,
    },
    /// Sleep `after`, then read my place: [`Observation::Position`].
    Poll {
        /// How long to sleep first.
        after: Duration,
    },
    /// Write my cells reserved behind `ahead` (a mark), the waiter
    /// directly ahead of me: [`Observation::ReservedBehind`].
    ReserveBehind {
        /// The mark of the waiter ahead (owner id and arrival).
        ahead: String,
    },
    /// Reserved behind another waiter: sleep `after`, then read my place
    /// and what the entry's claim needs besides (Q6):
    /// [`Observation::PlaceBehind`].
    PollBehind {
        /// How long to sleep first.
        after: Duration,
    },
    /// Write my `main` cell and read `main`: [`Observation::Entered`].
    /// `shadow_checked`: what the entry readied on an earlier attempt still
    /// stands (the combined lock's checked `shadow` cell), as it said.
    Enter {
        /// Whether the entry's checked `shadow` cell stands.
        shadow_checked: bool,
    },
    /// Sleep `after`, then read `main`: [`Observation::Main`].
    PollMain {
        /// How long to sleep first.
        after: Duration,
    },
    /// Sleep `after`, then read my place to settle reservations (Q5):
    /// [`Observation::Position`].
    AskQueue {
        /// How long to sleep first.
        after: Duration,
    },
    /// Remove my `main` cells: [`Observation::Withdrawn`].
    Withdraw,
    /// My place is gone (queue cell lost): give it up and arrive again.
    Reenqueue,
    /// The lock is mine. `marked_reservation`: my `main` cell is still
    /// marked a reservation and must be re-marked a holding.
    Acquired {
        /// Whether to re-mark the cell.
        marked_reservation: bool,
    },
}

/// What the driver saw doing the last action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Observation {
    /// After [`Action::Arrive`].
    Arrived(Arrived),
    /// After [`Action::Poll`] or [`Action::AskQueue`].
    Position(Position),
    /// After [`Action::Enter`].
    Entered(Entered),
    /// After [`Action::PollMain`]: `main`, and whether a read showing my
    /// cell alone may hand me the lock now.
    Main {
        /// The cells read.
        cells: Vec<Cell>,
        /// [`super::MainEntry::can_claim`].
        can_claim: bool,
    },
    /// After [`Action::Withdraw`].
    Withdrawn,
    /// After [`Action::ReserveBehind`].
    ReservedBehind,
    /// After [`Action::PollBehind`]: my place, and whether the entry is
    /// ready to claim on reads of `main` ([`super::MainEntry::ready_behind`]).
    PlaceBehind {
        /// Where I stand.
        position: Position,
        /// What the entry's claim needs besides holds.
        ready: bool,
    },
    /// The action failed with a store error worth retrying.
    Failed,
}

/// Everything else the driver knows when it reports an observation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Context {
    /// Now.
    pub(crate) now: Instant,
    /// Now by the clock cells are stamped with (for the age of a cell).
    pub(crate) wall: Timestamp,
    /// How long the action took.
    pub(crate) took: Duration,
    /// Whether the entry prepares hand-offs now ([`super::MainEntry::prepares`]).
    pub(crate) prepares: bool,
    /// Whether the second in line reserves behind the first
    /// ([`super::MainEntry::reserves_behind`]).
    pub(crate) reserves_behind: bool,
    /// The entry's own pause while `main` is taken, drawn for this
    /// observation ([`super::MainEntry::busy_pause`]).
    pub(crate) busy_pause: Option<Duration>,
    /// The pause after a store error, drawn for this observation.
    pub(crate) pause_after_error: Duration,
}

/// One waiter's memory between observations. What belongs to one state
/// lives in that [`State`]; what spans them all is here.
#[derive(Clone, Debug)]
pub(crate) struct Waiter {
    bounds: Bounds,
    /// When a holding cell looks dead (three lease renewal periods).
    holder_stale_after: Duration,
    /// My `main` column (the owner id).
    me: String,
    /// My mark: what a reservation behind me names (Q6).
    mark: String,
    state: State,
    /// A write failed in an unknown way and may have left `main` (or
    /// `shadow`) cells: remove them before anything else. Set on the way
    /// to `Withdrawing` or `Unsure` and cleared once withdrawn.
    cleanup_pending: bool,
    /// The waiter ahead I gave up reserving behind, once the reservation
    /// outlived its bound (Q6): not reserved behind again until the next
    /// arrival, whatever state I pass through.
    declined: Option<String>,
    polling: Polling,
    /// Anyone else was seen in the way since the last arrival.
    contended: bool,
}

/// What the waiter measured and last saw, for how often it looks: memory
/// that spans every state.
#[derive(Clone, Copy, Debug)]
struct Polling {
    /// The store's round trip.
    round_trip: Average,
    /// The line's pace (time per place it moves).
    pace: Average,
    /// What was seen last (a hash of it), and since when.
    scene: Option<u64>,
    since: Instant,
    /// The last distance seen from my turn (live cells ahead), and when,
    /// for the pace.
    last_ahead: Option<(u32, Instant)>,
}

impl Waiter {
    /// A waiter for owner `me` about to arrive; a holding not renewed for
    /// `holder_stale_after` is taken for dead (polled at the ceiling).
    pub(crate) fn new(
        bounds: Bounds,
        holder_stale_after: Duration,
        me: &str,
        now: Instant,
    ) -> Self {
        Waiter {
            bounds,
            holder_stale_after,
            me: me.to_string(),
            mark: me.to_string(),
            state: State::Arriving,
            cleanup_pending: false,
            declined: None,
            polling: Polling {
                round_trip: Average::default(),
                pace: Average::default(),
                scene: None,
                since: now,
                last_ahead: None,
            },
            contended: false,
        }
    }

    /// Starts from the round trip and the pace earlier waiters of the line
    /// measured, not from `head_poll` and nothing.
    pub(crate) fn knowing(mut self, round_trip: Average, pace: Average) -> Self {
        self.polling.round_trip = round_trip;
        self.polling.pace = pace;
        self
    }

    /// The store's round trip as measured so far.
    pub(crate) fn round_trip(&self) -> Average {
        self.polling.round_trip
    }

    /// The line's pace (time per place it moves) as measured so far.
    pub(crate) fn pace(&self) -> Average {
        self.polling.pace
    }

    /// The same waiter arriving again (its place was lost or given up):
    /// what it measured of the store and the line stays, and it counts as
    /// having met contention.
    pub(crate) fn rearrive(&mut self, now: Instant) {
        let fresh = Waiter::new(self.bounds, self.holder_stale_after, &self.me, now);
        *self = Waiter {
            polling: Polling {
                round_trip: self.polling.round_trip,
                pace: self.polling.pace,
                ..fresh.polling
            },
            contended: true,
            mark: self.mark.clone(),
            ..fresh
        };
    }

    /// The owner id (my `main` column) and the mark (what a reservation
    /// behind me names) of the place being taken.
    pub(crate) fn set_place(&mut self, me: &str, mark: &str) {
        me.clone_into(&mut self.me);
        mark.clone_into(&mut self.mark);
    }

    /// Where it stands.
    pub(crate) fn state(&self) -> &State {
        &self.state
    }

    /// Whether anyone else was in the way since it arrived (the line
    /// remembers contended locks to skip the fast path next time).
    pub(crate) fn contended(&self) -> bool {
        self.contended
    }

    /// The decision: what to do after `observation`.
    pub(crate) fn on(&mut self, observation: Observation, cx: &Context) -> Action {
        match observation {
            Observation::Failed => self.failed(cx),
            Observation::Arrived(arrived) => {
                // Two store rounds: the writes, then the reads.
                self.polling.round_trip.note(cx.took / 2);
                self.arrived(arrived, cx)
            }
            Observation::Position(position) => {
                self.polling.round_trip.note(cx.took);
                self.reached_first(&position, cx.now);
                self.position(position, cx)
            }
            Observation::Entered(entered) => self.entered(entered, cx),
            Observation::Main { cells, can_claim } => {
                self.polling.round_trip.note(cx.took);
                self.main(&cells, can_claim, cx)
            }
            Observation::Withdrawn => self.withdrawn(),
            Observation::ReservedBehind => {
                self.polling.round_trip.note(cx.took);
                let reservation = self.reservation().cloned();
                self.state = State::Queued {
                    ahead: 1,
                    reservation,
                };
                let after = self.sleep_before_poll(1, cx);
                self.poll(after)
            }
            Observation::PlaceBehind { position, ready } => {
                self.polling.round_trip.note(cx.took);
                self.reached_first(&position, cx.now);
                match position {
                    // Q6: the waiter I reserved behind left the queue —
                    // after its verifying read, which followed its `main`
                    // write — so every read of `main` from now on shows its
                    // cell while it holds. My cell is a reservation like the
                    // first waiter's.
                    Position::First
                        if self.reservation().is_some() && ready && !self.cleanup_pending =>
                    {
                        self.state = State::Prepared {
                            cell: MainCell {
                                marked_reservation: true,
                            },
                        };
                        Action::PollMain {
                            after: Duration::ZERO,
                        }
                    }
                    other => self.position(other, cx),
                }
            }
        }
    }

    fn arrived(&mut self, arrived: Arrived, cx: &Context) -> Action {
        let Arrived {
            position,
            main,
            wrote,
        } = arrived;
        let alone = main
            .as_deref()
            .is_some_and(|m| verdict(&self.me, &self.mark, m) == Verdict::Alone);
        if main
            .as_deref()
            .is_some_and(|m| others_in(&self.me, &self.mark, m))
        {
            self.contended = true;
        }
        match position {
            Position::Missing => self.reenqueue(),
            // Q1 on the fast path: my `main` write, then a read showing it
            // alone — and first in line, so nobody waiting is overtaken.
            p if p.is_first() && alone => self.acquired(false),
            p if p.is_first() && wrote => self.withdraw(Then::Enter),
            Position::First | Position::FirstPastDead => self.enter(false),
            Position::Behind {
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
                    let reservation = self.reservation().cloned();
                    self.state = State::Queued { ahead, reservation };
                    Action::Poll { after }
                }
            }
        }
    }

    fn position(&mut self, position: Position, cx: &Context) -> Action {
        // Q5: asking the queue who stays — with a reservation (`Deciding`)
        // or blocked with only reservations in the way (`Checking`).
        match self.state {
            State::Deciding { cell } => {
                return match position {
                    Position::Missing => self.reenqueue(),
                    // The first in line keeps its reservation.
                    Position::First | Position::FirstPastDead => {
                        self.state = State::Prepared { cell };
                        let after = self.next_main_poll(None, cx);
                        Action::PollMain { after }
                    }
                    // Not first: withdraw the reservation.
                    Position::Behind { ahead, .. } => {
                        self.moved_to(ahead, cx.now);
                        let after = self.interval(ahead, cx.now);
                        self.withdraw(Then::Poll(after))
                    }
                };
            }
            State::Checking { shadow_checked } => {
                return match position {
                    Position::Missing => self.reenqueue(),
                    // Still first, blocked: the reservations go by their own
                    // rules (Q5, Q6); watch `main` on.
                    Position::First | Position::FirstPastDead => {
                        self.state = State::Blocked { shadow_checked };
                        Action::PollMain {
                            after: Duration::ZERO,
                        }
                    }
                    // Not first: withdraw what was prepared (the combined
                    // lock's `shadow` cell, in the first's way).
                    Position::Behind { ahead, .. } => {
                        self.moved_to(ahead, cx.now);
                        let after = self.interval(ahead, cx.now);
                        self.withdraw(Then::Poll(after))
                    }
                };
            }
            _ => {}
        }
        match position {
            Position::Missing => self.reenqueue(),
            p if p.is_first() && self.cleanup_pending => self.withdraw(Then::Enter),
            // First with no reservation behind anyone; or past dead-looking
            // cells, or with the entry not ready (Q6 does not hold): enter
            // plainly, over my reservation if any — Q1 alone decides.
            Position::First | Position::FirstPastDead => self.enter(false),
            Position::Behind {
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
                // Still second, behind the one I named, and still preparing
                // (a node beside legacy contenders prepares nothing).
                let still_behind = ahead == 1
                    && cx.prepares
                    && cx.reserves_behind
                    && !head.is_empty()
                    && reservation.as_ref().map(|r| r.behind.as_str()) == Some(head.as_str());
                if still_behind && self.reserved_behind_too_long(cx.now) {
                    // The waiter ahead is taking its time: give the
                    // reservation up for good (see the bound's docs).
                    self.declined = reservation.map(|r| r.behind);
                    return self.withdraw(Then::Poll(after));
                }
                if !still_behind {
                    if let Some(reserve) = self.reserve_behind(ahead, &head, head_algorithm, cx) {
                        return reserve;
                    }
                    if reservation.is_some() {
                        // Q2: no longer second behind the one I named.
                        return self.withdraw(Then::Poll(after));
                    }
                }
                self.state = State::Queued { ahead, reservation };
                self.poll(after)
            }
        }
    }

    fn entered(&mut self, entered: Entered, cx: &Context) -> Action {
        match entered {
            Entered::Read {
                main,
                marked_reservation,
            } => {
                let cell = MainCell { marked_reservation };
                match verdict(&self.me, &self.mark, &main) {
                    Verdict::Alone => self.acquired(marked_reservation),
                    Verdict::Missing => {
                        // My acknowledged write is not there: removed behind
                        // my back. Start over from the queue.
                        self.cleanup_pending = true;
                        self.withdraw(Then::Poll(Duration::ZERO))
                    }
                    Verdict::Wait { .. } | Verdict::OnlyReservations if !cx.prepares => {
                        self.contended = true;
                        let pause = self.blocked_pause(Some(&main), cx);
                        self.withdraw(Then::WaitForMain(pause))
                    }
                    Verdict::Wait { .. } => {
                        self.contended = true;
                        self.state = State::Prepared { cell };
                        self.see(&main, cx.now);
                        let after = self.next_main_poll(Some(&main), cx);
                        Action::PollMain { after }
                    }
                    Verdict::OnlyReservations => {
                        self.contended = true;
                        self.state = State::Deciding { cell };
                        Action::AskQueue {
                            after: Duration::ZERO,
                        }
                    }
                }
            }
            Entered::Blocked { shadow_checked } => {
                self.contended = true;
                self.state = State::Blocked { shadow_checked };
                Action::PollMain {
                    after: self.blocked_pause(None, cx),
                }
            }
        }
    }

    fn main(&mut self, cells: &[Cell], can_claim: bool, cx: &Context) -> Action {
        let shadow_checked = match self.state {
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
            return self.enter(shadow_checked);
        }
        self.see(cells, cx.now);
        let after = self.blocked_pause(Some(cells), cx);
        if only_reservations_in_my_way(&self.me, &self.mark, cells) {
            self.state = State::Checking { shadow_checked };
            return Action::AskQueue { after };
        }
        Action::PollMain { after }
    }

    /// `main` read while my cell waits in it beside others (`Prepared`).
    fn main_beside_others(
        &mut self,
        cell: MainCell,
        cells: &[Cell],
        can_claim: bool,
        cx: &Context,
    ) -> Action {
        match verdict(&self.me, &self.mark, cells) {
            Verdict::Alone if can_claim => self.acquired(cell.marked_reservation),
            // The preparation needs something that no longer holds (the
            // combined lock's `shadow` cell): start over.
            Verdict::Alone => self.withdraw(Then::Poll(Duration::ZERO)),
            Verdict::Wait { .. } => {
                self.see(cells, cx.now);
                Action::PollMain {
                    after: self.next_main_poll(Some(cells), cx),
                }
            }
            Verdict::OnlyReservations => {
                self.state = State::Deciding { cell };
                Action::AskQueue {
                    after: Duration::ZERO,
                }
            }
            Verdict::Missing => {
                self.cleanup_pending = true;
                self.withdraw(Then::Poll(Duration::ZERO))
            }
        }
    }

    fn withdrawn(&mut self) -> Action {
        self.cleanup_pending = false;
        // Withdrawn: no reservation, no cell, no preparation is left.
        let State::Withdrawing { then, .. } = self.state else {
            // Not expected; the queue will say where we stand.
            self.state = State::Unsure { reservation: None };
            return Action::Poll {
                after: Duration::ZERO,
            };
        };
        match then {
            Then::Poll(after) => {
                self.state = State::Unsure { reservation: None };
                Action::Poll { after }
            }
            Then::Enter => self.enter(false),
            Then::WaitForMain(after) => {
                self.state = State::Blocked {
                    shadow_checked: false,
                };
                Action::PollMain { after }
            }
        }
    }

    fn failed(&mut self, cx: &Context) -> Action {
        let after = cx.pause_after_error;
        match self.state {
            // The arrival may have left cells: the driver gives the place
            // up (its lease removes them) and arrives again, slowly.
            State::Arriving => Action::Arrive { after, fast: false },
            // A read failed; nothing was written.
            State::Queued { .. } | State::Unsure { .. } => self.poll(after),
            State::Prepared { .. } | State::Blocked { .. } => Action::PollMain { after },
            State::Deciding { .. } | State::Checking { .. } => Action::AskQueue { after },
            // A write may or may not have landed.
            State::First | State::Reserving { .. } | State::Withdrawing { .. } | State::Holding => {
                self.cleanup_pending = true;
                let reservation = self.reservation().cloned();
                self.state = State::Unsure { reservation };
                Action::Poll { after }
            }
        }
    }

    // ===== helpers =====

    /// The reservation my cells hold (or may hold) behind the waiter
    /// ahead, in the states that carry one.
    fn reservation(&self) -> Option<&Reservation> {
        match &self.state {
            State::Reserving { reservation } => Some(reservation),
            State::Queued { reservation, .. }
            | State::Withdrawing { reservation, .. }
            | State::Unsure { reservation } => reservation.as_ref(),
            _ => None,
        }
    }

    /// Writes my `main` cell, building on the checked `shadow` cell if
    /// `shadow_checked`.
    fn enter(&mut self, shadow_checked: bool) -> Action {
        self.state = State::First;
        Action::Enter { shadow_checked }
    }

    fn acquired(&mut self, marked_reservation: bool) -> Action {
        self.state = State::Holding;
        Action::Acquired { marked_reservation }
    }

    fn withdraw(&mut self, then: Then) -> Action {
        let reservation = self.reservation().cloned();
        self.state = State::Withdrawing { then, reservation };
        Action::Withdraw
    }

    /// Second in line, right after a queue or combined waiter (one whose
    /// every path disregards cells naming it), preparing, with nothing left
    /// over: reserve behind it (Q6). `None` otherwise.
    fn reserve_behind(
        &mut self,
        ahead: u32,
        head: &str,
        head_algorithm: Option<Algorithm>,
        cx: &Context,
    ) -> Option<Action> {
        if ahead != 1
            || !cx.reserves_behind
            || !cx.prepares
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
        self.state = State::Reserving {
            reservation: Reservation {
                behind: ahead.clone(),
                since,
            },
        };
        Some(Action::ReserveBehind { ahead })
    }

    /// Whether the reservation behind the current waiter ahead has lasted
    /// past its bound ([`RESERVE_BEHIND_ROUND_TRIPS`]).
    fn reserved_behind_too_long(&self, now: Instant) -> bool {
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
    fn poll(&self, after: Duration) -> Action {
        if self.reservation().is_some() {
            Action::PollBehind { after }
        } else {
            Action::Poll { after }
        }
    }

    fn reenqueue(&mut self) -> Action {
        // The place, and any reservation with it, is given up.
        self.state = State::Arriving;
        Action::Reenqueue
    }

    /// Notes a distance behind others: the pace of the line, and whether
    /// the scene changed.
    fn moved_to(&mut self, ahead: u32, now: Instant) {
        self.note_distance(ahead, now);
        self.scene_is(u64::from(ahead), now);
    }

    /// Notes a distance for the pace of the line: the time since the last
    /// distance was first seen, per place moved.
    fn note_distance(&mut self, ahead: u32, now: Instant) {
        let polling = &mut self.polling;
        if let Some((before, at)) = polling.last_ahead
            && ahead < before
        {
            polling
                .pace
                .note(now.saturating_duration_since(at) / (before - ahead));
        }
        if polling.last_ahead.is_none_or(|(before, _)| before != ahead) {
            polling.last_ahead = Some((ahead, now));
        }
    }

    /// The line's pace counts the move to first too: a waiter that polled
    /// late and found itself first would otherwise never lower a pace that
    /// was too slow — and would keep polling too late to reserve behind
    /// the one ahead (Q6).
    fn reached_first(&mut self, position: &Position, now: Instant) {
        if position.is_first() {
            self.note_distance(0, now);
        }
    }

    /// Notes who else is in `main`.
    fn see(&mut self, cells: &[Cell], now: Instant) {
        let mut h = DefaultHasher::new();
        for c in cells.iter().filter(|c| c.column != self.me) {
            c.column.hash(&mut h);
            c.value.hash(&mut h);
        }
        self.scene_is(h.finish() | 1 << 63, now);
    }

    fn scene_is(&mut self, scene: u64, now: Instant) {
        if self.polling.scene != Some(scene) {
            self.polling.scene = Some(scene);
            self.polling.since = now;
        }
    }

    fn interval(&self, distance: u32, now: Instant) -> Duration {
        poll::interval(
            self.bounds,
            Inputs {
                distance,
                round_trip: self.polling.round_trip,
                pace: self.polling.pace,
                still: now.saturating_duration_since(self.polling.since),
            },
        )
    }

    /// The next poll of `main` by the next waiter: once per round trip while
    /// the line moves, backing off while a hold lasts; a holder that stopped
    /// renewing is dead and its cell goes only with its TTL.
    fn next_main_poll(&self, cells: Option<&[Cell]>, cx: &Context) -> Duration {
        if cells.is_some_and(|c| self.holder_is_stale(c, cx.wall)) {
            return self.bounds.ceiling.max(self.bounds.floor);
        }
        self.sleep_before_poll(1, cx)
    }

    /// The sleep before the next look of a waiter `distance` hand-offs from
    /// its turn, counted from the start of the one that just took `cx.took`.
    fn sleep_before_poll(&self, distance: u32, cx: &Context) -> Duration {
        poll::sleep_before_next(self.interval(distance, cx.now), cx.took, self.bounds.floor)
    }

    /// The pause while blocked: the entry's own pacing if it has one, else
    /// the next waiter's polling.
    fn blocked_pause(&self, cells: Option<&[Cell]>, cx: &Context) -> Duration {
        cx.busy_pause
            .unwrap_or_else(|| self.next_main_poll(cells, cx))
    }

    fn holder_is_stale(&self, cells: &[Cell], wall: Timestamp) -> bool {
        let mut others = cells.iter().filter(|c| c.column != self.me);
        match (others.next(), others.next()) {
            (Some(only), None) => wall.duration_since(only.writetime) > self.holder_stale_after,
            _ => false,
        }
    }
}

#[cfg(test)]
#[path = "waiter_tests.rs"]
mod tests;
