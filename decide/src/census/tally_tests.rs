use std::time::Duration;

use super::*;
use crate::cell::Timestamp;
use crate::census::{CellOwner, waiters};

fn cell(table: Table, lock: &str, owner: &str, algorithm: Option<Algorithm>) -> CensusCell {
    CensusCell {
        table,
        lock: lock.to_string(),
        column: owner.to_string(),
        owner: CellOwner {
            owner: owner.to_string(),
            node: None,
            registered: false,
            process_live: false,
            promise: None,
            clock: None,
            algorithm,
            reserved: false,
            sharing: crate::sharing::Sharing::Exclusive,
        },
        writetime: Timestamp::from_micros(1),
        age: Duration::ZERO,
        least_age: Duration::ZERO,
        ttl_left: None,
        queue_position: None,
        queued_at: None,
        stale: false,
        lease_over: false,
    }
}

fn waiter(lock: &str, owner: &str, position: usize, queued_at: u64) -> CensusCell {
    CensusCell {
        queue_position: Some(position),
        queued_at: Some(queued_at),
        ..cell(schema::QUEUE, lock, owner, Some(Algorithm::Queue))
    }
}

/// The rows of a small fleet, `main`'s first, as a census adds them.
fn rows() -> Vec<(Table, Vec<CensusCell>)> {
    let q = Some(Algorithm::Queue);
    let mut stale_holder = cell(schema::MAIN, "b", "n2/2", q);
    stale_holder.stale = true;
    stale_holder.lease_over = true;
    let mut reservation = cell(schema::MAIN, "c", "n4/4", q);
    reservation.owner.reserved = true;
    let mut stale_waiter = waiter("b", "n5/5", 0, 30);
    stale_waiter.stale = true;
    stale_waiter.queue_position = None;
    vec![
        (schema::MAIN, vec![cell(schema::MAIN, "a", "n1/1", q)]),
        (
            schema::MAIN,
            vec![stale_holder, cell(schema::MAIN, "b", "legacy-uuid", None)],
        ),
        (schema::MAIN, vec![reservation]),
        (
            schema::MAIN,
            vec![cell(
                schema::MAIN,
                ROLLOUT_LOCK,
                "n9/9",
                Some(Algorithm::Combined),
            )],
        ),
        (
            schema::SHADOW,
            vec![cell(schema::SHADOW, "b", "legacy-uuid", None)],
        ),
        (
            schema::QUEUE,
            // The holder's own queue cell (its delete not landed yet).
            vec![waiter("a", "n1/1", 0, 10), waiter("a", "n3/3", 1, 20)],
        ),
        (schema::QUEUE, vec![stale_waiter, waiter("b", "n6/6", 0, 5)]),
    ]
}

#[test]
fn a_tally_counts_what_the_cells_would_say() {
    let mut tally = Tally::default();
    let mut all = Vec::new();
    for (table, cells) in rows() {
        tally.add_row(table, &cells);
        all.extend(cells);
    }
    assert_eq!(tally.cells, all.len());
    assert_eq!(tally.by_table[&schema::MAIN], 5);
    assert_eq!(tally.by_table[&schema::SHADOW], 1);
    assert_eq!(tally.by_table[&schema::QUEUE], 4);
    // Holdings: a, b (two), the rollout lock; the reservation is none.
    assert_eq!(tally.held, 4);
    assert_eq!(tally.held_lease_over, 1);
    assert_eq!(tally.held_by[&Some(Algorithm::Queue)], 2);
    assert_eq!(tally.held_by[&None], 1);
    assert_eq!(tally.held_by[&Some(Algorithm::Combined)], 1);
    // The rollout's own lock is no fleet holding, nor activity.
    assert_eq!(tally.fleet_held_by(Some(Algorithm::Combined)).count, 0);
    let queue = tally.fleet_held_by(Some(Algorithm::Queue));
    assert_eq!(queue.count, 2);
    assert_eq!(
        queue
            .first
            .iter()
            .map(|c| c.lock.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(tally.seen, BTreeSet::from([Algorithm::Queue]));
    assert_eq!(
        tally.legacy_activity, 2,
        "b's foreign main and shadow cells"
    );
    // Waiters: as `waiters` says over every cell.
    assert_eq!(tally.waiting, waiters(&all).len());
    assert_eq!(tally.waiting, 2, "n3 on a, n6 on b; n1 holds a");
    assert_eq!(tally.locks_with_waiters, 2);
    let oldest = tally.oldest_waiter.as_ref().unwrap();
    assert_eq!(
        (oldest.lock.as_str(), oldest.owner.owner.as_str()),
        ("b", "n6/6")
    );
    // Stale: b's holder (main) and its waiter (queue): one lock.
    assert_eq!(tally.stale, 2);
    assert_eq!(tally.stale_locks, 1);
    assert_eq!(tally.stale_by_table[&schema::MAIN], 1);
    assert_eq!(tally.stale_by_table[&schema::QUEUE], 1);
    assert_eq!(tally.crowded.count, 1);
    assert_eq!(tally.crowded.first, [("b".to_string(), 2)]);
}

/// What a tally holds does not grow with the locks but by 8 bytes a
/// holding: samples stay at [`SAMPLE`], the same whatever the order rows
/// come in (ranges are read concurrently).
#[test]
fn samples_are_bounded_and_independent_of_the_order() {
    let q = Some(Algorithm::Queue);
    let rows: Vec<CensusCell> = (0..500)
        .map(|i| cell(schema::MAIN, &format!("lock-{i:03}"), "n1/1", q))
        .collect();
    let mut forward = Tally::default();
    let mut backward = Tally::default();
    for c in &rows {
        forward.add_row(schema::MAIN, std::slice::from_ref(c));
    }
    for c in rows.iter().rev() {
        backward.add_row(schema::MAIN, std::slice::from_ref(c));
    }
    let f = forward.fleet_held_by(q);
    assert_eq!(f.count, 500);
    assert_eq!(f.first.len(), SAMPLE);
    assert_eq!(f.first, backward.fleet_held_by(q).first);
    assert_eq!(f.first[0].lock, "lock-000");
    assert_eq!(f.first[SAMPLE - 1].lock, format!("lock-{:03}", SAMPLE - 1));
}

#[test]
fn an_empty_row_adds_nothing() {
    let mut tally = Tally::default();
    tally.add_row(schema::MAIN, &[]);
    assert_eq!(tally.cells, 0);
    assert!(tally.by_table.is_empty());
}
