//! The real `scylla` 1.9 driver against the endpoint, with its default
//! settings (schema metadata on) and with metadata off: every statement
//! the CQL backend sends (`store/src/cql/statements.rs`), prepared, batched and paged, with the
//! embedded store's semantics.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use lockshift_cql_emulator::Emulator;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::batch::{Batch, BatchType};

#[tokio::test]
async fn ddl_is_idempotent_and_the_schema_check_lists_every_table() {
    for metadata in MODES {
        let (e, _) = endpoint().await;
        let s = session(e.local_addr(), metadata).await;
        create_schema(&s).await;
        create_schema(&s).await;
        let check = s
            .prepare("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?")
            .await
            .unwrap();
        let names: BTreeSet<String> = s
            .execute_unpaged(&check, ("lockshift",))
            .await
            .unwrap()
            .into_rows_result()
            .unwrap()
            .rows::<(String,)>()
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect();
        assert_eq!(
            names,
            TABLES.iter().map(|t| t.to_string()).collect(),
            "metadata={metadata}"
        );
        // The driver's USE, then unqualified names.
        s.use_keyspace("lockshift", false).await.unwrap();
        let unqualified = s
            .prepare("SELECT column_name FROM main WHERE row_key = ?")
            .await
            .unwrap();
        s.execute_unpaged(&unqualified, ("r",)).await.unwrap();
        if metadata {
            // The driver's own schema view followed the DDL.
            let state = s.get_cluster_state();
            let ks = state
                .get_keyspace("lockshift")
                .expect("keyspace in driver metadata");
            let main = ks.tables.get("main").expect("table in driver metadata");
            assert_eq!(main.partition_key, ["row_key"]);
            assert_eq!(main.clustering_key, ["column_name"]);
        }
    }
}

#[tokio::test]
async fn writes_reads_and_deletes_reconcile_like_the_embedded_store() {
    for metadata in MODES {
        let (e, clock) = endpoint().await;
        let s = session(e.local_addr(), metadata).await;
        create_schema(&s).await;
        let st = Statements::prepare(&s, "main").await;
        // Order is byte order of column names, not arrival order.
        write(&s, &st, "lock", "b", b"2", 0, 10).await;
        write(&s, &st, "lock", "a", b"1", 30, 10).await;
        write(&s, &st, "lock", "c", b"3", 0, 10).await;
        let cells = read(&s, &st, "lock", 10).await;
        assert_eq!(
            cells,
            vec![
                ("a".into(), b"1".to_vec(), 10, Some(30)),
                ("b".into(), b"2".to_vec(), 10, None),
                ("c".into(), b"3".to_vec(), 10, None)
            ],
            "metadata={metadata}"
        );
        // Tie: the tombstone wins. Older delete: the newer write survives.
        delete(&s, &st, "lock", "b", 10).await;
        write(&s, &st, "lock", "c", b"new", 0, 11).await;
        delete(&s, &st, "lock", "c", 10).await;
        let cols: Vec<String> = read(&s, &st, "lock", 10)
            .await
            .into_iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(cols, ["a", "c"]);
        // TTL on the injected clock; LIMIT counts live rows only.
        clock.advance(Duration::from_secs(30));
        let cells = read(&s, &st, "lock", 1).await;
        assert_eq!(cells, vec![("c".into(), b"new".to_vec(), 11, None)]);
        // The start-column read.
        write(&s, &st, "lock", "d", b"4", 0, 12).await;
        let from: Vec<Cell> = s
            .execute_unpaged(&st.read_from, ("lock", "c", 10i32))
            .await
            .unwrap()
            .into_rows_result()
            .unwrap()
            .rows::<Cell>()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            from.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
            ["c", "d"]
        );
    }
}

#[tokio::test]
async fn ttl_is_counted_from_apply_time_on_the_endpoint_clock() {
    let (e, clock) = endpoint().await;
    let s = session(e.local_addr(), false).await;
    create_schema(&s).await;
    let st = Statements::prepare(&s, "queue").await;
    // The write timestamp is far in the past: TTL still counts from now.
    write(&s, &st, "q", "00000000000000000001-a", b"", 10, 1).await;
    clock.advance(Duration::from_millis(2_500));
    assert_eq!(
        read(&s, &st, "q", 10).await[0].3,
        Some(8),
        "whole seconds, rounded up"
    );
    clock.advance(Duration::from_millis(7_500));
    assert!(read(&s, &st, "q", 10).await.is_empty());
}

#[tokio::test]
async fn unlogged_batches_of_the_prepared_statements() {
    for metadata in MODES {
        let (e, _) = endpoint().await;
        let s = session(e.local_addr(), metadata).await;
        create_schema(&s).await;
        let st = Statements::prepare(&s, "shadow").await;
        let mut batch = Batch::new(BatchType::Unlogged);
        for _ in 0..3 {
            batch.append_statement(st.insert.clone());
        }
        s.batch(
            &batch,
            (
                ("r", "x", vec![1u8], 0i32, 7i64),
                ("r", "y", vec![2u8], 60i32, 7i64),
                ("r", "z", vec![3u8], 0i32, 7i64),
            ),
        )
        .await
        .unwrap();
        assert_eq!(read(&s, &st, "r", 10).await.len(), 3);
        let mut batch = Batch::new(BatchType::Unlogged);
        batch.append_statement(st.delete.clone());
        batch.append_statement(st.delete.clone());
        s.batch(&batch, ((7i64, "r", "x"), (6i64, "r", "z")))
            .await
            .unwrap();
        let cols: Vec<String> = read(&s, &st, "r", 10)
            .await
            .into_iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(
            cols,
            ["y", "z"],
            "x deleted on a tie, z survives an older delete"
        );
    }
}

#[tokio::test]
async fn distinct_row_keys_page_with_an_opaque_state() {
    for metadata in MODES {
        let (e, _) = endpoint().await;
        let s = session(e.local_addr(), metadata).await;
        create_schema(&s).await;
        let mut st = Statements::prepare(&s, "nodes").await;
        let keys: BTreeSet<String> = (0..23).map(|i| format!("node-{i}")).collect();
        for k in &keys {
            write(&s, &st, k, "hb", b"", 0, 1).await;
        }
        write(&s, &st, "dead", "hb", b"", 0, 1).await;
        delete(&s, &st, "dead", "hb", 1).await;
        st.keys.set_page_size(5);
        let mut seen = Vec::new();
        let mut state = PagingState::start();
        let mut pages = 0;
        loop {
            let (result, next) = s.execute_single_page(&st.keys, (), state).await.unwrap();
            let rows = result.into_rows_result().unwrap();
            assert!(rows.rows_num() <= 5);
            seen.extend(rows.rows::<(String,)>().unwrap().map(|r| r.unwrap().0));
            pages += 1;
            match next {
                PagingStateResponse::HasMorePages { state: s } => state = s,
                PagingStateResponse::NoMorePages => break,
            }
        }
        assert_eq!(pages, 5, "23 keys in pages of 5");
        let unique: BTreeSet<String> = seen.iter().cloned().collect();
        assert_eq!(unique.len(), seen.len(), "no key twice");
        assert_eq!(unique, keys, "every live key, not the dead one");
        // The driver's own paging loop agrees.
        use futures::TryStreamExt;
        let all: Vec<(String,)> = s
            .execute_iter(st.keys.clone(), ())
            .await
            .unwrap()
            .rows_stream::<(String,)>()
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(all.len(), 23);
    }
}

#[tokio::test]
async fn prepared_metadata_has_the_authoritative_types_and_pk_indexes() {
    let (e, _) = endpoint().await;
    let s = session(e.local_addr(), true).await;
    create_schema(&s).await;
    let st = Statements::prepare(&s, "main").await;
    let types = |p: &scylla::statement::prepared::PreparedStatement| {
        p.get_variable_col_specs()
            .iter()
            .map(|c| format!("{:?}", c.typ()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        types(&st.insert),
        [
            "Native(Text)",
            "Native(Text)",
            "Native(Blob)",
            "Native(Int)",
            "Native(BigInt)"
        ]
    );
    assert_eq!(
        st.insert
            .get_variable_pk_indexes()
            .iter()
            .map(|i| i.index)
            .collect::<Vec<_>>(),
        [0]
    );
    assert_eq!(
        types(&st.delete),
        ["Native(BigInt)", "Native(Text)", "Native(Text)"]
    );
    assert_eq!(
        st.delete
            .get_variable_pk_indexes()
            .iter()
            .map(|i| i.index)
            .collect::<Vec<_>>(),
        [1]
    );
    assert_eq!(types(&st.read), ["Native(Text)", "Native(Int)"]);
    let result: Vec<String> = st
        .read
        .get_current_result_set_col_specs()
        .get()
        .iter()
        .map(|c| format!("{:?}", c.typ()))
        .collect();
    assert_eq!(
        result,
        [
            "Native(Text)",
            "Native(Blob)",
            "Native(BigInt)",
            "Native(Int)"
        ]
    );
    // A value of the wrong type is refused by the driver, before sending.
    assert!(s.execute_unpaged(&st.read, ("r", 10i64)).await.is_err());
}

#[tokio::test]
async fn a_dropped_and_recreated_table_is_reprepared_transparently() {
    let (e, _) = endpoint().await;
    let s = session(e.local_addr(), false).await;
    create_schema(&s).await;
    let st = Statements::prepare(&s, "scratch").await;
    write(&s, &st, "r", "c", b"", 0, 1).await;
    s.query_unpaged("DROP TABLE lockshift.scratch", &())
        .await
        .unwrap();
    create_schema(&s).await;
    // The old id is Unprepared now; the driver re-prepares and retries.
    write(&s, &st, "r", "c2", b"", 0, 1).await;
    let cols: Vec<String> = read(&s, &st, "r", 10)
        .await
        .into_iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(cols, ["c2"], "the dropped table's rows are gone");
}

#[tokio::test]
async fn schema_version_moves_on_ddl_and_the_driver_sees_agreement() {
    let (e, _) = endpoint().await;
    let s = session(e.local_addr(), true).await;
    let version = || async {
        s.query_unpaged(
            "SELECT schema_version FROM system.local WHERE key='local'",
            &(),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .single_row::<(uuid::Uuid,)>()
        .unwrap()
        .0
    };
    let before = version().await;
    create_schema(&s).await;
    let after = version().await;
    assert_ne!(before, after);
    assert_eq!(s.await_schema_agreement().await.unwrap(), after);
}

#[tokio::test]
async fn errors_reach_the_driver_with_cassandra_codes() {
    let (e, _) = endpoint().await;
    let s = session(e.local_addr(), false).await;
    create_schema(&s).await;
    let db_error = |r: Result<_, ExecutionError>| match r {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(e, msg))) => (e, msg),
        Err(other) => panic!("unexpected error {other:?}"),
        Ok(_) => panic!("statement succeeded"),
    };
    let (err, msg) = db_error(s.query_unpaged("SELEKT 1", &()).await);
    assert_eq!(err, DbError::SyntaxError);
    assert!(msg.contains("line 1:0"), "{msg}");
    let (err, msg) = db_error(s.query_unpaged("SELECT * FROM lockshift.nope", &()).await);
    assert_eq!(err, DbError::Invalid);
    assert_eq!(msg, "unconfigured table nope");
    let (err, _) = db_error(
        s.query_unpaged(
            "CREATE KEYSPACE lockshift WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &(),
        )
        .await,
    );
    assert!(matches!(err, DbError::AlreadyExists { .. }), "{err:?}");
    match s
        .prepare("SELECT keyspace_name FROM system_schema.scylla_tables")
        .await
    {
        Err(scylla::errors::PrepareError::AllAttemptsFailed {
            first_attempt: RequestAttemptError::DbError(err, _),
        }) => assert_eq!(
            err,
            DbError::Invalid,
            "the driver's ScyllaDB probe must see Invalid exactly"
        ),
        other => panic!("{other:?}"),
    }
}

/// Tombstones reach the driver as Cassandra 4.1.1 sends them (measured;
/// `lockshift_store::tombstones`): the warning in the frame's warning list,
/// for reads and for key scans, and above the failure threshold a
/// `READ_FAILURE` with the v4 fields of one replica.
#[tokio::test]
async fn tombstones_reach_the_driver_as_cassandra_sends_them() {
    let clock = std::sync::Arc::new(lockshift_store::ManualClock::new(
        lockshift_store::Timestamp::from_micros(START),
    ));
    let e = Emulator::builder()
        .clock(clock)
        .tombstone_thresholds(lockshift_store::TombstoneThresholds { warn: 2, fail: 5 })
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let s = session(e.local_addr(), false).await;
    create_schema(&s).await;
    let st = Statements::prepare(&s, "main").await;
    for c in ["a", "b", "c"] {
        delete(&s, &st, "r", c, 10).await;
    }
    write(&s, &st, "r", "z", b"v", 0, 10).await;
    let token = lockshift_store::tombstones::token("r");
    let result = s.execute_unpaged(&st.read, ("r", 1)).await.unwrap();
    assert_eq!(
        result.warnings().collect::<Vec<_>>(),
        [format!(
            "Read 1 live rows and 3 tombstone cells for query SELECT value FROM lockshift.main \
             WHERE row_key = 'r' LIMIT 1 ALLOW FILTERING; token {token} (see tombstone_warn_threshold)"
        )]
    );
    let (page, _) = s
        .execute_single_page(&st.keys, (), PagingState::start())
        .await
        .unwrap();
    assert_eq!(
        page.warnings().collect::<Vec<_>>(),
        [format!(
            "Read 1 live rows and 3 tombstone cells for query SELECT * FROM lockshift.main \
             LIMIT 5000 PER PARTITION LIMIT 1 ALLOW FILTERING; token {token} (see tombstone_warn_threshold)"
        )],
        "a key scan page counts like Cassandra's"
    );
    let quiet = s
        .execute_unpaged(&st.read_from, ("r", "z", 1))
        .await
        .unwrap();
    assert_eq!(quiet.warnings().count(), 0, "a slice after the tombstones");

    for c in ["d", "e", "f"] {
        delete(&s, &st, "r", c, 10).await;
    }
    let mut read = st.read.clone();
    read.set_consistency(scylla::statement::Consistency::Quorum);
    match s.execute_unpaged(&read, ("r", 1)).await {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(err, msg))) => {
            assert_eq!(
                err,
                DbError::ReadFailure {
                    consistency: scylla::statement::Consistency::Quorum,
                    received: 0,
                    required: 1,
                    numfailures: 1,
                    data_present: false,
                }
            );
            assert_eq!(
                msg,
                "Operation failed - received 0 responses and 1 failures: \
                 READ_TOO_MANY_TOMBSTONES from /127.0.0.1:7000"
            );
        }
        other => panic!("6 > 5 tombstones must fail the read: {other:?}"),
    }
}

#[tokio::test]
async fn host_id_is_stable_and_a_session_survives_a_restart() {
    let first = Emulator::builder()
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = first.local_addr();
    let s = session(addr, true).await;
    create_schema(&s).await;
    let id_before = first.host_id();
    let nodes = s
        .get_cluster_state()
        .get_nodes_info()
        .iter()
        .map(|n| n.host_id)
        .collect::<Vec<_>>();
    assert_eq!(nodes, [id_before]);
    first.shutdown().await;
    let second = Emulator::builder().start(addr).await.unwrap();
    assert_eq!(second.host_id(), id_before);
    // The same session reconnects (to an empty store) and carries on.
    let mut ok = false;
    for _ in 0..100 {
        if s.query_unpaged("CREATE KEYSPACE IF NOT EXISTS lockshift WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}", &()).await.is_ok() {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        ok,
        "the session never got through to the restarted endpoint"
    );
    create_schema(&s).await;
    let nodes = s
        .get_cluster_state()
        .get_nodes_info()
        .iter()
        .map(|n| n.host_id)
        .collect::<Vec<_>>();
    assert_eq!(nodes, [id_before], "still one node, the same one");
}
