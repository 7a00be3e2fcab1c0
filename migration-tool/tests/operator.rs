//! End-to-end tests of the operator paths that must never break a holder,
//! and of the small operator-facing promises of issue 11 (exit codes,
//! output, schema), against the built `migrate` binary and a local
//! endpoint. (`e2e.rs` holds the first round of e2e tests.)

// Integration tests: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::Endpoint;
use lockshift_combined::registry::{LeasePromise, NodeInfo, heartbeat};
use lockshift_combined::{Mode, Stage};
use lockshift_lock::Algorithm;
use lockshift_store::{CellWrite, Clock, RowQuery, SystemClock, Ttl, WriteOptions, schema};

/// A registry entry for a live node announcing `promise`.
fn node_info(node: &str, promise: Option<LeasePromise>) -> NodeInfo {
    NodeInfo {
        node: node.into(),
        version: "0.1.0".into(),
        configured_mode: Mode::Combined,
        effective: Algorithm::Combined,
        degraded: false,
        seen_stage: Some(Stage::Legacy),
        seen_version: Some(0),
        started_at: 0,
        last_used: BTreeMap::new(),
        lease: promise,
    }
}

/// Issue 11 item 2, the reported schedule: a holder renewing every 60 s
/// (TTL 5 min) whose cell was last renewed 36 s ago, and an operator
/// running `clean --apply` without the fleet's config (default
/// `renew_every` 10 s). The holder's node is live, so its cells stay —
/// even once overdue by its own promise, unless `--force`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_never_deletes_the_cells_of_a_live_holder() {
    let e = Endpoint::with_schema().await;
    let store = e.store().clone();
    let promise = LeasePromise {
        ttl_ms: 300_000,
        renew_every_ms: 60_000,
    };
    heartbeat(
        store.as_ref(),
        &SystemClock,
        &node_info("batch-1", Some(promise)),
        Ttl::from_secs(120).unwrap(),
    )
    .await
    .unwrap();
    let renewed_ago = |lock: &'static str, owner: &'static str, secs: u64| {
        let store = store.clone();
        async move {
            let at = SystemClock.now().saturating_sub(Duration::from_secs(secs));
            store
                .write(
                    schema::MAIN,
                    lock,
                    &[CellWrite::new(owner, b"combined".to_vec())],
                    WriteOptions::at(at).with_ttl(Ttl::from_secs(300).unwrap()),
                )
                .await
                .unwrap();
        }
    };
    renewed_ago("report", "batch-1/0000000000000001", 36).await;
    renewed_ago("archive", "batch-1/0000000000000002", 200).await;
    let present = |lock: &'static str| {
        let store = store.clone();
        async move {
            store
                .read(schema::MAIN, lock, &RowQuery::all())
                .await
                .unwrap()
                .len()
                == 1
        }
    };

    let j = e
        .migrate(&["clean", "--apply", "--json"])
        .await
        .expect_code(0)
        .json();
    assert!(
        present("report").await,
        "a holder within its promise: {j:#}"
    );
    assert!(present("archive").await, "a live node's cell: {j:#}");
    assert_eq!(j["summary"]["deleted"], 0, "{j:#}");
    let cells = j["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "only the overdue one is listed: {j:#}");
    assert_eq!(cells[0]["lock"], "archive");
    assert_eq!(cells[0]["action"], "kept_owner_live");
    assert_eq!(cells[0]["promise"]["source"], "registry");
    assert_eq!(cells[0]["promise"]["renew_every_ms"], 60_000);
    e.migrate(&["clean"])
        .await
        .expect_code(0)
        .stdout_has("KEPT (owner's node is live)")
        .stdout_has("--force deletes them at the risk of a second holder");

    // --force: the operator knows better; only what the owner's own
    // promise calls overdue goes.
    let j = e
        .migrate(&["clean", "--apply", "--force", "--json"])
        .await
        .expect_code(0)
        .json();
    assert_eq!(j["summary"]["deleted"], 1, "{j:#}");
    assert!(!present("archive").await);
    assert!(
        present("report").await,
        "within its promise even with --force"
    );
    e.migrate(&["clean", "--help"])
        .await
        .expect_code(0)
        .stdout_has("RISK");
}
