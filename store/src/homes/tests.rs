//! The router and fenced writes (F1, docs/design.md §5): a request named by
//! its lock goes where the lock's home is when it is sent — whatever row it
//! writes — or is refused unsent; a fenced write pinned to a datacenter is
//! refused; where no home applies a lock's route is the store's default.

use std::sync::Arc;
use std::time::Duration;

use lockshift_decide::home::{HOMES_ROW, HomeRecord, Rule};
use lockshift_decide::id::LockId;

use super::*;
use crate::fenced::{FencedWriteError, FencedWriter};
use crate::{CellWrite, FaultyStore, MemoryStore, RowQuery, Timestamp, TokioClock, WriteOptions};

fn dc(name: &str) -> Datacenter {
    Datacenter::new(name).unwrap()
}

fn lock(name: &str) -> LockId {
    LockId::new(name).unwrap()
}

fn record(version: u64, home: &str, serves_from: i64) -> HomeRecord {
    HomeRecord {
        version,
        datacenter: dc(home),
        serves_from,
        moved_from: None,
        forced: false,
        at: 0,
        by: "test".into(),
        pending: false,
    }
}

/// Writes `records` into the homes row of every datacenter `cluster`
/// reaches, stamped `at`.
async fn record_homes(cluster: &MemoryStore, records: &[(Rule, HomeRecord)], at: i64) {
    let cells: Vec<CellWrite> = records
        .iter()
        .map(|(rule, record)| CellWrite::new(rule.key(), serde_json::to_vec(record).unwrap()))
        .collect();
    cluster
        .write(
            schema::ROLLOUT,
            HOMES_ROW,
            &cells,
            WriteOptions::at(Timestamp::from_micros(at)),
        )
        .await
        .unwrap();
}

/// A dc1/dc2 cluster on the paused clock: the default rule homed in dc1,
/// prefix `eu/` in dc2, both serving.
async fn cluster() -> (Arc<MemoryStore>, SharedClock) {
    let clock = Arc::new(TokioClock::new());
    let cluster = Arc::new(
        MemoryStore::with_clock(clock.clone())
            .with_datacenters(vec![(dc("dc1"), 3), (dc("dc2"), 3)], 1),
    );
    record_homes(
        &cluster,
        &[
            (Rule::Default, record(1, "dc1", 0)),
            (Rule::Prefix("eu/".into()), record(1, "dc2", 0)),
        ],
        100,
    )
    .await;
    (cluster, clock)
}

/// A process in `place`: its counting client and its router (views
/// confirmed for 30 s), refreshed once.
async fn process(
    cluster: &MemoryStore,
    clock: &SharedClock,
    place: &str,
) -> (Arc<FaultyStore<MemoryStore>>, Arc<HomesRouter>) {
    let client = Arc::new(FaultyStore::new(cluster.client_in(&dc(place)).unwrap(), 7));
    let view = Arc::new(HomesView::new(
        clock.clone(),
        Some(dc(place)),
        Configured::default(),
        Duration::from_secs(30),
    ));
    let router = Arc::new(HomesRouter::new(client.clone(), view.clone()));
    let shared: SharedStore = router.clone();
    refresh(&shared, &view).await;
    (client, router)
}

fn balance(v: &str) -> CellWrite {
    CellWrite::new("balance", v.to_string())
}

fn writer(router: &Arc<HomesRouter>, name: &str, token: u64) -> FencedWriter {
    FencedWriter::for_lock(router.clone(), &lock(name), token)
}

/// How many fenced writes `client` has sent to `dc` (or on the default
/// route: "default").
fn fenced_at(client: &FaultyStore<MemoryStore>, dc: &str) -> u64 {
    client
        .counts_by_datacenter_of(Some(&[schema::SCRATCH]))
        .get(dc)
        .copied()
        .unwrap_or(0)
}

#[tokio::test(start_paused = true)]
async fn a_fenced_write_goes_to_its_locks_home_whatever_row_it_writes() {
    let (cluster, clock) = cluster().await;
    let (client, router) = process(&cluster, &clock, "dc1").await;
    // One scratch row, written under two locks homed apart: each write
    // goes to its own lock's home, at LOCAL_SERIAL there.
    writer(&router, "us/1", 5)
        .write(schema::SCRATCH, "acct-3", &balance("1"))
        .await
        .unwrap();
    assert_eq!(fenced_at(&client, "dc1"), 1);
    writer(&router, "eu/1", 6)
        .write(schema::SCRATCH, "acct-3", &balance("2"))
        .await
        .unwrap();
    assert_eq!(fenced_at(&client, "dc2"), 1);
    assert_eq!(fenced_at(&client, "default"), 0, "never the default route");
    assert_eq!(writer(&router, "eu/1", 6).lock(), Some(&lock("eu/1")));
    // Routed as the lock's own rows: a lock named like the rollout lock is
    // the fleet's, at the default rule's home.
    let fleet = Route::HomeOf(lock(lockshift_decide::rollout::ROLLOUT_LOCK));
    let routed = router
        .route(&fleet, OpKind::FencedWrite, schema::SCRATCH, "eu/x")
        .await;
    assert_eq!(routed, Ok(Route::Datacenter(dc("dc1"))));
    // Every kind of request named by a lock is routed alike.
    let read = router
        .route(
            &Route::HomeOf(lock("eu/2")),
            OpKind::Read,
            schema::SCRATCH,
            "us/row",
        )
        .await;
    assert_eq!(read, Ok(Route::Datacenter(dc("dc2"))));
}

#[tokio::test(start_paused = true)]
async fn a_fenced_write_is_refused_unsent_while_its_locks_home_is_unconfirmed() {
    let (cluster, clock) = cluster().await;
    let (client, router) = process(&cluster, &clock, "dc1").await;
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    tokio::time::sleep(Duration::from_secs(31)).await;
    let shared: SharedStore = router.clone();
    refresh(&shared, router.view()).await;
    // The lock homed here is written; the one homed across the cut is not
    // — nothing of it is sent, and the refusal names its home.
    writer(&router, "us/1", 5)
        .write(schema::SCRATCH, "acct-3", &balance("1"))
        .await
        .unwrap();
    let e = writer(&router, "eu/1", 6)
        .write(schema::SCRATCH, "acct-3", &balance("2"))
        .await
        .unwrap_err();
    let FencedWriteError::Store(store) = &e else {
        panic!("refused by the route, not by a token: {e}")
    };
    assert_eq!(store.kind(), StoreErrorKind::HomeUnreachable, "{e}");
    assert!(!store.may_have_applied());
    assert!(
        e.to_string()
            .contains("lock \"eu/1\" is homed in datacenter dc2")
            && e.to_string().contains("(in dc1) has not reached"),
        "{e}"
    );
    assert_eq!(fenced_at(&client, "dc2"), 0, "nothing sent to dc2");
    assert_eq!(fenced_at(&client, "default"), 0, "nor anywhere else");
}

#[tokio::test(start_paused = true)]
async fn a_fenced_write_waits_for_a_moved_home_to_serve() {
    let (cluster, clock) = cluster().await;
    let now = clock.now().as_micros();
    let mut moved = record(2, "dc2", now + 60_000_000);
    moved.moved_from = Some(dc("dc1"));
    record_homes(&cluster, &[(Rule::Default, moved)], 200).await;
    let (client, router) = process(&cluster, &clock, "dc2").await;
    let e = writer(&router, "us/1", 5)
        .write(schema::SCRATCH, "acct-3", &balance("1"))
        .await
        .unwrap_err();
    let FencedWriteError::Store(store) = &e else {
        panic!("refused by the route: {e}")
    };
    assert_eq!(store.kind(), StoreErrorKind::HomeMoving, "{e}");
    assert!(store.is_retryable() && !store.was_sent(), "{e}");
    assert_eq!(store.retry_after(), Some(Duration::from_secs(60)), "{e}");
    assert!(
        e.to_string().contains("moving from dc1 to datacenter dc2"),
        "{e}"
    );
    assert_eq!(fenced_at(&client, "dc1") + fenced_at(&client, "dc2"), 0);
    tokio::time::sleep(Duration::from_secs(61)).await;
    let shared: SharedStore = router.clone();
    refresh(&shared, router.view()).await;
    writer(&router, "us/1", 5)
        .write(schema::SCRATCH, "acct-3", &balance("1"))
        .await
        .unwrap();
    assert_eq!(fenced_at(&client, "dc2"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_fenced_write_pinned_to_a_datacenter_is_refused() {
    let (cluster, clock) = cluster().await;
    let (client, router) = process(&cluster, &clock, "dc1").await;
    let e = router
        .write_fenced_via(
            &Route::Datacenter(dc("dc1")),
            schema::SCRATCH,
            "acct-3",
            &balance("1"),
            5,
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Invalid, "{e}");
    assert!(
        e.to_string().contains("pinned to datacenter dc1")
            && e.to_string().contains("names its lock"),
        "{e}"
    );
    assert_eq!(fenced_at(&client, "dc1"), 0);
    // Other requests pinned to a datacenter go as pinned.
    router
        .read_via(
            &Route::Datacenter(dc("dc2")),
            schema::SCRATCH,
            "acct-3",
            &RowQuery::all(),
        )
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn without_homes_a_locks_route_is_the_default() {
    // One datacenter, nothing recorded: the store's default route.
    let clock: SharedClock = Arc::new(TokioClock::new());
    let store = Arc::new(FaultyStore::new(MemoryStore::with_clock(clock.clone()), 7));
    let view = Arc::new(HomesView::new(
        clock,
        None,
        Configured::default(),
        Duration::from_secs(30),
    ));
    let router = Arc::new(HomesRouter::new(store.clone(), view.clone()));
    let shared: SharedStore = router.clone();
    refresh(&shared, &view).await;
    writer(&router, "X", 3)
        .write(schema::SCRATCH, "acct-3", &balance("1"))
        .await
        .unwrap();
    let late = writer(&router, "X", 2)
        .write(schema::SCRATCH, "acct-3", &balance("0"))
        .await
        .unwrap_err();
    assert!(late.is_refused(), "{late}");
    assert_eq!(fenced_at(&store, "default"), 2);
}

/// A layer that names only what it wraps answers as that store does: its
/// description and datacenters are the client's, and over a router it has
/// the router's homes view, which the census plans its scans by.
#[tokio::test(start_paused = true)]
async fn a_layer_over_a_router_has_its_homes_and_its_clients_topology() {
    let (cluster, clock) = cluster().await;
    let (client, router) = process(&cluster, &clock, "dc1").await;
    let layer = FaultyStore::new(router.clone(), 1);
    let view = layer.homes().expect("the router's view, through the layer");
    assert!(Arc::ptr_eq(&view, router.view()));
    assert_eq!(layer.topology(), client.topology());
    assert_eq!(layer.topology().datacenters, vec![dc("dc1"), dc("dc2")]);
    assert!(
        layer.describe().starts_with("embedded"),
        "{}",
        layer.describe()
    );
    assert!(
        client.homes().is_none(),
        "a client under no router has no homes"
    );
    assert!(cluster.wraps().is_none(), "a backend wraps nothing");
}
