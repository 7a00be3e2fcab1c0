//! The waiter's decisions as a table: state before, observation, the
//! action and the state after. Each case prints its index on failure.

use crate::algorithm::Algorithm;
use crate::cells::{RESERVED_VALUE, reserved_behind};

use super::*;

const MS: Duration = Duration::from_millis(1);
const ME: &str = "me/01";

fn bounds() -> Bounds {
    Bounds {
        floor: Duration::from_micros(200),
        head: MS * 10,
        ceiling: MS * 250,
    }
}

fn cell(column: &str, value: &[u8], writetime_s: i64) -> Cell {
    Cell {
        column: column.to_string(),
        value: value.to_vec(),
        writetime: Timestamp::from_micros(writetime_s * 1_000_000),
        ttl: None,
    }
}

fn mine() -> Cell {
    cell(ME, RESERVED_VALUE, 99)
}
fn holder() -> Cell {
    cell("h/01", b"queue", 99)
}
fn dead_holder() -> Cell {
    cell("h/01", b"queue", 10)
}
fn reservation() -> Cell {
    cell("w/01", RESERVED_VALUE, 99)
}

fn in_line(ahead: u32) -> Position {
    in_line_with_head(ahead, "h/01@00000000000000000001", Algorithm::Queue)
}

/// In line after `ahead` live cells, the head's queue cell not
/// lockshift's (no algorithm in its value): nobody reserves behind it.
fn in_line_behind_foreign(ahead: u32) -> Position {
    Position::Queued {
        ahead,
        head: "h/01@00000000000000000001".into(),
        head_algorithm: None,
    }
}

fn in_line_with_head(ahead: u32, head: &str, algorithm: Algorithm) -> Position {
    Position::Queued {
        ahead,
        head: head.into(),
        head_algorithm: Some(algorithm),
    }
}

/// A read took 2 ms (the measured round trip becomes 2 ms; an arrival, two
/// rounds, measures 1 ms), it is second
/// 100 by the wall clock, full speed (the entry prepares), a draw of one
/// half.
fn cx(now: Instant) -> Context {
    Context {
        now,
        wall: Timestamp::from_micros(100_000_000),
        took: MS * 2,
        pacing: Pacing::FullSpeed,
        draw: 0.5,
        pause_after_error: MS * 30,
    }
}

/// The tables' entry: the combined lock's, which yields to legacy
/// contenders when paced beside them.
const POLICY: Policy = Policy::COMBINED;

/// A waiter for the tables, entering as `policy` says.
fn waiter(policy: Policy, start: Instant) -> Waiter {
    Waiter::new(bounds(), Duration::from_secs(30), ME, start).with(policy, Goal::Wait)
}

/// Beside legacy contenders who pause up to 1.4 s: with the draw of one
/// half, the entry pauses 700 ms.
fn beside_legacy_pace(c: &mut Context) {
    c.pacing = Pacing::BesideLegacy {
        owner_wait_max: MS * 1400,
    };
}

struct Case {
    state: State,
    cleanup_pending: bool,
    observation: Observation,
    /// Changes to the context.
    tweak: fn(&mut Context),
    action: Action,
    after: State,
}

fn no_tweak(_: &mut Context) {}

fn case(state: State, observation: Observation, action: Action, after: State) -> Case {
    Case {
        state,
        cleanup_pending: false,
        observation,
        tweak: no_tweak,
        action,
        after,
    }
}

fn arrived(position: Position, main: Option<Vec<Cell>>, wrote: bool) -> Observation {
    Observation::Arrived(Arrived {
        position,
        main,
        wrote,
    })
}

fn read(main: Vec<Cell>, marked_reservation: bool) -> Observation {
    Observation::Entered(Entered::Read {
        main,
        marked_reservation,
    })
}

fn main_obs(cells: Vec<Cell>, can_claim: bool) -> Observation {
    Observation::Main { cells, can_claim }
}

fn moving(s: u64) -> Observation {
    Observation::Moving {
        serves_in: Duration::from_secs(s),
    }
}

fn poll(ms: u32) -> Action {
    Action::Poll { after: MS * ms }
}

fn poll_main(ms: u32) -> Action {
    Action::PollMain { after: MS * ms }
}

fn withdrawing(then: Then) -> State {
    State::Withdrawing {
        then,
        reservation: None,
    }
}

fn queued(ahead: u32) -> State {
    State::Queued {
        ahead,
        reservation: None,
    }
}

fn unsure() -> State {
    State::Unsure { reservation: None }
}

/// `Reserving`; the Q6 table names the waiter ahead in a column of its own
/// ([`reserved_behind_in`]).
fn reserving() -> State {
    State::Reserving {
        reservation: Reservation {
            behind: String::new(),
            since: Instant::now(),
        },
    }
}

fn prepared(marked_reservation: bool) -> State {
    State::Prepared {
        cell: MainCell { marked_reservation },
    }
}

fn deciding(marked_reservation: bool) -> State {
    State::Deciding {
        cell: MainCell { marked_reservation },
    }
}

fn blocked() -> State {
    State::Blocked {
        shadow_checked: false,
    }
}

fn checking() -> State {
    State::Checking {
        shadow_checked: false,
    }
}

/// `state` with my cells reserved behind `behind` since `at`, in the states
/// that carry a reservation.
fn reserved_behind_in(state: State, behind: Option<String>, at: Instant) -> State {
    let reservation = behind.map(|behind| Reservation { behind, since: at });
    match state {
        State::Queued { ahead, .. } => State::Queued { ahead, reservation },
        State::Reserving { .. } => State::Reserving {
            reservation: reservation.expect("Reserving names the waiter ahead"),
        },
        State::Withdrawing { then, .. } => State::Withdrawing { then, reservation },
        State::Unsure { .. } => State::Unsure { reservation },
        other => other,
    }
}

/// Whether my `main` cell is marked a reservation, in the states that
/// carry it.
fn marked_reservation(state: &State) -> bool {
    matches!(
        state,
        State::Prepared {
            cell: MainCell {
                marked_reservation: true
            }
        } | State::Deciding {
            cell: MainCell {
                marked_reservation: true
            }
        }
    )
}

#[test]
fn decisions() {
    use Action::*;
    let zero = Duration::ZERO;
    #[rustfmt::skip]
    let cases = vec![
        // ===== arrival =====
        // Fast path, first and alone: Q1 holds — the lock is mine, no re-mark.
        case(State::Arriving, arrived(Position::First, Some(vec![cell(ME, b"queue", 99)]), true),
             Acquired { marked_reservation: false }, State::Holding),
        // Alone in `main` but not first, behind a head that would not
        // disregard a reservation (its queue cell is not lockshift's): a
        // waiter is overtaken otherwise (Q2). The arrival (2 ms, two store
        // rounds) measured a 1 ms round trip: one place back, the next look
        // comes one round trip later. (Behind a lockshift head it reserves
        // over the cell instead: the Q6 table below.)
        case(State::Arriving, arrived(in_line_behind_foreign(1), Some(vec![cell(ME, b"queue", 99)]), true),
             Withdraw, withdrawing(Then::Poll(MS))),
        // First, but someone in `main`: withdraw the fast-path cell, then enter properly.
        case(State::Arriving, arrived(Position::First, Some(vec![holder(), cell(ME, b"queue", 99)]), true),
             Withdraw, withdrawing(Then::Enter)),
        // The slow path: nothing written beside the queue cell.
        case(State::Arriving, arrived(in_line(2), None, false), poll(2), queued(2)),
        case(State::Arriving, arrived(Position::First, None, false), Enter { shadow_checked: false, after: Duration::ZERO }, State::First),
        case(State::Arriving, arrived(Position::Missing, None, false), Arrive { after: Duration::ZERO, fast: false }, State::Arriving),
        // ===== queued =====
        // One round trip per place: 2 places × 2 ms, minus the 2 ms the read took.
        case(queued(3), Observation::Position(in_line(2)), poll(2), queued(2)),
        // Next after the head (it is taking the lock), which would not
        // disregard a reservation: once per round trip, back to back.
        case(queued(2), Observation::Position(in_line_behind_foreign(1)), Poll { after: zero }, queued(1)),
        case(queued(1), Observation::Position(Position::First), Enter { shadow_checked: false, after: Duration::ZERO }, State::First),
        case(queued(1), Observation::Position(Position::Missing), Arrive { after: Duration::ZERO, fast: false }, State::Arriving),
        // ===== entering =====
        case(State::First, read(vec![mine()], true), Acquired { marked_reservation: true }, State::Holding),
        // Someone holds: my cell stays as a reservation; watch `main` every
        // round trip (none measured yet: head_poll, less the 2 ms the entry took).
        case(State::First, read(vec![holder(), mine()], true), poll_main(8), prepared(true)),
        // Only reservations besides mine: the queue decides (Q5).
        case(State::First, read(vec![mine(), reservation()], true), AskQueue { after: zero }, deciding(true)),
        // My acknowledged write is gone: someone else removed it.
        case(State::First, read(vec![holder()], true), Withdraw, withdrawing(Then::Poll(zero))),
        case(State::First, Observation::Entered(Entered::Blocked { shadow_checked: false }), poll_main(8), blocked()),
        // ===== prepared =====
        case(prepared(true), main_obs(vec![mine()], true), Acquired { marked_reservation: true }, State::Holding),
        // The combined lock's shadow cell did not live throughout: start over.
        case(prepared(true), main_obs(vec![mine()], false), Withdraw, withdrawing(Then::Poll(zero))),
        case(prepared(true), main_obs(vec![holder(), mine()], true), PollMain { after: zero }, prepared(true)),
        // A holder that stopped renewing is dead: its cell goes with its TTL.
        case(prepared(true), main_obs(vec![dead_holder(), mine()], true), poll_main(250), prepared(true)),
        case(prepared(true), main_obs(vec![reservation(), mine()], true), AskQueue { after: zero }, deciding(true)),
        case(prepared(true), main_obs(vec![holder()], true), Withdraw, withdrawing(Then::Poll(zero))),
        // ===== deciding (Q5) =====
        case(deciding(false), Observation::Position(Position::First), PollMain { after: zero }, prepared(false)),
        case(deciding(false), Observation::Position(in_line(1)), Withdraw, withdrawing(Then::Poll(MS * 2))),
        case(deciding(false), Observation::Position(Position::Missing), Arrive { after: Duration::ZERO, fast: false }, State::Arriving),
        // ===== blocked =====
        case(blocked(), main_obs(vec![], true), Enter { shadow_checked: false, after: Duration::ZERO }, State::First),
        case(blocked(), main_obs(vec![holder()], true), PollMain { after: zero }, blocked()),
        case(blocked(), main_obs(vec![mine(), holder()], true), Withdraw, withdrawing(Then::Enter)),
        // Only reservations in the way: am I still first? (Q5)
        case(blocked(), main_obs(vec![reservation()], true), AskQueue { after: zero }, checking()),
        case(blocked(), main_obs(vec![cell("w/02", &reserved_behind(Algorithm::Combined, "h/01@00000000000000000001"), 99)], true),
             AskQueue { after: zero }, checking()),
        // ... but a cell reserved behind me is not in my way: enter.
        case(blocked(), main_obs(vec![cell("w/02", &reserved_behind(Algorithm::Combined, ME), 99)], true),
             Enter { shadow_checked: false, after: Duration::ZERO }, State::First),
        case(checking(), Observation::Position(Position::First), PollMain { after: zero }, blocked()),
        // Not first any more: what I prepared is in the way of the first.
        case(checking(), Observation::Position(in_line(1)), Withdraw, withdrawing(Then::Poll(MS * 2))),
        case(checking(), Observation::Position(Position::Missing), Arrive { after: Duration::ZERO, fast: false }, State::Arriving),
        case(checking(), Observation::Failed, AskQueue { after: MS * 30 }, checking()),
        // ===== withdrawing =====
        case(withdrawing(Then::Enter), Observation::Withdrawn, Enter { shadow_checked: false, after: Duration::ZERO }, State::First),
        case(withdrawing(Then::Poll(MS * 7)), Observation::Withdrawn, poll(7), unsure()),
        case(withdrawing(Then::WaitForMain(MS * 9)), Observation::Withdrawn, poll_main(9), blocked()),
        // ===== store errors =====
        case(State::Arriving, Observation::Failed, Arrive { after: MS * 30, fast: false }, State::Arriving),
        case(queued(2), Observation::Failed, poll(30), queued(2)),
        case(prepared(true), Observation::Failed, poll_main(30), prepared(true)),
        case(deciding(false), Observation::Failed, AskQueue { after: MS * 30 }, deciding(false)),
        // A write may have landed: unsure, with a cleanup pending.
        case(State::First, Observation::Failed, poll(30), unsure()),
        // ===== refused: the home moves (issue 42 item 3) =====
        // Nothing was sent: the same step, once the new home serves (57 s)
        // and a drawn pause later — not every pause after an error.
        case(State::Arriving, moving(57), Arrive { after: MS * 57_030, fast: false }, State::Arriving),
        case(queued(2), moving(57), poll(57_030), queued(2)),
        case(prepared(true), moving(57), poll_main(57_030), prepared(true)),
        case(checking(), moving(57), AskQueue { after: MS * 57_030 }, checking()),
        case(State::First, moving(57), poll(57_030), unsure()),
        // A new home that serves now: the drawn pause only.
        case(State::Arriving, moving(0), Arrive { after: MS * 30, fast: false }, State::Arriving),
    ];
    let start = Instant::now();
    for (i, c) in cases.into_iter().enumerate() {
        let mut context = cx(start);
        (c.tweak)(&mut context);
        let mut w = waiter(POLICY, start);
        w.put(c.state);
        w.cleanup_pending = c.cleanup_pending;
        let action = w.on(c.observation, &context);
        assert_eq!(
            (action, w.state().clone()),
            (c.action, c.after),
            "case #{i}"
        );
    }
}

#[test]
fn entries_that_do_not_prepare_withdraw_and_pace_themselves() {
    let start = Instant::now();
    let legacy_pace = |c: &mut Context| beside_legacy_pace(c);
    #[rustfmt::skip]
    let cases = vec![
        Case { tweak: legacy_pace, ..case(State::First, read(vec![holder(), mine()], false),
               Action::Withdraw, withdrawing(Then::WaitForMain(MS * 700))) },
        Case { tweak: legacy_pace, ..case(State::First, Observation::Entered(Entered::Blocked { shadow_checked: false }),
               poll_main(700), blocked()) },
        Case { tweak: legacy_pace, ..case(blocked(), main_obs(vec![holder()], true),
               poll_main(700), blocked()) },
        // Leftovers to clean up go before entering, and before waiting in line.
        Case { cleanup_pending: true, ..case(unsure(), Observation::Position(Position::First),
               Action::Withdraw, withdrawing(Then::Enter)) },
        Case { cleanup_pending: true, ..case(unsure(), Observation::Position(in_line(2)),
               Action::Withdraw, withdrawing(Then::Poll(MS * 2))) },
    ];
    for (i, c) in cases.into_iter().enumerate() {
        let mut context = cx(start);
        (c.tweak)(&mut context);
        let mut w = waiter(POLICY, start);
        w.put(c.state);
        w.cleanup_pending = c.cleanup_pending;
        let action = w.on(c.observation, &context);
        assert_eq!(
            (action, w.state().clone()),
            (c.action, c.after),
            "case #{i}"
        );
    }
}

/// While a hold lasts, the next waiter backs off: the same scene seen for
/// longer makes it look less often, bounded by the ceiling; a new scene
/// (the line moved) brings it back to once per round trip.
#[test]
fn the_next_waiter_backs_off_during_a_hold_and_recovers_when_the_line_moves() {
    let start = Instant::now();
    let mut w = waiter(POLICY, start);
    w.put(prepared(false));
    let mut at = |secs: f64, cells: Vec<Cell>| {
        let now = start + Duration::from_secs_f64(secs);
        w.on(main_obs(cells, true), &cx(now))
    };
    let held = || vec![holder(), mine()];
    assert_eq!(
        at(0.0, held()),
        Action::PollMain {
            after: Duration::ZERO
        }
    );
    assert_eq!(
        at(0.4, held()),
        poll_main(48),
        "an eighth of 400 ms, less the read"
    );
    assert_eq!(at(60.0, held()), poll_main(248), "the ceiling");
    let other = || vec![cell("h/02", b"queue", 99), mine()];
    assert_eq!(
        at(60.1, other()),
        Action::PollMain {
            after: Duration::ZERO
        }
    );
}

/// The line's pace, learnt from moves, spaces the polls of waiters further
/// back — about twice per expected move.
#[test]
fn waiters_further_back_poll_by_the_pace_of_the_line() {
    let start = Instant::now();
    let mut w = waiter(POLICY, start);
    w.put(queued(4));
    let at = |w: &mut Waiter, ms: u32, ahead: u32| {
        w.on(Observation::Position(in_line(ahead)), &cx(start + MS * ms))
    };
    at(&mut w, 0, 4);
    at(&mut w, 40, 3);
    at(&mut w, 80, 2);
    // 40 ms per place; two places back: half of (2 − 1) × 40 ms = 20 ms,
    // less the 2 ms read; by round trips alone it would be 2 ms.
    assert_eq!(at(&mut w, 81, 2), poll(18));
}

#[test]
fn a_new_waiter_starts_from_what_its_line_measured() {
    let start = Instant::now();
    let mut known = Average::default();
    known.note(MS * 3);
    let mut w = waiter(POLICY, start).knowing(known, Average::default());
    w.put(State::First);
    // Someone holds: the next waiter polls `main` once per round trip —
    // the line's 3 ms, less the 2 ms the entry took — not after head_poll
    // (10 ms, the decisions table's case for a line that measured nothing).
    let action = w.on(read(vec![holder(), mine()], true), &cx(start));
    assert_eq!(action, Action::PollMain { after: MS });
    assert_eq!(w.round_trip().get(), Some(MS * 3));

    // Four places back in a line that moves one place per 40 ms: half of
    // 3 × 40 ms, less the 2 ms read — from the first look on.
    let mut pace = Average::default();
    pace.note(MS * 40);
    let mut w = waiter(POLICY, start).knowing(known, pace);
    w.put(queued(4));
    let action = w.on(Observation::Position(in_line(4)), &cx(start));
    assert_eq!(action, poll(58));
    assert_eq!(w.pace().get(), Some(MS * 40));
}

/// Q6 as a table: the second in line reserves behind the first queue
/// waiter (over a fast-path cell too), keeps it only while still second,
/// directly after that waiter, and moves to `Prepared` only on a queue read that found the
/// waiter gone — not merely dead-looking.
#[test]
fn the_second_in_line_reserves_behind_the_first() {
    use Action::*;
    let zero = Duration::ZERO;
    let h01 = || Some("h/01@00000000000000000001".to_string());
    let reserve = |owner: &str| ReserveBehind {
        ahead: owner.into(),
    };
    let place = |position: Position, ready: bool| Observation::PlaceBehind { position, ready };
    let beside_legacy = beside_legacy_pace;
    struct Q6 {
        state: State,
        behind: Option<String>,
        cleanup_pending: bool,
        observation: Observation,
        tweak: fn(&mut Context),
        action: Action,
        after: State,
        behind_after: Option<String>,
        reserved_after: bool,
    }
    let q = |state, behind, observation, action, after, behind_after| Q6 {
        state,
        behind,
        cleanup_pending: false,
        observation,
        tweak: no_tweak,
        action,
        after,
        behind_after,
        reserved_after: false,
    };
    let other_head = "h/02@00000000000000000002";
    #[rustfmt::skip]
    let cases = vec![
        // Second in line, after a queue waiter: reserve behind it.
        q(queued(2), None, Observation::Position(in_line(1)),
          reserve("h/01@00000000000000000001"), reserving(), h01()),
        // On arrival too, over the fast-path cell (one write instead of a withdrawal).
        q(State::Arriving, None, arrived(in_line(1), Some(vec![holder(), cell(ME, b"queue", 99)]), true),
          reserve("h/01@00000000000000000001"), reserving(), h01()),
        q(State::Arriving, None, arrived(in_line(1), None, false),
          reserve("h/01@00000000000000000001"), reserving(), h01()),
        // After a combined waiter too (it disregards cells naming it on every path).
        q(queued(2), None, Observation::Position(in_line_with_head(1, "h/01@00000000000000000001", Algorithm::Combined)),
          reserve("h/01@00000000000000000001"), reserving(), h01()),
        // Not reserved behind a head whose queue cell is not lockshift's, nor further back.
        q(queued(2), None, Observation::Position(Position::Queued { ahead: 1, head: "h/01@00000000000000000001".into(), head_algorithm: None }),
          Poll { after: zero }, queued(1), None),
        q(queued(3), None, Observation::Position(in_line(2)),
          poll(2), queued(2), None),
        // Written: poll the queue (and what the entry needs) once per round trip.
        q(reserving(), h01(), Observation::ReservedBehind,
          PollBehind { after: zero }, queued(1), h01()),
        // Still directly after it in line: keep waiting.
        q(queued(1), h01(), place(in_line(1), true),
          PollBehind { after: zero }, queued(1), h01()),
        // It left the queue, and the entry is ready: the reservation is
        // prepared; read `main` now.
        Q6 { reserved_after: true, ..q(queued(1), h01(), place(Position::First, true),
          PollMain { after: zero }, prepared(true), None) },
        // The entry is not ready (the combined lock's `shadow` is not mine
        // alone yet): enter plainly.
        q(queued(1), h01(), place(Position::First, false),
          Enter { shadow_checked: false, after: Duration::ZERO }, State::First, None),
        // Only dead-looking cells ahead: it may be paused, not gone — enter plainly.
        q(queued(1), h01(), place(Position::FirstPastDead, true),
          Enter { shadow_checked: false, after: Duration::ZERO }, State::First, None),
        // A place read without the entry's check never prepares a claim.
        q(queued(1), h01(), Observation::Position(Position::First),
          Enter { shadow_checked: false, after: Duration::ZERO }, State::First, None),
        // Someone else is directly ahead now: reserve behind that one instead.
        q(queued(1), h01(), place(in_line_with_head(1, other_head, Algorithm::Queue), true),
          reserve("h/02@00000000000000000002"), reserving(), Some("h/02@00000000000000000002".into())),
        // Further back again: withdraw (Q2).
        q(queued(1), h01(), place(in_line(2), true),
          Withdraw, withdrawing(Then::Poll(MS * 2)), h01()),
        q(queued(1), h01(), place(Position::Missing, true),
          Arrive { after: Duration::ZERO, fast: false }, State::Arriving, None),
        // The node now prepares nothing (beside legacy contenders): withdraw.
        Q6 { tweak: beside_legacy, ..q(queued(1), h01(), place(in_line(1), true),
          Withdraw, withdrawing(Then::Poll(zero)), h01()) },
        // A read failed: look again, with the entry's check.
        q(queued(1), h01(), Observation::Failed,
          PollBehind { after: MS * 30 }, queued(1), h01()),
        // The write failed in an unknown way: unsure, with a cleanup pending.
        q(reserving(), h01(), Observation::Failed,
          poll(30), unsure(), h01()),
        // Withdrawn: nothing is reserved any more.
        q(withdrawing(Then::Poll(MS * 2)), h01(), Observation::Withdrawn,
          poll(2), unsure(), None),
        // An entry that does not prepare never reserves.
        Q6 { tweak: beside_legacy, ..q(queued(2), None, Observation::Position(in_line(1)),
          Poll { after: zero }, queued(1), None) },
        // Leftovers go first.
        Q6 { cleanup_pending: true, ..q(unsure(), None, Observation::Position(in_line(1)),
          Withdraw, withdrawing(Then::Poll(zero)), None) },
    ];
    let start = Instant::now();
    for (i, c) in cases.into_iter().enumerate() {
        let mut context = cx(start);
        (c.tweak)(&mut context);
        let mut w = waiter(POLICY, start);
        w.put(reserved_behind_in(c.state, c.behind, start));
        w.cleanup_pending = c.cleanup_pending;
        let action = w.on(c.observation, &context);
        let after = reserved_behind_in(c.after, c.behind_after.clone(), start);
        assert_eq!(
            (
                action,
                w.state().clone(),
                w.reservation().map(|r| r.behind.clone()),
                marked_reservation(w.state())
            ),
            (c.action, after, c.behind_after, c.reserved_after),
            "case #{i}"
        );
    }
}

/// Q6 end to end in the decisions: reserved behind `h/01`, the waiter
/// claims only on a read of `main` after the queue showed `h/01` gone — and
/// the cell of `h/01` in that read stops it (it still holds).
#[test]
fn a_reservation_behind_claims_only_after_the_one_ahead_left_the_queue() {
    let start = Instant::now();
    let context = cx(start);
    let mut w = waiter(Policy::QUEUE, start);
    w.put(queued(2));
    let mine_behind = || {
        cell(
            ME,
            &reserved_behind(Algorithm::Queue, "h/01@00000000000000000001"),
            99,
        )
    };
    assert!(matches!(
        w.on(Observation::Position(in_line(1)), &context),
        Action::ReserveBehind { .. }
    ));
    let place = |position| Observation::PlaceBehind {
        position,
        ready: true,
    };
    assert!(matches!(
        w.on(Observation::ReservedBehind, &context),
        Action::PollBehind { .. }
    ));
    // Still after h/01 in line: no read of `main` is even made.
    assert!(matches!(
        w.on(place(in_line(1)), &context),
        Action::PollBehind { .. }
    ));
    // h/01 left the queue: read `main`. Its cell is there (it holds): wait.
    assert!(matches!(
        w.on(place(Position::First), &context),
        Action::PollMain { .. }
    ));
    assert!(matches!(
        w.on(main_obs(vec![holder(), mine_behind()], true), &context),
        Action::PollMain { .. }
    ));
    // Released: mine alone — the lock is mine, and the cell is re-marked.
    assert_eq!(
        w.on(main_obs(vec![mine_behind()], true), &context),
        Action::Acquired {
            marked_reservation: true
        }
    );
}

/// A waiter that polled late and found itself first counts that move in the
/// line's pace: otherwise a pace once measured too slow is never lowered,
/// and every waiter keeps jumping from far back to first — too late to
/// reserve behind the one ahead (Q6).
#[test]
fn reaching_first_counts_in_the_pace_of_the_line() {
    let start = Instant::now();
    let mut slow = Average::default();
    slow.note(MS * 80);
    let mut w = waiter(POLICY, start).knowing(Average::default(), slow);
    w.put(queued(4));
    w.on(Observation::Position(in_line(4)), &cx(start));
    // Four places in 40 ms: 10 ms per place, weighed into the average.
    w.on(Observation::Position(Position::First), &cx(start + MS * 40));
    assert_eq!(w.pace().get(), Some((MS * 80 * 3 + MS * 10) / 4));
}

/// A reservation behind the same waiter lasts a bounded time (16 measured
/// round trips, at least `head_poll`): past it the waiter withdraws and
/// does not reserve behind that waiter again — so a waiter ahead that does
/// not disregard the cell (a lockshift build from before Q6) is held up
/// for at most that long, and long holds fall back to the plain
/// preparation.
#[test]
fn a_reservation_behind_is_given_up_after_its_bound() {
    let start = Instant::now();
    let context = cx(start);
    let place = |position| Observation::PlaceBehind {
        position,
        ready: true,
    };
    let mut w = waiter(Policy::QUEUE, start);
    w.put(queued(2));
    assert!(matches!(
        w.on(Observation::Position(in_line(1)), &context),
        Action::ReserveBehind { .. }
    ));
    w.on(Observation::ReservedBehind, &context);
    // The round trip measured is 2 ms: the bound is 32 ms.
    let at = |ms: u32| Context {
        now: start + MS * ms,
        ..context
    };
    assert!(matches!(
        w.on(place(in_line(1)), &at(30)),
        Action::PollBehind { .. }
    ));
    assert!(matches!(w.on(place(in_line(1)), &at(40)), Action::Withdraw));
    assert!(matches!(
        w.on(Observation::Withdrawn, &at(41)),
        Action::Poll { .. }
    ));
    // Still second, after the same waiter: no new reservation.
    assert!(matches!(
        w.on(Observation::Position(in_line(1)), &at(45)),
        Action::Poll { .. }
    ));
    assert!(matches!(w.state(), State::Queued { ahead: 1, .. }));
    // After someone new: reserve again.
    assert!(matches!(
        w.on(
            Observation::Position(in_line_with_head(
                1,
                "h/02@00000000000000000002",
                Algorithm::Queue
            )),
            &at(50)
        ),
        Action::ReserveBehind { .. }
    ));
}

/// A lost lease, a store error not worth retrying and an interruption are
/// observations like any other: a waiting acquisition arrives again on the
/// first and leaves on the others, from whatever state it is in.
#[test]
fn a_waiter_ends_or_arrives_again_through_its_transitions() {
    use Action::*;
    let zero = Duration::ZERO;
    let start = Instant::now();
    for state in [
        queued(2),
        prepared(true),
        blocked(),
        State::First,
        unsure(),
        State::Holding,
    ] {
        let mut w = waiter(POLICY, start);
        w.put(state.clone());
        let action = w.on(Observation::LeaseLost, &cx(start));
        assert_eq!(
            (action, w.state().clone(), w.contended()),
            (
                Arrive {
                    after: zero,
                    fast: false
                },
                State::Arriving,
                true
            ),
            "{state:?}"
        );
        for (observation, why) in [
            (Observation::Fatal, Leaving::Failed),
            (Observation::Interrupted, Leaving::Interrupted),
        ] {
            let mut w = waiter(POLICY, start);
            w.put(state.clone());
            let action = w.on(observation, &cx(start));
            assert_eq!(
                (action, w.state().clone()),
                (Leave(why), State::Left),
                "{state:?}"
            );
        }
    }
}

/// A try (listing 8) as a table: state and attempts left before,
/// observation, the action and the state after.
#[test]
fn a_try_takes_the_lock_only_if_it_is_free_now() {
    use Action::*;
    let zero = Duration::ZERO;
    let head = MS * 10;
    let busy = |holder: Option<&str>| {
        Leave(Leaving::Busy {
            holder: holder.map(str::to_string),
        })
    };
    let enter = |shadow_checked, after| Enter {
        shadow_checked,
        after,
    };
    #[rustfmt::skip]
    let cases: Vec<(State, u32, Observation, Action, State)> = vec![
        // Listing 8 line 1: someone in `main` — busy, the queue untouched.
        (State::Peeking, 3, main_obs(vec![], false), Arrive { after: zero, fast: true }, State::Arriving),
        (State::Peeking, 3, main_obs(vec![holder()], false), busy(Some("h/01")), State::Left),
        // The fast path: first, and my cell alone after my write (Q1).
        (State::Arriving, 3, arrived(Position::First, Some(vec![mine()]), true), Acquired { marked_reservation: false }, State::Holding),
        // First, `main` busy: what the fast path wrote goes, then a retry.
        (State::Arriving, 3, arrived(Position::First, Some(vec![holder(), mine()]), true), Withdraw, withdrawing(Then::Retry)),
        (State::Arriving, 3, arrived(Position::First, None, false), enter(false, zero), State::First),
        (State::Arriving, 0, arrived(Position::First, None, false), busy(None), State::Left),
        // Someone ahead: give up, after withdrawing what was written.
        (State::Arriving, 3, arrived(in_line(1), Some(vec![mine()]), true), Withdraw, withdrawing(Then::GiveUp)),
        (State::Arriving, 3, arrived(in_line(1), None, false), busy(None), State::Left),
        (State::Arriving, 3, arrived(Position::Missing, None, false), busy(None), State::Left),
        // An entry: alone takes it; else withdraw and retry a head poll later.
        (State::First, 2, read(vec![mine()], true), Acquired { marked_reservation: true }, State::Holding),
        (State::First, 2, read(vec![holder(), mine()], true), Withdraw, withdrawing(Then::Retry)),
        (withdrawing(Then::Retry), 2, Observation::Withdrawn, enter(false, head), State::First),
        (withdrawing(Then::Retry), 0, Observation::Withdrawn, busy(None), State::Left),
        (withdrawing(Then::GiveUp), 2, Observation::Withdrawn, busy(None), State::Left),
        (State::First, 2, Observation::Entered(Entered::Blocked { shadow_checked: true }), enter(true, head), State::First),
        (State::First, 0, Observation::Entered(Entered::Blocked { shadow_checked: true }), busy(None), State::Left),
        // Any store error, a lost lease or an interruption ends a try.
        (State::First, 2, Observation::Failed, Leave(Leaving::Failed), State::Left),
        (State::Arriving, 2, Observation::Fatal, Leave(Leaving::Failed), State::Left),
        (State::Arriving, 2, moving(57), Leave(Leaving::Failed), State::Left),
        (State::First, 2, Observation::LeaseLost, Leave(Leaving::LeaseLost), State::Left),
        (State::First, 2, Observation::Interrupted, Leave(Leaving::Interrupted), State::Left),
        // A try never waits in line.
        (State::First, 2, Observation::Position(in_line(1)), busy(None), State::Left),
    ];
    let start = Instant::now();
    for (i, (state, tries_left, observation, action, after)) in cases.into_iter().enumerate() {
        let mut w = Waiter::new(bounds(), Duration::from_secs(30), ME, start)
            .with(POLICY, Goal::Try { attempts: 3 });
        w.put(state);
        w.tries_left = tries_left;
        let got = w.on(observation, &cx(start));
        assert_eq!((got, w.state().clone()), (action, after), "case #{i}");
    }
}

/// A try from its start to its end: it enters `main` exactly as many times
/// as it has attempts, and names the holder the last read of `main` showed.
#[test]
fn a_try_enters_at_most_its_attempts_and_names_the_holder() {
    let start = Instant::now();
    let mut w = Waiter::new(bounds(), Duration::from_secs(30), ME, start)
        .with(POLICY, Goal::Try { attempts: 2 });
    let mut action = w.start(true);
    assert_eq!(action, Action::Peek);
    let mut entries = 0;
    let script = [
        main_obs(vec![], false),
        arrived(Position::First, Some(vec![holder(), mine()]), true),
        Observation::Withdrawn,
        read(vec![holder(), mine()], true),
        Observation::Withdrawn,
        Observation::Entered(Entered::Blocked {
            shadow_checked: false,
        }),
    ];
    for observation in script {
        action = w.on(observation, &cx(start));
        entries += u32::from(matches!(action, Action::Enter { .. }));
    }
    assert_eq!(entries, 2);
    assert_eq!(
        action,
        Action::Leave(Leaving::Busy {
            holder: Some("h/01".into())
        })
    );
}

/// The transitions check the state they leave: a reservation behind the
/// waiter itself is refused (a debug assertion), whatever led to it.
#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "reserved behind")]
fn a_transition_never_reserves_behind_the_waiter_itself() {
    let start = Instant::now();
    let mut w = waiter(POLICY, start);
    let _ = w.reserve(Reservation {
        behind: ME.to_string(),
        since: start,
    });
}
