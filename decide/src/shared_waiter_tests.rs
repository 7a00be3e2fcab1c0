//! Tests of `shared_waiter`: values, places, and the steps as tables.

use super::*;
use crate::cell::Timestamp;
use crate::cells::{RESERVED_VALUE, reserved_behind};

const X: Sharing = Sharing::Exclusive;
const S: Sharing = Sharing::Shared;

fn p(n: u32) -> Sharing {
    Sharing::permit(n).unwrap()
}

fn cell(column: &str, value: &[u8]) -> Cell {
    Cell {
        column: column.to_string(),
        value: value.to_vec(),
        writetime: Timestamp::from_micros(1),
        ttl: None,
    }
}

fn queued(column: &str, arrival: i64, sharing: Sharing) -> Cell {
    cell(
        column,
        &shared_queue_value(Timestamp::from_micros(arrival), Algorithm::Queue, sharing),
    )
}

#[test]
fn values_say_how_their_acquisitions_share() {
    for sharing in [X, S, p(1), p(16)] {
        let q = shared_queue_value(Timestamp::from_micros(7), Algorithm::Combined, sharing);
        assert_eq!(queue_sharing(&q), sharing);
        let entry = parse_queue_cell("w/01", &q).unwrap();
        assert_eq!(entry.arrival, 7);
        // A shared head names no algorithm an exclusive waiter's Q6
        // reserves behind.
        assert_eq!(entry.algorithm.is_some(), sharing == X);
        let m = shared_main_value(Algorithm::Queue, sharing);
        assert_eq!(main_sharing(&m), sharing);
    }
    assert_eq!(shared_main_value(Algorithm::Queue, X), b"queue");
    for sharing in [S, p(1), p(16)] {
        let v = standing_main_value(Algorithm::Combined, sharing);
        assert_eq!(main_sharing(&v), sharing);
        assert!(is_standing(&v));
        assert!(!is_standing(&shared_main_value(
            Algorithm::Combined,
            sharing
        )));
    }
    assert!(
        !is_standing(b"queue:standing"),
        "exclusive cells never stand"
    );
    for (value, algorithm) in [
        (&b"00000000000000000001:queue"[..], Some(Algorithm::Queue)),
        (
            b"00000000000000000001:combined:permits=2",
            Some(Algorithm::Combined),
        ),
        (b"00000000000000000001:nonsense:shared", None),
        (b"combined", None),
    ] {
        assert_eq!(queue_algorithm(value), algorithm, "{value:?}");
    }
    assert_eq!(
        shared_main_value(Algorithm::Queue, p(3)),
        b"queue:permits=3"
    );
    // Everything else is exclusive: reservations, legacy and foreign
    // cells, suffixes this build does not write.
    for other in [
        RESERVED_VALUE.to_vec(),
        reserved_behind(Algorithm::Queue, "a/01"),
        b"legacy".to_vec(),
        b"".to_vec(),
        b"queue:readers".to_vec(),
        b"nonsense:shared".to_vec(),
    ] {
        assert_eq!(main_sharing(&other), X, "{other:?}");
    }
    assert_eq!(queue_sharing(b"00000000000000000001:queue:lots"), X);
    assert_eq!(queue_sharing(b"00000000000000000001queue"), X);
    assert_eq!(queue_sharing(b"00000000000000000001:queue"), X);
}

#[test]
fn the_waiters_ahead_are_the_live_earlier_arrivals() {
    let row = [
        queued("c", 3, S),
        queued("a", 1, X),
        queued("b", 1, S),
        queued("d", 2, p(2)),
        queued("me", 3, S),
        queued("z", 9, X),
    ];
    assert_eq!(ahead_of(&row, "me", |_| false), Some(vec![X, S, p(2), S]));
    assert_eq!(
        ahead_of(&row, "me", |c| c.column == "a"),
        Some(vec![S, p(2), S]),
        "the dead are skipped"
    );
    assert_eq!(ahead_of(&row, "a", |_| false), Some(vec![]));
    assert_eq!(
        ahead_of(&row, "a", |c| c.column == "a"),
        Some(vec![]),
        "never me"
    );
    assert_eq!(ahead_of(&row, "gone", |_| false), None);
}

/// P3 and P2 on the queue, as a table.
#[test]
fn the_queue_says_whose_turn_it_is() {
    use Step::{Arrive, LookAtMain, Wait};
    type Case = (Sharing, Option<Vec<Sharing>>, Result<Step, KindConflict>);
    let cases: Vec<Case> = vec![
        (S, None, Ok(Arrive)),
        (S, Some(vec![]), Ok(LookAtMain)),
        (S, Some(vec![S, S]), Ok(LookAtMain)),
        (S, Some(vec![S, X, S]), Ok(Wait)),
        (p(3), Some(vec![]), Ok(LookAtMain)),
        (p(3), Some(vec![p(3), p(3)]), Ok(LookAtMain)),
        (p(3), Some(vec![p(3), p(3), p(3)]), Ok(Wait)),
        (p(1), Some(vec![p(1)]), Ok(Wait)),
        (
            p(3),
            Some(vec![p(2)]),
            Err(KindConflict {
                mine: p(3),
                theirs: p(2),
            }),
        ),
        (
            S,
            Some(vec![p(2)]),
            Err(KindConflict {
                mine: S,
                theirs: p(2),
            }),
        ),
    ];
    for (mine, ahead, want) in cases {
        assert_eq!(
            after_queue(mine, ahead.as_deref()),
            want,
            "{mine:?} {ahead:?}"
        );
    }
}

/// P1, P2 and standing on `main`, before and after my write, as a
/// table: (mine, waiters ahead, `main`, written, step).
#[test]
fn main_says_enter_stand_hold_withdraw_or_look_again() {
    use Step::{Enter, Hold, LookAtMain, Stand, TakeStand, Wait, Withdraw};
    let permit = |c: &str| cell(c, &shared_main_value(Algorithm::Queue, p(3)));
    let standing = |c: &str, s: Sharing| cell(c, &standing_main_value(Algorithm::Queue, s));
    let reader = |c: &str| cell(c, b"queue:shared");
    let writer = |c: &str| cell(c, b"combined");
    let full = || vec![permit("a"), permit("b"), permit("c")];
    let with = |mut cells: Vec<Cell>, more: Cell| {
        cells.push(more);
        cells
    };
    type Case = (
        Sharing,
        Vec<Sharing>,
        Vec<Cell>,
        bool,
        Result<Step, KindConflict>,
    );
    let cases: Vec<Case> = vec![
        (p(3), vec![], vec![], false, Ok(Enter)),
        (
            p(3),
            vec![],
            vec![permit("a"), permit("b")],
            false,
            Ok(Enter),
        ),
        // First in line, no room: it takes a stand.
        (p(3), vec![], full(), false, Ok(TakeStand)),
        (
            p(3),
            vec![],
            with(full(), standing("me", p(3))),
            true,
            Ok(Stand),
        ),
        // A holding whose room went does not stand: it withdraws.
        (p(3), vec![], with(full(), permit("me")), true, Ok(Withdraw)),
        // Second in line: room for the first and for it, or not.
        (p(3), vec![p(3)], vec![permit("a")], false, Ok(Enter)),
        (
            p(3),
            vec![p(3)],
            vec![permit("a"), permit("b")],
            false,
            Ok(LookAtMain),
        ),
        (
            p(3),
            vec![p(3)],
            with(full(), standing("me", p(3))),
            true,
            Ok(Withdraw),
        ),
        (p(3), vec![p(3), p(3), p(3)], vec![], false, Ok(Wait)),
        (
            p(3),
            vec![],
            vec![permit("a"), permit("me")],
            true,
            Ok(Hold),
        ),
        (
            p(3),
            vec![],
            vec![permit("a"), standing("me", p(3))],
            true,
            Ok(Hold),
        ),
        (
            p(3),
            vec![p(3)],
            vec![permit("a"), permit("me")],
            true,
            Ok(Hold),
        ),
        // Standing cells count as what they share (P1).
        (
            p(3),
            vec![],
            vec![permit("a"), permit("b"), standing("c", p(3))],
            false,
            Ok(TakeStand),
        ),
        // My cell missing from the read after my write: look afresh.
        (p(3), vec![], vec![permit("a")], true, Ok(Enter)),
        (S, vec![S], vec![reader("a"), reader("me")], true, Ok(Hold)),
        (
            S,
            vec![],
            vec![reader("a"), writer("w")],
            false,
            Ok(TakeStand),
        ),
        (
            S,
            vec![],
            vec![writer("w"), standing("me", S)],
            true,
            Ok(Stand),
        ),
        (
            S,
            vec![],
            vec![writer("w"), reader("me")],
            true,
            Ok(Withdraw),
        ),
        (
            S,
            vec![X],
            vec![writer("w"), standing("me", S)],
            true,
            Ok(Wait),
        ),
        // Reservations count, and a reader yields to them: a writer
        // that believes itself first.
        (
            S,
            vec![],
            vec![cell("w", RESERVED_VALUE), standing("me", S)],
            true,
            Ok(Withdraw),
        ),
        (
            S,
            vec![],
            vec![cell("w", RESERVED_VALUE)],
            false,
            Ok(LookAtMain),
        ),
        (
            S,
            vec![],
            vec![
                cell("w", &reserved_behind(Algorithm::Queue, "me")),
                standing("me", S),
            ],
            true,
            Ok(Withdraw),
        ),
        (
            p(3),
            vec![],
            vec![writer("w")],
            false,
            Err(KindConflict {
                mine: p(3),
                theirs: X,
            }),
        ),
        (
            p(4),
            vec![],
            vec![permit("a"), permit("me")],
            true,
            Err(KindConflict {
                mine: p(4),
                theirs: p(3),
            }),
        ),
    ];
    for (mine, ahead, main, written, want) in cases {
        assert_eq!(
            after_main(mine, Some(&ahead), "me", &main, written),
            want,
            "{mine:?} behind {ahead:?}, written {written}: {main:?}"
        );
    }
    assert_eq!(after_main(S, None, "me", &[], false), Ok(Step::Arrive));
}

#[test]
fn an_exclusive_acquisition_stops_at_a_permit_and_waits_for_readers() {
    let permit = cell("a", &shared_main_value(Algorithm::Queue, p(2)));
    assert_eq!(
        exclusive_conflict(&[cell("b", b"queue"), permit]),
        Some(KindConflict {
            mine: X,
            theirs: p(2)
        })
    );
    assert_eq!(
        exclusive_conflict(&[cell("a", b"queue:shared"), cell("b", RESERVED_VALUE)]),
        None
    );
}

#[test]
fn next_in_line_is_one_hand_off_from_its_turn() {
    assert!(next_in_line(p(2), &[p(2), p(2)]));
    assert!(!next_in_line(p(2), &[p(2), p(2), p(2)]));
    assert!(!next_in_line(p(2), &[p(2)]), "its turn has come");
    assert!(next_in_line(S, &[S, X, S]));
    assert!(!next_in_line(S, &[X, S, X]));
    assert!(next_in_line(X, &[S]));
}
