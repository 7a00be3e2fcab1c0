//! A CQL row whose value cell is gone, on a real node (issue 31 item 4a).
//!
//! Cassandra judges a row's marker and its value cell apart, so a row can
//! outlive its value: with one node's clock 3 s ahead, reads of a `queue`
//! row failed with `column "…" has a null value`, and `run-with-lock`,
//! `inspect` and the fleet-wide `status` exited 1 on that one row. `INSERT`
//! then `DELETE value FROM …` leaves the same shape on one node without
//! skew, which is what this test does, through the CQL session, in a lock's
//! `main`, `shadow` and `queue` rows. Then the real `migrate` binary must
//! read the lock as it is — no cell where the value is gone — and a live
//! holder sorted after such rows must still be seen: five of them sort before it
//! in `main`, more than any `LIMIT` a lock read used, and a read that
//! stopped at its limit would have found `main` empty.
//!
//! Runs on the real cluster named by `LOCKSHIFT_TEST_CONTACT_POINTS`, or
//! else on a local CQL endpoint, which keeps an `INSERT`'s row marker as
//! Cassandra does: `DELETE value` leaves the same row with a null value
//! there (checked: both fail the same way before the change, "column … has
//! a null value").

// Integration tests: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Endpoint;
use lockshift_store::{
    CellWrite, Clock, CqlStore, RowQuery, SystemClock, Ttl, WriteOptions, schema,
};

/// The lock whose rows hold rows without values.
const LOCK: &str = "ghosted";

/// Rows without a value ahead of everything else in `main`.
const GHOSTS: usize = 5;

/// Runs `statement` (no binds) on the test's connection.
async fn run_cql(cql: &CqlStore, statement: &str) {
    cql.session()
        .query_unpaged(statement, ())
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
}

/// `INSERT` a row of `table` under `column`, then `DELETE` its value: the
/// row marker stays (for the TTL), the value is gone.
async fn ghost(cql: &CqlStore, table: &str, column: &str) {
    let ks = cql.keyspace();
    run_cql(
        cql,
        &format!(
            "INSERT INTO {ks}.{table} (row_key, column_name, value) VALUES ('{LOCK}', \
             '{column}', 0x6c6567616379) USING TTL 600"
        ),
    )
    .await;
    run_cql(
        cql,
        &format!(
            "DELETE value FROM {ks}.{table} WHERE row_key = '{LOCK}' AND column_name = '{column}'"
        ),
    )
    .await;
}

/// How many rows of `table` for [`LOCK`] come back with a null value, as
/// plain CQL sees them.
async fn null_rows(cql: &CqlStore, table: &str) -> usize {
    let rows = cql
        .session()
        .query_unpaged(
            format!(
                "SELECT column_name, value FROM {}.{table} WHERE row_key = ?",
                cql.keyspace()
            ),
            (LOCK,),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    rows.rows::<(String, Option<Vec<u8>>)>()
        .unwrap()
        .map(Result::unwrap)
        .filter(|(_, v)| v.is_none())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_without_its_value_is_no_cell_and_blinds_nothing() {
    let e = Endpoint::with_schema().await;
    let cql = e.cql().clone();

    // 1. Rows without values: ahead of everything in `main`, and one each
    // in `shadow` and `queue`. Plain CQL shows them, with null values.
    for i in 0..GHOSTS {
        ghost(&cql, "main", &format!("a{i}/0000000100000001")).await;
    }
    ghost(&cql, "shadow", "a0/0000000100000001").await;
    ghost(&cql, "queue", "a0/0000000100000001").await;
    assert_eq!(null_rows(&cql, "main").await, GHOSTS);
    assert_eq!(null_rows(&cql, "shadow").await, 1);
    assert_eq!(null_rows(&cql, "queue").await, 1);

    // 2. The store reads them as no cell, limited or not.
    for table in [schema::MAIN, schema::SHADOW, schema::QUEUE] {
        for query in [RowQuery::all(), RowQuery::first(1)] {
            let cells = e.store().read(table, LOCK, &query).await.unwrap();
            assert_eq!(cells, [], "{table} {query:?}");
        }
    }

    // 3. The operator's commands see a free lock.
    let j = e
        .migrate(&["inspect", LOCK, "--json"])
        .await
        .expect_code(0)
        .json();
    assert_eq!(j["free"], true, "{j:#}");
    let j = e.migrate(&["status", "--json"]).await.expect_code(0).json();
    assert_eq!(j["locks"]["held"], 0, "{j:#}");
    assert_eq!(j["unreadable_locks"], serde_json::json!([]), "{j:#}");
    e.migrate(&["run-with-lock", "--timeout", "30s", LOCK, "--", "true"])
        .await
        .expect_code(0);

    // 4. A live holder sorted after the rows without values is seen — by the
    // legacy algorithm (whose fresh read of `main` once took one cell) and
    // by the combined lock — and `status` counts it.
    let holder = "zz-holder/0000000100000001";
    e.store()
        .write(
            schema::MAIN,
            LOCK,
            &[CellWrite::new(holder, b"legacy".to_vec())],
            WriteOptions::at(SystemClock.now()).with_ttl(Ttl::from_secs(300).unwrap()),
        )
        .await
        .unwrap();
    for mode in ["legacy", "combined"] {
        e.migrate(&[
            "run-with-lock",
            "--mode",
            mode,
            "--timeout",
            "3s",
            LOCK,
            "--",
            "true",
        ])
        .await
        .expect_code(3)
        .stderr_has(&format!("held by {holder}"));
    }
    let j = e.migrate(&["status", "--json"]).await.expect_code(0).json();
    assert_eq!(j["locks"]["held"], 1, "{j:#}");
    e.migrate(&["inspect", LOCK])
        .await
        .expect_code(0)
        .stdout_has(holder);
}
