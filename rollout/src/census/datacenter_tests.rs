//! Issue 40 item 2: across datacenters the census reads each lock where
//! its home rule says, in requests that grow with ranges and home
//! datacenters, never with locks.

use std::sync::Arc;
use std::time::Duration;

use lockshift_store::Consistency;
use lockshift_store::homes::{Configured, HomesRouter, HomesView, refresh};
use lockshift_store::{
    CellWrite, Datacenter, FaultyStore, HintDelivery, MemoryStore, SharedClock, SharedStore,
    TokioClock, WriteOptions,
};

use super::*;
use lockshift_decide::census::Staleness;

fn dc(name: &str) -> Datacenter {
    Datacenter::new(name).unwrap()
}

fn options() -> CensusOptions {
    CensusOptions {
        stale_after: Staleness::uniform(Duration::from_secs(3600)),
        clock_skew_margin: Duration::from_secs(5),
        page_size: NonZeroU32::new(1000).unwrap(),
        reader: None,
    }
}

/// Locks named `a-…` are homed in dc1 (the default rule), `b-…` in dc2.
fn homes() -> Configured {
    Configured::new(Some(dc("dc1")), [("b-".to_string(), dc("dc2"))])
}

struct Side {
    client: Arc<FaultyStore<MemoryStore>>,
    view: Arc<HomesView>,
    router: SharedStore,
}

fn side(cluster: &MemoryStore, clock: &SharedClock, place: &str) -> Side {
    let client = Arc::new(FaultyStore::new(cluster.client_in(&dc(place)).unwrap(), 3));
    let view = Arc::new(HomesView::new(
        clock.clone(),
        Some(dc(place)),
        homes(),
        Duration::from_secs(30),
    ));
    let router: SharedStore = Arc::new(HomesRouter::new(client.clone(), view.clone()));
    Side {
        client,
        view,
        router,
    }
}

/// A dc1/dc2 cluster whose homes are seeded and serve, and a process on
/// each side.
async fn cluster() -> (Arc<MemoryStore>, SharedClock, Side, Side) {
    let clock: SharedClock = Arc::new(TokioClock::new());
    let cluster = Arc::new(
        MemoryStore::with_clock(clock.clone())
            .with_datacenters(vec![(dc("dc1"), 3), (dc("dc2"), 3)], 1),
    );
    let here = side(&cluster, &clock, "dc1");
    let far = side(&cluster, &clock, "dc2");
    let report = refresh(&here.router, &here.view).await;
    crate::homes::seed(
        &here.router,
        &here.view,
        &report,
        "me",
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(61)).await;
    refresh(&here.router, &here.view).await;
    refresh(&far.router, &far.view).await;
    (cluster, clock, here, far)
}

/// Lock `name` held: one `main` cell, written through `store` (its home).
async fn hold(store: &SharedStore, clock: &SharedClock, name: &str) {
    store
        .write(
            schema::MAIN,
            name,
            &[CellWrite::new("node/0000000000000001", b"queue".to_vec())],
            WriteOptions::at(clock.now()),
        )
        .await
        .unwrap();
}

async fn plant(side: &Side, clock: &SharedClock, n: usize) {
    for i in 0..n / 2 {
        hold(&side.router, clock, &format!("a-{i}")).await;
        hold(&side.router, clock, &format!("b-{i}")).await;
    }
}

async fn census_of(store: &dyn Store, clock: &SharedClock) -> Census {
    take_census(store, clock.as_ref(), &[], options(), &|_| false, |_, _| {})
        .await
        .unwrap()
}

fn by_dc(census: &Census) -> Vec<(String, u64)> {
    census
        .requests_by_datacenter()
        .into_iter()
        .map(|(dc, n)| (dc.map_or("default".into(), String::from), n))
        .collect()
}

/// 200 and 2 000 locks, half homed in each datacenter: every lock counted,
/// from its home's scan; the same requests by datacenter for both, every
/// one a page of a scan (no read by key), and what the census says it sent
/// is what the client sent.
#[tokio::test(start_paused = true)]
async fn requests_by_datacenter_do_not_grow_with_the_locks() {
    let mut seen = Vec::new();
    for n in [200, 2000] {
        let (_cluster, clock, here, _far) = cluster().await;
        plant(&here, &clock, n).await;
        here.client.reset_counts();
        let census = census_of(here.router.as_ref(), &clock).await;
        assert_eq!(census.tally.held, n, "every lock, once");
        assert!(census.unreadable.is_empty(), "{:?}", census.unreadable);
        let sent = here.client.counts_by_datacenter();
        let counted: std::collections::BTreeMap<String, u64> = by_dc(&census).into_iter().collect();
        assert_eq!(sent, counted, "the census counts what it sends");
        let reads = here.client.op_counts();
        assert_eq!(
            reads.get(schema::MAIN, lockshift_store::OpKind::Read),
            0,
            "no lock is read by key"
        );
        // One page a range, table and home datacenter.
        let per_dc = u64::from(RANGES) * 3;
        assert_eq!(
            by_dc(&census),
            vec![("dc1".into(), per_dc), ("dc2".into(), per_dc)]
        );
        seen.push(by_dc(&census));
    }
    assert_eq!(seen[0], seen[1], "ten times the locks, the same requests");
}

/// A lock written at its home alone (`LOCAL_QUORUM` in dc2 while dc1 was
/// down, its hints held) is counted by a census taken in dc1: it is read
/// from dc2's scan. The control: a census at dc1's own quorum, as before,
/// misses it.
#[tokio::test(start_paused = true)]
async fn a_lock_only_its_home_holds_is_counted_from_its_home() {
    let (cluster, clock, here, far) = cluster().await;
    plant(&here, &clock, 20).await;
    cluster.stop_datacenter(&dc("dc1"));
    hold(&far.router, &clock, "b-home-only").await;
    cluster.start_datacenter(&dc("dc1"), HintDelivery::Held);
    refresh(&here.router, &here.view).await;

    let census = census_of(here.router.as_ref(), &clock).await;
    assert_eq!(census.tally.held, 21, "{:?}", census.unreadable);
    assert!(census.unreadable.is_empty(), "{:?}", census.unreadable);

    // The control: every lock read at the census taker's own quorum.
    let local = cluster
        .client_in(&dc("dc1"))
        .unwrap()
        .with_consistency(Consistency::LocalQuorum);
    let old = census_of(&local, &clock).await;
    assert_eq!(old.tally.held, 20, "dc1's quorum has not seen it");
}

/// A home out of reach: its scans fail over a few ranges, the rest of its
/// ranges are not sent, its locks are named unreadable where the client's
/// own scan saw them, and the census goes on with the others.
#[tokio::test(start_paused = true)]
async fn a_home_out_of_reach_leaves_its_ranges_unread_and_the_census_goes_on() {
    let (cluster, clock, here, _far) = cluster().await;
    plant(&here, &clock, 40).await;
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    here.client.reset_counts();
    let census = census_of(here.router.as_ref(), &clock).await;
    assert_eq!(census.tally.held, 20, "dc1's locks are counted");
    let named: BTreeSet<&str> = census
        .unreadable
        .iter()
        .filter_map(|r| r.lock.as_deref())
        .collect();
    assert_eq!(named.len(), 20, "each of dc2's locks, once: {named:?}");
    assert!(named.iter().all(|l| l.starts_with("b-")), "{named:?}");
    let ranges: Vec<&UnreadableRow> = census
        .unreadable
        .iter()
        .filter(|r| r.lock.is_none())
        .collect();
    assert_eq!(ranges.len(), 3, "one entry a table: {ranges:?}");
    assert!(ranges[0].reason.contains("dc2"), "{ranges:?}");
    let sent = here.client.counts_by_datacenter();
    let to_dc2 = sent.get("dc2").copied().unwrap_or(0);
    assert!(
        to_dc2 < u64::from(RANGES) * 3,
        "the unanswered datacenter is not asked range after range: {sent:?}"
    );
}
