//! Lightweight transactions through the real `scylla` driver: the lease
//! users build with `IF NOT EXISTS` / `IF owner = ?`, the `[applied]` answer
//! the driver decodes, and one winner among concurrent acquisitions.

// Test helpers: a failed unwrap is a failed test (clippy only exempts #[test] fns).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use scylla::client::session::Session;
use scylla::response::query_result::QueryRowsResult;
use scylla::statement::prepared::PreparedStatement;

async fn leases(s: &Session) {
    s.query_unpaged(
        "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        &(),
    )
    .await
    .unwrap();
    s.query_unpaged(
        "CREATE TABLE IF NOT EXISTS ks.leases (name text PRIMARY KEY, owner text)",
        &(),
    )
    .await
    .unwrap();
}

struct Lease {
    acquire: PreparedStatement,
    renew: PreparedStatement,
    release: PreparedStatement,
}

impl Lease {
    async fn prepare(s: &Session) -> Lease {
        Lease {
            acquire: s
                .prepare(
                    "INSERT INTO ks.leases (name, owner) VALUES (?, ?) IF NOT EXISTS USING TTL ?",
                )
                .await
                .unwrap(),
            renew: s
                .prepare("UPDATE ks.leases USING TTL ? SET owner = ? WHERE name = ? IF owner = ?")
                .await
                .unwrap(),
            release: s
                .prepare("DELETE FROM ks.leases WHERE name = ? IF owner = ?")
                .await
                .unwrap(),
        }
    }
}

fn names(r: &QueryRowsResult) -> Vec<String> {
    r.column_specs()
        .iter()
        .map(|c| c.name().to_string())
        .collect()
}

#[tokio::test]
async fn a_lease_over_the_driver_answers_applied_and_the_current_owner() {
    for metadata in MODES {
        let (e, clock) = endpoint().await;
        let s = session(e.local_addr(), metadata).await;
        leases(&s).await;
        let l = Lease::prepare(&s).await;

        let r = s
            .execute_unpaged(&l.acquire, ("a", "x", 10i32))
            .await
            .unwrap()
            .into_rows_result()
            .unwrap();
        assert_eq!(names(&r), ["[applied]"]);
        assert_eq!(r.single_row::<(bool,)>().unwrap(), (true,));

        let r = s
            .execute_unpaged(&l.acquire, ("a", "y", 10i32))
            .await
            .unwrap()
            .into_rows_result()
            .unwrap();
        assert_eq!(names(&r), ["[applied]", "name", "owner"]);
        assert_eq!(
            r.single_row::<(bool, String, String)>().unwrap(),
            (false, "a".to_string(), "x".to_string())
        );

        let renew = |owner: &'static str| (10i32, owner, "a", owner);
        let r = s
            .execute_unpaged(&l.renew, renew("y"))
            .await
            .unwrap()
            .into_rows_result()
            .unwrap();
        assert_eq!(names(&r), ["[applied]", "owner"]);
        assert_eq!(
            r.single_row::<(bool, Option<String>)>().unwrap(),
            (false, Some("x".to_string()))
        );
        let r = s
            .execute_unpaged(&l.renew, renew("x"))
            .await
            .unwrap()
            .into_rows_result()
            .unwrap();
        assert_eq!(r.single_row::<(bool,)>().unwrap(), (true,));

        let r = s
            .execute_unpaged(&l.release, ("a", "y"))
            .await
            .unwrap()
            .into_rows_result()
            .unwrap();
        assert_eq!(
            r.single_row::<(bool, Option<String>)>().unwrap(),
            (false, Some("x".to_string()))
        );
        let r = s
            .execute_unpaged(&l.release, ("a", "x"))
            .await
            .unwrap()
            .into_rows_result()
            .unwrap();
        assert_eq!(r.single_row::<(bool,)>().unwrap(), (true,));

        // A lease its holder stopped renewing expires with its TTL.
        s.execute_unpaged(&l.acquire, ("b", "x", 2i32))
            .await
            .unwrap();
        clock.advance(Duration::from_secs(2));
        let r = s
            .execute_unpaged(&l.acquire, ("b", "y", 2i32))
            .await
            .unwrap()
            .into_rows_result()
            .unwrap();
        assert_eq!(
            r.single_row::<(bool,)>().unwrap(),
            (true,),
            "metadata={metadata}"
        );
    }
}

#[tokio::test]
async fn concurrent_acquisitions_of_one_lease_have_exactly_one_winner() {
    let (e, _) = endpoint().await;
    let s = Arc::new(session(e.local_addr(), false).await);
    leases(&s).await;
    let l = Arc::new(Lease::prepare(&s).await);
    for round in 0..10 {
        let name = format!("lease-{round}");
        let mut tasks = Vec::new();
        for owner in 0..12 {
            let (s, l, name) = (s.clone(), l.clone(), name.clone());
            tasks.push(tokio::spawn(async move {
                let r = s
                    .execute_unpaged(&l.acquire, (name.as_str(), format!("o{owner}"), 30i32))
                    .await
                    .unwrap()
                    .into_rows_result()
                    .unwrap();
                // Applied: `[applied]` alone; lost: with the winner's row.
                let applied = if r.column_specs().len() == 1 {
                    r.single_row::<(bool,)>().unwrap().0
                } else {
                    r.single_row::<(bool, String, String)>().unwrap().0
                };
                applied.then(|| format!("o{owner}"))
            }));
        }
        let mut winners = Vec::new();
        for t in tasks {
            if let Some(w) = t.await.unwrap() {
                winners.push(w);
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        let (owner,) = s
            .query_unpaged(
                "SELECT owner FROM ks.leases WHERE name = ?",
                (name.as_str(),),
            )
            .await
            .unwrap()
            .into_rows_result()
            .unwrap()
            .single_row::<(String,)>()
            .unwrap();
        assert_eq!(owner, winners[0]);
    }
}
