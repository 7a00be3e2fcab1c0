//! `migrate schema --apply` gives tables made before fenced writes their
//! `fence` column, on a real node (the local endpoint creates every table
//! with it and does not implement `ALTER`).
//!
//! A keyspace made by an older lockshift has no `fence` column: the locks
//! run, a fenced write fails naming the `ALTER TABLE` that adds it. Here the
//! column is dropped from `scratch` to make that shape; `schema --apply`
//! must add it back (and only where it is missing: a second apply adds
//! nothing), after which the fenced write lands.

// Integration tests: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Endpoint;
use lockshift_store::{CellWrite, FencedOutcome, schema};

/// The `ADD fence` statements a `schema --apply --json` ran, with outcomes.
fn added_fences(report: &serde_json::Value) -> Vec<(String, String)> {
    report["applied"]
        .as_array()
        .expect("an --apply report lists what it ran")
        .iter()
        .filter(|step| {
            step["statement"]
                .as_str()
                .is_some_and(|s| s.ends_with("ADD fence bigint"))
        })
        .map(|step| {
            (
                step["statement"].as_str().unwrap_or_default().to_string(),
                step["outcome"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn schema_apply_adds_the_fence_column_where_it_is_missing() {
    let e = Endpoint::with_schema().await;
    if !e.is_cluster() {
        eprintln!(
            "skipped: needs a real node (LOCKSHIFT_TEST_CONTACT_POINTS); the local endpoint has \
             no ALTER"
        );
        return;
    }
    let ks = e.keyspace().to_string();
    e.cql()
        .session()
        .query_unpaged(format!("ALTER TABLE {ks}.scratch DROP fence"), ())
        .await
        .expect("drop the column");
    let cell = CellWrite::new("balance", "90");
    let refused = e
        .store()
        .write_fenced(schema::SCRATCH, "acct", &cell, 7)
        .await
        .expect_err("no fence column to write");
    let message = refused.to_string();
    assert!(
        message.contains("migrate schema --apply")
            && message.contains(&format!("ALTER TABLE {ks}.scratch ADD fence bigint")),
        "{message}"
    );

    let first = e.migrate(&["schema", "--apply", "--json"]).await;
    first.expect_code(0);
    assert_eq!(
        added_fences(&first.json()),
        [(
            format!("ALTER TABLE {ks}.scratch ADD fence bigint"),
            "applied".to_string()
        )],
        "only the table without the column"
    );
    let written = e
        .store()
        .write_fenced(schema::SCRATCH, "acct", &cell, 7)
        .await
        .expect("the column is there now");
    assert!(
        matches!(written, FencedOutcome::Applied { .. }),
        "{written:?}"
    );

    let again = e.migrate(&["schema", "--apply", "--json"]).await;
    again.expect_code(0);
    assert_eq!(added_fences(&again.json()), [], "nothing is missing");
}
