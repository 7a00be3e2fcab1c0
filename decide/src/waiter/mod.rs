//! The queue waiter as an explicit state machine: [`Waiter::on`] takes
//! what the driver observed (an [`Observation`] and its [`Context`]) and
//! returns the next [`Action`]; it never sleeps or touches the store, so
//! every decision is tested as a table (`tests.rs`). The driver (the queue
//! lock's waiting line, shared with the combined lock) does the I/O each
//! action names and feeds the result back — the shape of quinn-proto's
//! connection state machine.
//!
//! The same machine runs every acquisition, whatever its [`Goal`]: a
//! waiting one (listing 7) and a try (listing 8, [`Goal::Try`]) differ in
//! a few transitions (`attempt.rs`), and a lost lease, a store error, an
//! interruption and giving up are observations and transitions like any
//! other. Every state change is one of the named transitions in
//! `transitions.rs`; nothing else assigns a state. What differs between
//! the queue lock's and the combined lock's entries into `main` is a value,
//! their [`Policy`].
//!
//! Beside the state machine: [`poll_policy`], how often a waiter looks
//! (the intervals, pure arithmetic; `poll_memory.rs` holds what the waiter
//! remembers to feed them), and [`handoff`], where a read of `main` shows
//! my cell standing (Q1) and what reservations mean (Q5, Q6); [`Arrived`]
//! and [`Entered`] are what the driver's entry into `main` reports.
//!
//! # States
//!
//! ```text
//!   (try) Peeking ──(main empty)──▶ Arriving      any state ──▶ Left (Leave: busy, lost, failed, interrupted)
//!          Arriving ──(first, alone)─────────────────────────────▶ Holding
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
//! alone (Q1, [`handoff::standing`]); and a waiter whose cell is
//! reserved behind another moves to `Prepared` — where such reads are made —
//! only on a queue read that found that other waiter's cell gone (Q6).
//! Everything else here — where to wait, how often to look, when to
//! withdraw — is liveness and cost.

use std::time::{Duration, Instant};

use crate::binding::Pacing;
use crate::cell::{Cell, Timestamp};
use crate::queue::Position;
use poll_policy::{Average, Bounds};
use transitions::Phase;

mod attempt;
mod entry;
mod goal;
pub mod handoff;
mod main;
mod poll_memory;
pub mod poll_policy;
mod queue;
mod transitions;

/// What the driver's entry into `main` reports: an arrival and one attempt
/// at `main`.
pub use entry::{Arrived, Entered};
pub use goal::{Goal, Leaving, Policy};

/// Where a waiter stands, with what it knows only there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// A try, before it arrives: reading `main` (listing 8 line 1).
    Peeking,
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
    /// The acquisition ended without the lock.
    Left,
}

/// My cells reserved behind another waiter (Q6): its queue cell has not yet
/// been seen gone, so no read of `main` may hand me the lock until it has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// The mark of the waiter my cells are reserved behind.
    behind: String,
    /// Since when they are.
    since: Instant,
}

/// My `main` cell, written and read back while I wait beside others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MainCell {
    /// The cell is marked a reservation ([`Entered::Read`]), to be re-marked
    /// a holding once the lock is mine.
    marked_reservation: bool,
}

/// What follows a withdrawal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// Look at the queue after this long.
    Poll(Duration),
    /// Enter at once (first in line).
    Enter,
    /// Watch `main` until it empties, first after this long.
    WaitForMain(Duration),
    /// A try: enter again after a head poll, if attempts are left.
    Retry,
    /// A try: give up, the lock is busy.
    GiveUp,
}

/// What the driver does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
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
    /// A try, before arriving: read `main` ([`Observation::Main`]).
    Peek,
    /// Sleep `after`, then write my `main` cell and read `main`:
    /// [`Observation::Entered`]. `shadow_checked`: what the entry readied
    /// on an earlier attempt still stands (the combined lock's checked
    /// `shadow` cell), as it said.
    Enter {
        /// Whether the entry's checked `shadow` cell stands.
        shadow_checked: bool,
        /// How long to sleep first (a try's next attempt).
        after: Duration,
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
    /// The lock is mine, if the lease is still proven (else
    /// [`Observation::LeaseLost`]). `marked_reservation`: my `main` cell is
    /// still marked a reservation and must be re-marked a holding.
    Acquired {
        /// Whether to re-mark the cell.
        marked_reservation: bool,
    },
    /// Give the place up (its lease deletes its cells) and end without the
    /// lock.
    Leave(Leaving),
}

impl Action {
    /// How long the driver sleeps before the action's I/O.
    pub fn pause(&self) -> Duration {
        match self {
            Action::Arrive { after, .. }
            | Action::Poll { after }
            | Action::PollBehind { after }
            | Action::Enter { after, .. }
            | Action::PollMain { after }
            | Action::AskQueue { after } => *after,
            Action::Peek
            | Action::ReserveBehind { .. }
            | Action::Withdraw
            | Action::Acquired { .. }
            | Action::Leave(_) => Duration::ZERO,
        }
    }
}

/// What the driver saw doing the last action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
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
        /// What the entry's `can_claim` says.
        can_claim: bool,
    },
    /// After [`Action::Withdraw`].
    Withdrawn,
    /// After [`Action::ReserveBehind`].
    ReservedBehind,
    /// After [`Action::PollBehind`]: my place, and whether the entry is
    /// ready to claim on reads of `main` (the entry's `ready_behind`).
    PlaceBehind {
        /// Where I stand.
        position: Position,
        /// What the entry's claim needs besides holds.
        ready: bool,
    },
    /// The action failed with a store error worth retrying.
    Failed,
    /// The action was refused without being sent: the lock's home moves
    /// to another datacenter, which serves in `serves_in` (docs/design.md
    /// §4a, H3). Nothing was read or written, and trying again sooner is
    /// refused the same way.
    Moving {
        /// How long until the new home serves.
        serves_in: Duration,
    },
    /// The action failed with a store error not worth retrying.
    Fatal,
    /// The lease is lost (a cell gone, renewals overdue: Q3), seen before
    /// an action or when the lock was to be handed out.
    LeaseLost,
    /// The deadline passed, the caller cancelled, or the binding was
    /// invalidated.
    Interrupted,
}

/// Everything else the driver knows when it reports an observation.
#[derive(Clone, Copy, Debug)]
pub struct Context {
    /// Now.
    pub now: Instant,
    /// Now by the clock cells are stamped with (for the age of a cell).
    pub wall: Timestamp,
    /// How long the action took.
    pub took: Duration,
    /// How the acquisition paces itself now (its binding's pacing).
    pub pacing: Pacing,
    /// A uniform draw in `[0, 1)` for this observation (the entry's pause
    /// while `main` is taken: [`Policy::busy_pause`]).
    pub draw: f64,
    /// The pause after a store error, drawn for this observation.
    pub pause_after_error: Duration,
}

impl Context {
    fn prepares(&self, policy: Policy) -> bool {
        policy.prepares(self.pacing)
    }
}

/// One waiter's memory between observations. What belongs to one state
/// lives in that [`State`]; what spans them all is here.
#[derive(Clone, Debug)]
pub struct Waiter {
    bounds: Bounds,
    policy: Policy,
    goal: Goal,
    /// A try's entries into `main` left.
    tries_left: u32,
    /// The other owner the last read of `main` showed (a try names it).
    holder_seen: Option<String>,
    /// When a holding cell looks dead (three lease renewal periods).
    holder_stale_after: Duration,
    /// My `main` column (the owner id).
    me: String,
    /// My mark: what a reservation behind me names (Q6).
    mark: String,
    state: Phase,
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
    pub fn new(bounds: Bounds, holder_stale_after: Duration, me: &str, now: Instant) -> Self {
        Waiter {
            bounds,
            policy: Policy::QUEUE,
            goal: Goal::Wait,
            tries_left: 0,
            holder_seen: None,
            holder_stale_after,
            me: me.to_string(),
            mark: me.to_string(),
            state: Phase::START,
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

    /// Enters `main` as `policy` says, after `goal`.
    pub fn with(mut self, policy: Policy, goal: Goal) -> Self {
        self.policy = policy;
        self.goal = goal;
        if let Goal::Try { attempts } = goal {
            self.tries_left = attempts;
        }
        self
    }

    /// Starts from the round trip and the pace earlier waiters of the line
    /// measured, not from `head_poll` and nothing.
    pub fn knowing(mut self, round_trip: Average, pace: Average) -> Self {
        self.polling.round_trip = round_trip;
        self.polling.pace = pace;
        self
    }

    /// The store's round trip as measured so far.
    pub fn round_trip(&self) -> Average {
        self.polling.round_trip
    }

    /// The line's pace (time per place it moves) as measured so far.
    pub fn pace(&self) -> Average {
        self.polling.pace
    }

    /// The owner id (my `main` column) and the mark (what a reservation
    /// behind me names) of the place being taken.
    pub fn set_place(&mut self, me: &str, mark: &str) {
        me.clone_into(&mut self.me);
        mark.clone_into(&mut self.mark);
    }

    /// Where it stands.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Whether anyone else was in the way since it arrived (the line
    /// remembers contended locks to skip the fast path next time).
    pub fn contended(&self) -> bool {
        self.contended
    }

    /// The first action: a waiting acquisition arrives — on the fast path
    /// if `fast` (the line found the lock uncontended lately) — and a try
    /// first looks at `main`.
    pub fn start(&mut self, fast: bool) -> Action {
        match self.goal {
            Goal::Wait => self.arrive(Duration::ZERO, fast),
            Goal::Try { .. } => self.peek(),
        }
    }

    /// The decision: what to do after `observation`.
    pub fn on(&mut self, observation: Observation, cx: &Context) -> Action {
        if let Goal::Try { .. } = self.goal {
            return self.on_try(observation);
        }
        match observation {
            Observation::Failed => self.failed(cx.pause_after_error),
            // Wait for the new home — plus the drawn pause, so the waiters
            // a move held back do not all come back in one instant — in
            // place: what a failure would do next, that much later.
            Observation::Moving { serves_in } => {
                self.failed(serves_in.saturating_add(cx.pause_after_error))
            }
            Observation::Fatal => self.leave(Leaving::Failed),
            Observation::Interrupted => self.leave(Leaving::Interrupted),
            // Q3: a waiter whose lease is lost gives its place up and
            // arrives again.
            Observation::LeaseLost => self.reenqueue(cx.now),
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
                let after = self.sleep_before_poll(1, cx);
                self.queued(1, after)
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
                        self.prepare(
                            MainCell {
                                marked_reservation: true,
                            },
                            Duration::ZERO,
                        )
                    }
                    other => self.position(other, cx),
                }
            }
        }
    }

    /// After a store error: what failed is tried again after `after`.
    fn failed(&mut self, after: Duration) -> Action {
        match *self.state {
            // The arrival may have left cells: the driver gives the place
            // up (its lease removes them) and arrives again, slowly.
            State::Arriving => self.arrive(after, false),
            // A read failed; nothing was written.
            State::Queued { .. } | State::Unsure { .. } | State::Peeking => self.poll(after),
            State::Prepared { .. } | State::Blocked { .. } => Action::PollMain { after },
            State::Deciding { .. } | State::Checking { .. } => Action::AskQueue { after },
            // A write may or may not have landed.
            State::First
            | State::Reserving { .. }
            | State::Withdrawing { .. }
            | State::Holding
            | State::Left => self.unsure(after),
        }
    }

    /// The reservation my cells hold (or may hold) behind the waiter
    /// ahead, in the states that carry one.
    fn reservation(&self) -> Option<&Reservation> {
        match &*self.state {
            State::Reserving { reservation } => Some(reservation),
            State::Queued { reservation, .. }
            | State::Withdrawing { reservation, .. }
            | State::Unsure { reservation } => reservation.as_ref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
