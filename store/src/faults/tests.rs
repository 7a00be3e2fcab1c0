use super::*;
use crate::{CellWrite, RowQuery, Timestamp, WriteOptions};
use crate::{MemoryStore, schema};

fn cell() -> [CellWrite; 1] {
    [CellWrite::new("c", b"v".to_vec())]
}

#[tokio::test(start_paused = true)]
async fn failure_before_apply_changes_nothing_after_apply_changes_data() {
    let store = FaultyStore::new(MemoryStore::new(), 7);
    store.fail_next(1, FailPoint::Before);
    let err = store
        .write(
            schema::SCRATCH,
            "r",
            &cell(),
            WriteOptions::at(Timestamp::from_micros(1)),
        )
        .await
        .unwrap_err();
    assert!(matches!(
        err.kind(),
        StoreErrorKind::Unavailable | StoreErrorKind::NotApplied
    ));
    assert!(
        store
            .inner()
            .read(schema::SCRATCH, "r", &RowQuery::all())
            .await
            .unwrap()
            .is_empty()
    );

    store.fail_next(1, FailPoint::After);
    let err = store
        .write(
            schema::SCRATCH,
            "r",
            &cell(),
            WriteOptions::at(Timestamp::from_micros(1)),
        )
        .await
        .unwrap_err();
    assert!(err.may_have_applied());
    assert_eq!(
        store
            .inner()
            .read(schema::SCRATCH, "r", &RowQuery::all())
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(store.op_counts().get(schema::SCRATCH, OpKind::Write), 2);
}

#[tokio::test(start_paused = true)]
async fn latency_is_within_bounds_and_scope_limits_failures() {
    let store = FaultyStore::new(MemoryStore::new(), 3).with_plan(FaultPlan {
        latency: Duration::from_millis(10),
        jitter: Duration::from_millis(5),
        fail_before: 1.0,
        scope: FaultScope {
            tables: Some(vec![schema::QUEUE]),
            ops: None,
        },
        ..FaultPlan::default()
    });
    for _ in 0..20 {
        let started = tokio::time::Instant::now();
        store
            .read(schema::MAIN, "r", &RowQuery::all())
            .await
            .unwrap();
        let took = started.elapsed();
        // Tokio's timer rounds each of the two sleeps up to a whole millisecond.
        assert!(
            took >= Duration::from_millis(10) && took <= Duration::from_millis(17),
            "{took:?}"
        );
    }
    assert!(
        store
            .read(schema::QUEUE, "r", &RowQuery::all())
            .await
            .is_err()
    );
}

#[tokio::test(start_paused = true)]
async fn restamp_moves_timestamps_within_bound_and_replays_from_seed() {
    async fn stamps(seed: u64) -> Vec<i64> {
        let store = FaultyStore::new(MemoryStore::new(), seed).with_plan(FaultPlan {
            restamp: Duration::from_micros(500),
            ..FaultPlan::default()
        });
        let mut out = Vec::new();
        for i in 0..50 {
            let row = format!("r{i}");
            store
                .write(
                    schema::SCRATCH,
                    &row,
                    &cell(),
                    WriteOptions::at(Timestamp::from_micros(10_000)),
                )
                .await
                .unwrap();
            let c = store
                .read(schema::SCRATCH, &row, &RowQuery::all())
                .await
                .unwrap();
            out.push(c[0].writetime.as_micros());
        }
        out
    }
    let a = stamps(11).await;
    assert!(a.iter().all(|t| (9_500..=10_500).contains(t)), "{a:?}");
    assert!(a.iter().any(|t| *t != 10_000), "restamped");
    assert_eq!(a, stamps(11).await, "same seed, same run");
    assert_ne!(a, stamps(12).await, "another seed, another run");
}

#[tokio::test(start_paused = true)]
async fn slow_scope_delays_only_its_operations() {
    let store = FaultyStore::new(MemoryStore::new(), 4).with_plan(FaultPlan {
        slow: Some((
            FaultScope {
                tables: Some(vec![schema::MAIN]),
                ops: Some(vec![OpKind::Write]),
            },
            Duration::from_millis(300),
        )),
        ..FaultPlan::default()
    });
    let started = tokio::time::Instant::now();
    store
        .write(
            schema::MAIN,
            "r",
            &cell(),
            WriteOptions::at(Timestamp::EPOCH),
        )
        .await
        .unwrap();
    let write = started.elapsed();
    let started = tokio::time::Instant::now();
    store
        .read(schema::MAIN, "r", &RowQuery::all())
        .await
        .unwrap();
    let read = started.elapsed();
    assert!(write >= Duration::from_millis(300), "{write:?}");
    assert_eq!(read, Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn partition_fails_everything_until_healed() {
    let store = FaultyStore::new(MemoryStore::new(), 1);
    store.set_partitioned(true);
    let err = store
        .read(schema::MAIN, "r", &RowQuery::all())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Unavailable);
    store.set_partitioned(false);
    store
        .read(schema::MAIN, "r", &RowQuery::all())
        .await
        .unwrap();
    let counts = store.op_counts();
    assert_eq!(counts.get(schema::MAIN, OpKind::Read), 2);
    assert_eq!(counts.to_string(), "main.read=2");
}

#[tokio::test(start_paused = true)]
async fn fenced_writes_are_their_own_kind_and_a_timeout_may_have_applied() {
    let store = FaultyStore::new(MemoryStore::new(), 7);
    let cell = CellWrite::new("balance", b"1".to_vec());
    store.fail_next(1, FailPoint::After);
    let err = store
        .write_fenced(schema::SCRATCH, "r", &cell, 5)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::MaybeApplied);
    assert!(err.may_have_applied());
    // It had applied: a smaller token is now refused.
    let late = store
        .write_fenced(schema::SCRATCH, "r", &cell, 4)
        .await
        .unwrap();
    assert_eq!(
        late,
        crate::FencedOutcome::Refused {
            recorded: 5,
            rounds: 1
        }
    );
    store.fail_next(1, FailPoint::Before);
    assert!(
        !store
            .write_fenced(schema::SCRATCH, "r", &cell, 6)
            .await
            .unwrap_err()
            .may_have_applied()
    );
    let counts = store.op_counts();
    assert_eq!(
        counts.get(schema::SCRATCH, OpKind::FencedWrite),
        3,
        "{counts}"
    );
    assert_eq!(counts.writes(), 0, "not counted as plain writes");
}

/// A late landing: the caller hears a timeout, the store shows nothing
/// until the delay has passed, then the write with the timestamp it was
/// sent with — as a replica's queue or a replayed hint applies it.
#[tokio::test(start_paused = true)]
async fn a_late_landing_is_applied_later_with_its_own_timestamp() {
    let store = FaultyStore::new(MemoryStore::new(), 11);
    store.land_late_next(1, Duration::from_secs(70));
    let err = store
        .write(
            schema::SCRATCH,
            "r",
            &cell(),
            WriteOptions::at(Timestamp::from_micros(5)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::MaybeApplied);
    let read = || async {
        store
            .inner()
            .read(schema::SCRATCH, "r", &RowQuery::all())
            .await
            .unwrap()
    };
    tokio::time::sleep(Duration::from_secs(69)).await;
    assert!(read().await.is_empty(), "not before its delay");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cells = read().await;
    assert_eq!(cells.len(), 1, "landed");
    assert_eq!(cells[0].writetime, Timestamp::from_micros(5));
    // The next write is on time again.
    store
        .write(
            schema::SCRATCH,
            "r",
            &cell(),
            WriteOptions::at(Timestamp::from_micros(6)),
        )
        .await
        .unwrap();
}

/// The plan's odds land some mutations late and no read.
#[tokio::test(start_paused = true)]
async fn the_plan_lands_mutations_late_never_reads() {
    let store = FaultyStore::new(MemoryStore::new(), 5).with_plan(FaultPlan {
        late: 1.0,
        late_by: Duration::from_secs(3),
        ..FaultPlan::default()
    });
    store
        .read(schema::SCRATCH, "r", &RowQuery::all())
        .await
        .unwrap();
    let err = store
        .delete(
            schema::SCRATCH,
            "r",
            &["c".to_string()],
            Timestamp::from_micros(9),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::MaybeApplied);
}
