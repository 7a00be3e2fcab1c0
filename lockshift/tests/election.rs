//! Leader election on the facade: campaign, proclaim, leader, observe,
//! resign — on the embedded store and the paused clock.

use std::sync::Arc;
use std::time::Duration;

use lockshift::prelude::*;
use lockshift::{CampaignError, OBSERVE_EVERY};

mod common;

use common::{node, world};

/// One leader at a time, in arrival order; observers and readers see each
/// one, with its value and a token greater than the one before.
#[tokio::test(start_paused = true)]
async fn candidates_lead_in_turn_and_everyone_sees_who_leads() {
    let w = world();
    let (a, b, o) = (
        node(&w, "a").await,
        node(&w, "b").await,
        node(&w, "o").await,
    );
    let seen_by_o = o.election("scheduler").unwrap();
    assert_eq!(seen_by_o.leader().await.unwrap(), None);
    let mut watch = seen_by_o.observe();
    assert_eq!(watch.changed().await, Some(None), "first read: nobody");

    let first = a
        .election("scheduler")
        .unwrap()
        .campaign("http://a:8080", AcquireOptions::default())
        .await
        .unwrap();
    assert_eq!(first.election().name().as_str(), "scheduler");
    let seen = seen_by_o.leader().await.unwrap().expect("a leads");
    assert_eq!(
        (seen.node.as_str(), seen.value.as_str()),
        ("a", "http://a:8080")
    );
    assert_eq!(seen.token, first.token());
    assert_eq!(&seen, first.leader());
    let started = tokio::time::Instant::now();
    let changed = watch.changed().await.unwrap().expect("a leads");
    assert_eq!(changed.node, "a");
    assert!(
        started.elapsed() <= OBSERVE_EVERY,
        "{:?}",
        started.elapsed()
    );

    // b waits its turn while a leads.
    let b_campaign = tokio::spawn({
        let election = b.election("scheduler").unwrap();
        async move {
            election
                .campaign("http://b:8080", AcquireOptions::default())
                .await
        }
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!b_campaign.is_finished(), "b waits while a leads");
    assert_eq!(watch.current().map(|l| l.node), Some("a".into()));

    first.resign().await.unwrap();
    let second = b_campaign.await.unwrap().unwrap();
    assert!(second.token() > seen.token, "tokens grow with each leader");
    let started = tokio::time::Instant::now();
    let next = loop {
        match watch.changed().await.unwrap() {
            Some(l) if l.node == "b" => break l,
            _ => {}
        }
    };
    assert!(
        started.elapsed() <= OBSERVE_EVERY * 2,
        "{:?}",
        started.elapsed()
    );
    assert_eq!(next.token, second.token());
    second.resign().await.unwrap();
    assert_eq!(seen_by_o.leader().await.unwrap(), None, "nobody leads");
    for n in [a, b, o] {
        n.shutdown().await;
    }
}

/// A leader whose node shuts down is told, and its record goes with the
/// lock; a value no observer should print is refused before anything is
/// taken.
#[tokio::test(start_paused = true)]
async fn a_leader_is_told_when_it_stops_leading_and_bad_values_are_refused() {
    let w = world();
    let a = node(&w, "a").await;
    let election = a.election("scheduler").unwrap();
    let err = election
        .campaign("a\u{7}b", AcquireOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, CampaignError::InvalidValue { .. }), "{err}");
    assert!(err.to_string().contains("control character"), "{err}");
    let err = a.election("sched uler ").unwrap_err();
    assert!(matches!(err, AcquireError::InvalidLockId(_)), "{err}");

    let leading = election
        .campaign("", AcquireOptions::default())
        .await
        .unwrap();
    assert!(!leading.is_lost());
    a.shutdown().await;
    assert!(leading.is_lost(), "shutdown revokes the leadership");
    let o = node(&w, "o").await;
    assert_eq!(
        o.election("scheduler").unwrap().leader().await.unwrap(),
        None
    );
    o.shutdown().await;
}

/// A leader that stops renewing (its process paused, or cut off from the
/// store) loses the lock after its lease: the next candidate leads with a
/// greater token, and observers follow — even while the former leader's
/// record has not expired, the greater token leads.
#[tokio::test(start_paused = true)]
async fn a_leader_that_stops_renewing_is_replaced_and_observers_follow() {
    let w = world();
    let (b, o) = (node(&w, "b").await, node(&w, "o").await);
    // The first leader runs over a store that goes dark.
    let dark = Arc::new(lockshift_store::FaultyStore::new(w.store.clone(), 3));
    let mut settings = Settings::default();
    settings.node.id = Some("a".to_string());
    let a = Node::builder()
        .settings(settings)
        .store(dark.clone())
        .clock(w.clock.clone())
        .start()
        .await
        .unwrap();
    let first = a
        .election("scheduler")
        .unwrap()
        .campaign("", AcquireOptions::default())
        .await
        .unwrap();
    let mut watch = o.election("scheduler").unwrap().observe();
    let b_campaign = tokio::spawn({
        let election = b.election("scheduler").unwrap();
        async move { election.campaign("", AcquireOptions::default()).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    dark.set_plan(lockshift_store::FaultPlan {
        fail_before: 1.0,
        ..Default::default()
    });
    first.until_lost().await;
    let second = b_campaign.await.unwrap().unwrap();
    assert!(second.token() > first.token());
    let next = loop {
        match watch.changed().await.unwrap() {
            Some(l) if l.node == "b" => break l,
            _ => {}
        }
    };
    assert_eq!(next.token, second.token());
    second.resign().await.unwrap();
    for n in [a, b, o] {
        n.shutdown().await;
    }
}

/// A record's column is the acquisition's mark, reused per process: after
/// hundreds of terms by two processes, a read of who leads passes a
/// handful of tombstones, as after the first few — not one per term.
#[tokio::test(start_paused = true)]
async fn who_leads_costs_the_same_after_many_terms() {
    use lockshift_store::{RowQuery, Store, schema};
    let w = world();
    let nodes = [node(&w, "a").await, node(&w, "b").await];
    let passed = || async {
        w.store
            .read_observed(
                schema::GLOBAL_TIME,
                "scheduler",
                &RowQuery::first(16).starting_at("leader:"),
            )
            .await
            .unwrap()
            .tombstones
            .unwrap()
    };
    let mut after = Vec::new();
    for term in 0..400 {
        let leading = nodes[term % 2]
            .election("scheduler")
            .unwrap()
            .campaign("", AcquireOptions::default())
            .await
            .unwrap();
        leading.resign().await.unwrap();
        if term == 9 || term == 399 {
            after.push(passed().await);
        }
    }
    assert!(
        after[1] <= after[0].max(4),
        "tombstones after 10 and 400 terms: {after:?}"
    );
    for n in nodes {
        n.shutdown().await;
    }
}

/// A leader proclaims a new value and readers see it; a guard of another
/// lock cannot proclaim in the election, and a guard of the election's lock
/// taken as a plain lock can.
#[tokio::test(start_paused = true)]
async fn a_leader_proclaims_and_only_the_election_lock_can() {
    let w = world();
    let (a, o) = (node(&w, "a").await, node(&w, "o").await);
    let election = a.election("scheduler").unwrap();
    let mut leading = election
        .campaign("v1", AcquireOptions::default())
        .await
        .unwrap();
    let now = leading.proclaim("v2").await.unwrap().clone();
    assert_eq!(now.value, "v2");
    assert_eq!(leading.leader(), &now);
    let read = o.election("scheduler").unwrap().leader().await.unwrap();
    assert_eq!(read.map(|l| l.value), Some("v2".to_string()));
    let err = leading.proclaim("bad\u{0}").await.unwrap_err();
    assert!(matches!(err, CampaignError::InvalidValue { .. }), "{err}");
    assert_eq!(
        leading.leader().value,
        "v2",
        "a refused value changes nothing"
    );
    leading.resign().await.unwrap();

    let other = a.acquire("reports").await.unwrap();
    let err = election.proclaim(&other, "x").await.unwrap_err();
    assert!(matches!(err, CampaignError::OtherLock { .. }), "{err}");
    assert!(err.to_string().contains("reports"), "{err}");
    other.release().await.unwrap();

    let plain = a.acquire("scheduler").await.unwrap();
    let leader = election.proclaim(&plain, "by hand").await.unwrap();
    assert_eq!(leader.token, plain.fencing_token().await.unwrap());
    let read = o.election("scheduler").unwrap().leader().await.unwrap();
    assert_eq!(read, Some(leader));
    plain.release().await.unwrap();
    for n in [a, o] {
        n.shutdown().await;
    }
}
