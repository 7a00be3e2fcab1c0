//! Each injected fault reaches the `scylla` driver as the error a real
//! cluster would produce, on the tables and operations the rule names, as
//! often as it says; from Rust and from the CQL fault table.

mod common;

use std::time::{Duration, Instant};

use common::*;
use lockshift_cql_emulator::{Fault, FaultRule};
use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError, WriteType};

/// The error of the last attempt, or None on success.
fn attempt_error<T>(r: Result<T, ExecutionError>) -> Option<RequestAttemptError> {
    match r {
        Ok(_) => None,
        Err(ExecutionError::LastAttemptError(e)) => Some(e),
        Err(other) => panic!("not an attempt error: {other:?}"),
    }
}

fn db_error<T>(r: Result<T, ExecutionError>) -> DbError {
    match attempt_error(r) {
        Some(RequestAttemptError::DbError(e, _)) => e,
        other => panic!("expected a DbError, got {other:?}"),
    }
}

async fn setup() -> (
    lockshift_cql_emulator::EmulatorHandle,
    Session,
    Statements,
    Statements,
) {
    let (e, _) = endpoint().await;
    let s = session(e.local_addr(), false).await;
    create_schema(&s).await;
    let main = Statements::prepare(&s, "main").await;
    let queue = Statements::prepare(&s, "queue").await;
    (e, s, main, queue)
}

#[tokio::test]
async fn unavailable_write_timeout_read_timeout_and_overloaded_arrive_as_db_errors() {
    let (e, s, main, queue) = setup().await;
    let f = e.faults();

    let id = f
        .add(
            FaultRule::new(Fault::Unavailable)
                .on_table("lockshift.main")
                .writes(),
        )
        .unwrap();
    let err = db_error(
        s.execute_unpaged(&main.insert, ("r", "c", vec![1u8], 0i32, 1i64))
            .await,
    );
    assert!(
        matches!(
            err,
            DbError::Unavailable {
                required: 1,
                alive: 0,
                ..
            }
        ),
        "{err:?}"
    );
    // The default retry policy tries the next node once; there is only one.
    assert_eq!(f.fired(&id), Some(1));
    assert!(
        read(&s, &main, "r", 10).await.is_empty(),
        "an Unavailable write is not applied"
    );
    write(&s, &queue, "r", "c", b"", 0, 1).await; // other tables are untouched
    f.clear();

    f.add(
        FaultRule::new(Fault::WriteTimeout)
            .on_table("main")
            .writes()
            .times(1),
    )
    .unwrap();
    let err = db_error(
        s.execute_unpaged(&main.insert, ("r", "c", vec![1u8], 0i32, 1i64))
            .await,
    );
    assert!(
        matches!(
            err,
            DbError::WriteTimeout {
                write_type: WriteType::Simple,
                received: 0,
                required: 1,
                ..
            }
        ),
        "{err:?}"
    );
    write(&s, &main, "r", "c", b"", 0, 1).await; // times(1): the next write goes through
    f.clear();

    f.add(
        FaultRule::new(Fault::ReadTimeout)
            .on_table("lockshift.main")
            .reads(),
    )
    .unwrap();
    let err = db_error(s.execute_unpaged(&main.read, ("r", 10i32)).await);
    assert!(
        matches!(
            err,
            DbError::ReadTimeout {
                data_present: false,
                ..
            }
        ),
        "{err:?}"
    );
    write(&s, &main, "r", "d", b"", 0, 1).await; // a read rule leaves writes alone
    f.clear();

    f.add(FaultRule::new(Fault::Overloaded).on_table("lockshift.*"))
        .unwrap();
    assert_eq!(
        db_error(s.execute_unpaged(&queue.read, ("r", 10i32)).await),
        DbError::Overloaded
    );
    f.clear();
    assert_eq!(read(&s, &main, "r", 10).await.len(), 2);
}

#[tokio::test]
async fn a_write_timeout_after_apply_leaves_the_write_in_place() {
    let (e, s, main, _) = setup().await;
    e.faults()
        .add(
            FaultRule::new(Fault::WriteTimeout)
                .on_table("lockshift.main")
                .times(1)
                .after_apply(),
        )
        .unwrap();
    let err = db_error(
        s.execute_unpaged(&main.insert, ("r", "mine", vec![1u8], 0i32, 5i64))
            .await,
    );
    assert!(matches!(err, DbError::WriteTimeout { .. }));
    assert_eq!(
        read(&s, &main, "r", 10).await.len(),
        1,
        "timed out, yet applied: MaybeApplied"
    );
}

#[tokio::test]
async fn batches_report_the_batch_write_type() {
    let (e, s, main, _) = setup().await;
    e.faults()
        .add(
            FaultRule::new(Fault::WriteTimeout)
                .on_table("lockshift.main")
                .times(1),
        )
        .unwrap();
    let mut batch =
        scylla::statement::batch::Batch::new(scylla::statement::batch::BatchType::Unlogged);
    batch.append_statement(main.insert.clone());
    let err = db_error(s.batch(&batch, (("r", "c", vec![1u8], 0i32, 5i64),)).await);
    assert!(
        matches!(
            err,
            DbError::WriteTimeout {
                write_type: WriteType::UnloggedBatch,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(read(&s, &main, "r", 10).await.is_empty());
}

#[tokio::test]
async fn a_dropped_connection_is_a_broken_connection_then_the_pool_recovers() {
    let (e, s, main, _) = setup().await;
    let id = e
        .faults()
        .add(
            FaultRule::new(Fault::DropConnection)
                .on_table("lockshift.main")
                .writes()
                .times(1),
        )
        .unwrap();
    let err = attempt_error(
        s.execute_unpaged(&main.insert, ("r", "c", vec![1u8], 0i32, 5i64))
            .await,
    );
    assert!(
        matches!(err, Some(RequestAttemptError::BrokenConnectionError(_))),
        "{err:?}"
    );
    assert_eq!(e.faults().fired(&id), Some(1));
    let start = Instant::now();
    loop {
        if s.execute_unpaged(&main.insert, ("r", "c", vec![1u8], 0i32, 6i64))
            .await
            .is_ok()
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the driver never reconnected"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(read(&s, &main, "r", 10).await.len(), 1);
}

#[tokio::test]
async fn latency_delays_only_matching_requests_and_answers_out_of_order() {
    let (e, s, main, queue) = setup().await;
    let delay = Duration::from_millis(800);
    e.faults()
        .add(
            FaultRule::new(Fault::Latency(delay))
                .on_table("lockshift.main")
                .reads(),
        )
        .unwrap();
    let started = Instant::now();
    let slow = async {
        s.execute_unpaged(&main.read, ("r", 10i32)).await.unwrap();
        Instant::now()
    };
    let fast = async {
        // Sent after the slow read, on the same connection: answered first.
        tokio::time::sleep(Duration::from_millis(50)).await;
        s.execute_unpaged(&queue.read, ("r", 10i32)).await.unwrap();
        Instant::now()
    };
    let (slow_done, fast_done) = tokio::join!(slow, fast);
    assert!(
        slow_done - started >= delay,
        "the slow read was not delayed"
    );
    assert!(
        fast_done < slow_done,
        "the fast read waited for the slow one"
    );
}

#[tokio::test]
async fn probability_rules_are_seeded_and_counted() {
    let pattern = |seed: u64| async move {
        let (e, s, main, _) = setup().await;
        let id = e
            .faults()
            .add(
                FaultRule::new(Fault::Overloaded)
                    .on_table("lockshift.main")
                    .with_probability(0.4, seed),
            )
            .unwrap();
        let mut failed = Vec::new();
        for i in 0..60i64 {
            let r = s
                .execute_unpaged(&main.insert, ("r", "c", vec![1u8], 0i32, i))
                .await;
            failed.push(r.is_err());
        }
        let n = failed.iter().filter(|f| **f).count() as u64;
        assert_eq!(
            e.faults().fired(&id),
            Some(n),
            "every firing is an error, every error a firing"
        );
        failed
    };
    let a = pattern(11).await;
    assert_eq!(
        a,
        pattern(11).await,
        "the same seed replays the same failures"
    );
    let n = a.iter().filter(|f| **f).count();
    assert!((10..=40).contains(&n), "{n} of 60 at p = 0.4");
}

#[tokio::test]
async fn the_cql_fault_table_injects_and_reports() {
    let (_e, s, main, queue) = setup().await;
    s.query_unpaged(
        "INSERT INTO lockshift_emulator.faults (id, fault, tables, ops, times) VALUES ('wt', 'write_timeout', {'lockshift.queue'}, 'write', 2)",
        &(),
    )
    .await
    .unwrap();
    for _ in 0..2 {
        let err = db_error(
            s.execute_unpaged(&queue.insert, ("r", "c", vec![1u8], 0i32, 5i64))
                .await,
        );
        assert!(matches!(err, DbError::WriteTimeout { .. }));
    }
    write(&s, &queue, "r", "c", b"", 0, 5).await;
    write(&s, &main, "r", "c", b"", 0, 5).await;
    let (fired, remaining): (i64, i64) = s
        .query_unpaged(
            "SELECT fired, remaining FROM lockshift_emulator.faults WHERE id = 'wt'",
            &(),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!((fired, remaining), (2, 0));
    let err = s
        .query_unpaged(
            "INSERT INTO lockshift_emulator.faults (id, fault) VALUES ('x', 'meteor')",
            &(),
        )
        .await;
    assert_eq!(db_error(err), DbError::Invalid);
    s.query_unpaged("TRUNCATE lockshift_emulator.faults", &())
        .await
        .unwrap();
}

#[tokio::test]
async fn system_tables_are_never_faulted_by_a_rule_without_tables() {
    let (e, _) = endpoint().await;
    e.faults().add(FaultRule::new(Fault::Overloaded)).unwrap();
    // Connecting reads system.local / peers / system_schema: all still work.
    let s = session(e.local_addr(), true).await;
    let err = s.query_unpaged("CREATE KEYSPACE k WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}", &()).await;
    assert!(err.is_ok(), "DDL is never faulted: {err:?}");
    s.query_unpaged("CREATE TABLE k.t (a int PRIMARY KEY)", &())
        .await
        .unwrap();
    assert_eq!(
        db_error(s.query_unpaged("SELECT * FROM k.t", &()).await),
        DbError::Overloaded
    );
}
