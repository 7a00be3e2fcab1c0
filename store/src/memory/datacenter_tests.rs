//! The embedded store's datacenters (`network.rs`): LOCAL is the
//! coordinator's, QUORUM counts every datacenter, links and datacenters
//! fail, hints replay.

use super::*;
use crate::schema::SCRATCH;
use crate::{
    CellWrite, Route, RowQuery, Store, StoreError, StoreErrorKind, Timestamp, Topology,
    WriteOptions,
};

fn dc(name: &str) -> Datacenter {
    Datacenter::new(name).unwrap()
}

fn pinned(name: &str) -> Route {
    Route::Datacenter(dc(name))
}

/// A cluster of dc1 and dc2 (RF 3 each), and a client handle in each.
fn two() -> (MemoryStore, MemoryStore, MemoryStore) {
    let cluster = MemoryStore::new().with_datacenters(vec![(dc("dc1"), 3), (dc("dc2"), 3)], 7);
    let a = cluster.client_in(&dc("dc1")).unwrap();
    let b = cluster.client_in(&dc("dc2")).unwrap();
    (cluster, a, b)
}

async fn put(store: &MemoryStore, route: &Route, column: &str, ts: i64) -> Result<(), StoreError> {
    store
        .write_via(
            route,
            SCRATCH,
            "r",
            &[CellWrite::new(column, b"v".to_vec())],
            WriteOptions::at(Timestamp::from_micros(ts)),
        )
        .await
}

async fn columns(store: &MemoryStore, route: &Route) -> Result<Vec<String>, StoreError> {
    Ok(store
        .read_via(route, SCRATCH, "r", &RowQuery::all())
        .await?
        .into_iter()
        .map(|c| c.column)
        .collect())
}

#[tokio::test]
async fn local_quorum_is_the_coordinators_datacenter() {
    let (cluster, a, b) = two();
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    put(&a, &pinned("dc1"), "a", 1).await.unwrap();
    put(&b, &pinned("dc2"), "b", 2).await.unwrap();
    // Each side sees only its own write: two "quorums" that do not meet.
    assert_eq!(columns(&a, &pinned("dc1")).await.unwrap(), ["a"]);
    assert_eq!(columns(&b, &pinned("dc2")).await.unwrap(), ["b"]);
    // Neither client reaches the other side's coordinators.
    let e = columns(&b, &pinned("dc1")).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Connection, "{e}");
    assert!(
        e.to_string().contains("dc1") && e.to_string().contains("dc2"),
        "{e}"
    );
    // Once the link is back, the hints replay and both sides agree.
    cluster.restore_link(&dc("dc1"), &dc("dc2"));
    assert_eq!(columns(&a, &pinned("dc1")).await.unwrap(), ["a", "b"]);
    assert_eq!(columns(&b, &pinned("dc2")).await.unwrap(), ["a", "b"]);
}

#[tokio::test]
async fn quorum_counts_every_datacenter_so_a_split_leaves_none() {
    let (cluster, a, b) = two();
    put(&a, &Route::Default, "a", 1).await.unwrap();
    assert_eq!(columns(&b, &Route::Default).await.unwrap(), ["a"]);
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    for client in [&a, &b] {
        let e = put(client, &Route::Default, "x", 2).await.unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
        assert!(e.to_string().contains("QUORUM needs 4 of 6"), "{e}");
        let e = columns(client, &Route::Default).await.unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    }
    // A LOCAL_QUORUM in the bigger half is still a quorum of its own.
    let lopsided = MemoryStore::new().with_datacenters(vec![(dc("dc1"), 3), (dc("dc2"), 1)], 1);
    lopsided.cut_link(&dc("dc1"), &dc("dc2"));
    let big = lopsided.client_in(&dc("dc1")).unwrap();
    put(&big, &Route::Default, "a", 1).await.unwrap();
}

#[tokio::test]
async fn a_client_that_names_no_datacenter_meets_a_different_local_quorum_per_request() {
    // The storage link between the datacenters is cut; the client still
    // reaches a coordinator on either side (only port 7000 is down), and
    // its driver prefers neither.
    let cluster = MemoryStore::new().with_datacenters(vec![(dc("dc1"), 1), (dc("dc2"), 1)], 3);
    let unnamed = MemoryStore {
        client: Client {
            datacenter: None,
            names_local: false,
            consistency: Consistency::LocalQuorum,
        },
        ..cluster.client_in(&dc("dc1")).unwrap()
    };
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    let mut missed = 0;
    for i in 0..40 {
        put(&unnamed, &Route::Default, &format!("c{i:02}"), i)
            .await
            .unwrap();
        if !columns(&unnamed, &Route::Default)
            .await
            .unwrap()
            .contains(&format!("c{i:02}"))
        {
            missed += 1;
        }
    }
    assert!(
        missed > 5,
        "reads miss the client's own writes when LOCAL is another datacenter each time: {missed} of 40"
    );
}

#[tokio::test]
async fn a_local_quorum_client_that_named_its_datacenter_never_fails_over() {
    let (cluster, a, _) = two();
    let a = a.with_consistency(Consistency::LocalQuorum);
    cluster.stop_datacenter(&dc("dc1"));
    let e = put(&a, &Route::Default, "a", 1).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Connection, "{e}");
    assert!(e.to_string().contains("never fails over"), "{e}");
    // At QUORUM it may (another coordinator), but 3 of 6 is no quorum.
    let q = cluster.client_in(&dc("dc1")).unwrap();
    let e = put(&q, &Route::Default, "a", 1).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
}

#[tokio::test]
async fn a_datacenter_that_comes_back_with_held_hints_is_stale_until_they_replay() {
    let (cluster, a, b) = two();
    put(&a, &pinned("dc1"), "old", 1).await.unwrap();
    cluster.stop_datacenter(&dc("dc1"));
    put(&b, &pinned("dc2"), "new", 2).await.unwrap();
    cluster.start_datacenter(&dc("dc1"), HintDelivery::Held);
    assert_eq!(columns(&a, &pinned("dc1")).await.unwrap(), ["old"]);
    // A QUORUM read repairs what it reads.
    assert_eq!(columns(&a, &Route::Default).await.unwrap(), ["new", "old"]);
    cluster.deliver_hints();
    assert_eq!(columns(&a, &pinned("dc1")).await.unwrap(), ["new", "old"]);
}

#[tokio::test]
async fn routes_to_unknown_datacenters_are_refused_with_the_known_ones() {
    let (_, a, _) = two();
    let e = put(&a, &pinned("dc9"), "a", 1).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Connection);
    assert!(e.to_string().contains("no datacenter named dc9"), "{e}");
    assert!(e.to_string().contains("dc1, dc2"), "{e}");
    let single = MemoryStore::new();
    put(&single, &pinned(DEFAULT_DATACENTER), "a", 1)
        .await
        .unwrap();
    assert_eq!(
        single.topology(),
        Topology {
            local: None,
            datacenters: vec![dc(DEFAULT_DATACENTER)],
            hosts: vec![crate::Host {
                address: DEFAULT_DATACENTER.to_string(),
                datacenter: Some(dc(DEFAULT_DATACENTER)),
            }],
        }
    );
    assert_eq!(a.topology().local, Some(dc("dc1")));
}
