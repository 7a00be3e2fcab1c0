//! The waiter's decisions as a table: state before, observation, the
//! action and the state after. Each case prints its index on failure.

use lockshift_lock::RESERVED_VALUE;

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

fn behind(ahead: u32) -> Position {
    Position::Behind {
        ahead,
        head: "00000000000000000001h/01".into(),
    }
}

/// A read took 2 ms (the measured round trip becomes 2 ms; an arrival, two
/// rounds, measures 1 ms), it is second
/// 100 by the wall clock, the entry prepares, legacy pacing is off.
fn cx(now: Instant) -> Context {
    Context {
        now,
        wall: Timestamp::from_micros(100_000_000),
        took: MS * 2,
        prepares: true,
        busy_pause: None,
        pause_after_error: MS * 30,
    }
}

struct Case {
    state: State,
    dirty: bool,
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
        dirty: false,
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

fn read(main: Vec<Cell>, reserved: bool) -> Observation {
    Observation::Entered(Entered::Read { main, reserved })
}

fn main_obs(cells: Vec<Cell>, can_claim: bool) -> Observation {
    Observation::Main { cells, can_claim }
}

fn poll(ms: u32) -> Action {
    Action::Poll { after: MS * ms }
}

fn poll_main(ms: u32) -> Action {
    Action::PollMain { after: MS * ms }
}

fn withdrawing(then: Then) -> State {
    State::Withdrawing { then }
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
             Acquired { reserved: false }, State::Holding),
        // Alone in `main` but not first: a waiter is overtaken otherwise (Q2).
        // The arrival (2 ms, two store rounds) measured a 1 ms round trip:
        // one place back, the next look comes one round trip later.
        case(State::Arriving, arrived(behind(1), Some(vec![cell(ME, b"queue", 99)]), true),
             Withdraw, withdrawing(Then::Poll(MS))),
        // First, but someone in `main`: withdraw the fast-path cell, then enter properly.
        case(State::Arriving, arrived(Position::First, Some(vec![holder(), cell(ME, b"queue", 99)]), true),
             Withdraw, withdrawing(Then::Enter)),
        // The slow path: nothing written beside the queue cell.
        case(State::Arriving, arrived(behind(2), None, false), poll(2), State::Behind { ahead: 2 }),
        case(State::Arriving, arrived(Position::First, None, false), Enter { prepared: false }, State::First),
        case(State::Arriving, arrived(Position::Missing, None, false), Reenqueue, State::Arriving),
        // ===== behind =====
        // One round trip per place: 2 places × 2 ms, minus the 2 ms the read took.
        case(State::Behind { ahead: 3 }, Observation::Position(behind(2)), poll(2), State::Behind { ahead: 2 }),
        // Right behind the head (it is taking the lock): once per round trip, back to back.
        case(State::Behind { ahead: 2 }, Observation::Position(behind(1)), Poll { after: zero }, State::Behind { ahead: 1 }),
        case(State::Behind { ahead: 1 }, Observation::Position(Position::First), Enter { prepared: false }, State::First),
        case(State::Behind { ahead: 1 }, Observation::Position(Position::Missing), Reenqueue, State::Arriving),
        // ===== entering =====
        case(State::First, read(vec![mine()], true), Acquired { reserved: true }, State::Holding),
        // Someone holds: my cell stays as a reservation; watch `main` every
        // round trip (none measured yet: head_poll, less the 2 ms the entry took).
        case(State::First, read(vec![holder(), mine()], true), poll_main(8), State::Prepared),
        // Only reservations besides mine: the queue decides (Q5).
        case(State::First, read(vec![mine(), reservation()], true), AskQueue { after: zero }, State::Deciding),
        // My acknowledged write is gone: removed behind my back.
        case(State::First, read(vec![holder()], true), Withdraw, withdrawing(Then::Poll(zero))),
        case(State::First, Observation::Entered(Entered::Blocked { prepared: false }), poll_main(8), State::Blocked),
        // ===== prepared =====
        case(State::Prepared, main_obs(vec![mine()], true), Acquired { reserved: true }, State::Holding),
        // The combined lock's shadow cell did not live throughout: start over.
        case(State::Prepared, main_obs(vec![mine()], false), Withdraw, withdrawing(Then::Poll(zero))),
        case(State::Prepared, main_obs(vec![holder(), mine()], true), PollMain { after: zero }, State::Prepared),
        // A holder that stopped renewing is dead: its cell goes with its TTL.
        case(State::Prepared, main_obs(vec![dead_holder(), mine()], true), poll_main(250), State::Prepared),
        case(State::Prepared, main_obs(vec![reservation(), mine()], true), AskQueue { after: zero }, State::Deciding),
        case(State::Prepared, main_obs(vec![holder()], true), Withdraw, withdrawing(Then::Poll(zero))),
        // ===== deciding (Q5) =====
        case(State::Deciding, Observation::Position(Position::First), PollMain { after: zero }, State::Prepared),
        case(State::Deciding, Observation::Position(behind(1)), Withdraw, withdrawing(Then::Poll(MS * 2))),
        case(State::Deciding, Observation::Position(Position::Missing), Reenqueue, State::Arriving),
        // ===== blocked =====
        case(State::Blocked, main_obs(vec![], true), Enter { prepared: false }, State::First),
        case(State::Blocked, main_obs(vec![holder()], true), PollMain { after: zero }, State::Blocked),
        case(State::Blocked, main_obs(vec![mine(), holder()], true), Withdraw, withdrawing(Then::Enter)),
        // ===== withdrawing =====
        case(withdrawing(Then::Enter), Observation::Withdrawn, Enter { prepared: false }, State::First),
        case(withdrawing(Then::Poll(MS * 7)), Observation::Withdrawn, poll(7), State::Unsure),
        case(withdrawing(Then::WaitForMain(MS * 9)), Observation::Withdrawn, poll_main(9), State::Blocked),
        // ===== store errors =====
        case(State::Arriving, Observation::Failed, Arrive { after: MS * 30, fast: false }, State::Arriving),
        case(State::Behind { ahead: 2 }, Observation::Failed, poll(30), State::Behind { ahead: 2 }),
        case(State::Prepared, Observation::Failed, poll_main(30), State::Prepared),
        case(State::Deciding, Observation::Failed, AskQueue { after: MS * 30 }, State::Deciding),
        // A write may have landed: unsure, and dirty.
        case(State::First, Observation::Failed, poll(30), State::Unsure),
    ];
    let start = Instant::now();
    for (i, c) in cases.into_iter().enumerate() {
        let mut w = Waiter::new(bounds(), Duration::from_secs(30), ME, start);
        w.state = c.state;
        w.dirty = c.dirty;
        w.reserved = matches!(c.state, State::Prepared);
        let mut context = cx(start);
        (c.tweak)(&mut context);
        let action = w.on(c.observation, &context);
        assert_eq!((action, w.state), (c.action, c.after), "case #{i}");
    }
}

#[test]
fn entries_that_do_not_prepare_withdraw_and_pace_themselves() {
    let start = Instant::now();
    let legacy_pace = |c: &mut Context| {
        c.prepares = false;
        c.busy_pause = Some(MS * 700);
    };
    #[rustfmt::skip]
    let cases = vec![
        Case { tweak: legacy_pace, ..case(State::First, read(vec![holder(), mine()], false),
               Action::Withdraw, withdrawing(Then::WaitForMain(MS * 700))) },
        Case { tweak: legacy_pace, ..case(State::First, Observation::Entered(Entered::Blocked { prepared: false }),
               poll_main(700), State::Blocked) },
        Case { tweak: legacy_pace, ..case(State::Blocked, main_obs(vec![holder()], true),
               poll_main(700), State::Blocked) },
        // Dirty leftovers go before entering, and before waiting behind others.
        Case { dirty: true, ..case(State::Unsure, Observation::Position(Position::First),
               Action::Withdraw, withdrawing(Then::Enter)) },
        Case { dirty: true, ..case(State::Unsure, Observation::Position(behind(2)),
               Action::Withdraw, withdrawing(Then::Poll(MS * 2))) },
    ];
    for (i, c) in cases.into_iter().enumerate() {
        let mut w = Waiter::new(bounds(), Duration::from_secs(30), ME, start);
        w.state = c.state;
        w.dirty = c.dirty;
        let mut context = cx(start);
        (c.tweak)(&mut context);
        let action = w.on(c.observation, &context);
        assert_eq!((action, w.state), (c.action, c.after), "case #{i}");
    }
}

/// While a hold lasts, the next waiter backs off: the same scene seen for
/// longer makes it look less often, bounded by the ceiling; a new scene
/// (the line moved) brings it back to once per round trip.
#[test]
fn the_next_waiter_backs_off_during_a_hold_and_recovers_when_the_line_moves() {
    let start = Instant::now();
    let mut w = Waiter::new(bounds(), Duration::from_secs(30), ME, start);
    w.state = State::Prepared;
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
    let mut w = Waiter::new(bounds(), Duration::from_secs(30), ME, start);
    w.state = State::Behind { ahead: 4 };
    let at = |w: &mut Waiter, ms: u32, ahead: u32| {
        w.on(Observation::Position(behind(ahead)), &cx(start + MS * ms))
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
    let mut w = Waiter::new(bounds(), Duration::from_secs(30), ME, start)
        .knowing(known, Average::default());
    w.state = State::First;
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
    let mut w = Waiter::new(bounds(), Duration::from_secs(30), ME, start).knowing(known, pace);
    w.state = State::Behind { ahead: 4 };
    let action = w.on(Observation::Position(behind(4)), &cx(start));
    assert_eq!(action, poll(58));
    assert_eq!(w.pace().get(), Some(MS * 40));
}
