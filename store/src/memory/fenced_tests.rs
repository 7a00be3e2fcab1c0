//! Fenced writes on the embedded store (`memory/fenced.rs`): the token
//! order, the rounds a cluster would take, a delete removing the fence,
//! and datacenters — SERIAL across a split, LOCAL_SERIAL within one.

use super::*;
use crate::schema::SCRATCH;
use crate::{
    CellWrite, FencedOutcome, OpKind, Route, RowQuery, Store, StoreErrorKind, Timestamp,
    WriteOptions,
};

fn balance(v: i64) -> CellWrite {
    CellWrite::new("balance", v.to_string().into_bytes())
}

async fn value(store: &MemoryStore) -> Option<String> {
    store
        .read(SCRATCH, "acct-3", &RowQuery::all())
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.column == "balance")
        .map(|c| String::from_utf8(c.value).unwrap())
}

#[tokio::test]
async fn a_smaller_token_is_refused_an_equal_or_larger_one_written() {
    let store = MemoryStore::new();
    // (token, value, expected outcome, value afterwards)
    let steps = [
        (41, 100, FencedOutcome::Applied { rounds: 2 }, "100"),
        (41, 110, FencedOutcome::Applied { rounds: 1 }, "110"),
        (42, 90, FencedOutcome::Applied { rounds: 1 }, "90"),
        (
            41,
            120,
            FencedOutcome::Refused {
                recorded: 42,
                rounds: 1,
            },
            "90",
        ),
        (
            0,
            1,
            FencedOutcome::Refused {
                recorded: 42,
                rounds: 1,
            },
            "90",
        ),
        (u64::MAX >> 1, 7, FencedOutcome::Applied { rounds: 1 }, "7"),
    ];
    for (i, (token, v, expected, after)) in steps.into_iter().enumerate() {
        let got = store
            .write_fenced(SCRATCH, "acct-3", &balance(v), token)
            .await
            .unwrap();
        assert_eq!(got, expected, "step #{i}");
        assert_eq!(value(&store).await.as_deref(), Some(after), "step #{i}");
    }
    let e = store
        .write_fenced(SCRATCH, "acct-3", &balance(1), u64::MAX)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Invalid);
    assert_eq!(e.op(), OpKind::FencedWrite);
}

#[tokio::test]
async fn the_write_is_stamped_above_every_earlier_version_and_a_delete_drops_the_fence() {
    let store = MemoryStore::new();
    let far = Timestamp::from_micros(i64::MAX / 2);
    store
        .write(SCRATCH, "acct-3", &[balance(5)], WriteOptions::at(far))
        .await
        .unwrap();
    store
        .write_fenced(SCRATCH, "acct-3", &balance(6), 10)
        .await
        .unwrap();
    let cell = store
        .read(SCRATCH, "acct-3", &RowQuery::all())
        .await
        .unwrap();
    assert_eq!(
        cell[0].value, b"6",
        "a ballot beats a plain write from the future"
    );
    assert!(cell[0].writetime > far);
    assert!(cell[0].ttl.is_none());
    // A delete at or after the write removes value and fence: any token
    // writes again (what `fenced` warns about).
    store
        .delete(SCRATCH, "acct-3", &["balance".into()], cell[0].writetime)
        .await
        .unwrap();
    assert_eq!(value(&store).await, None);
    assert_eq!(
        store
            .write_fenced(SCRATCH, "acct-3", &balance(1), 3)
            .await
            .unwrap(),
        FencedOutcome::Applied { rounds: 2 },
        "the delete took the fence with it"
    );
    assert_eq!(value(&store).await.as_deref(), Some("1"));
}

fn dc(name: &str) -> Datacenter {
    Datacenter::new(name).unwrap()
}

#[tokio::test]
async fn serial_needs_every_datacenters_quorum_local_serial_its_own() {
    let cluster = MemoryStore::new().with_datacenters(vec![(dc("dc1"), 3), (dc("dc2"), 3)], 7);
    let a = cluster.client_in(&dc("dc1")).unwrap();
    let b = cluster.client_in(&dc("dc2")).unwrap();
    a.write_fenced(SCRATCH, "acct-3", &balance(1), 5)
        .await
        .unwrap();
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    // SERIAL across a split: no side has a quorum of 6 replicas.
    let e = b
        .write_fenced(SCRATCH, "acct-3", &balance(2), 6)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    // LOCAL_SERIAL in the home: decided there, hinted to the other side.
    let home = Route::Datacenter(dc("dc1"));
    let wrote = a
        .write_fenced_via(&home, SCRATCH, "acct-3", &balance(3), 7)
        .await
        .unwrap();
    assert_eq!(wrote, FencedOutcome::Applied { rounds: 1 });
    cluster.restore_link(&dc("dc1"), &dc("dc2"));
    // The hint replays before dc2 decides: token 6 is refused there too.
    let late = b
        .write_fenced_via(
            &Route::Datacenter(dc("dc2")),
            SCRATCH,
            "acct-3",
            &balance(4),
            6,
        )
        .await
        .unwrap();
    assert_eq!(
        late,
        FencedOutcome::Refused {
            recorded: 7,
            rounds: 1
        }
    );
}

#[tokio::test]
async fn a_quorum_write_repairs_a_replica_that_missed_the_fence() {
    let cluster = MemoryStore::new()
        .with_datacenters(vec![(dc("dc1"), 1), (dc("dc2"), 1), (dc("dc3"), 1)], 7);
    let a = cluster.client_in(&dc("dc1")).unwrap();
    let c = cluster.client_in(&dc("dc3")).unwrap();
    // dc3 stopped, hints held: it misses token 9.
    cluster.stop_datacenter(&dc("dc3"));
    a.write_fenced(SCRATCH, "acct-3", &balance(1), 9)
        .await
        .unwrap();
    cluster.start_datacenter(&dc("dc3"), HintDelivery::Held);
    // Coordinated in dc3, whose own copy has no fence: the quorum it reads
    // (Paxos prepare) includes one that has, so token 8 is refused.
    let late = c
        .write_fenced(SCRATCH, "acct-3", &balance(2), 8)
        .await
        .unwrap();
    assert_eq!(
        late,
        FencedOutcome::Refused {
            recorded: 9,
            rounds: 1
        }
    );
}

#[tokio::test]
async fn a_route_named_by_a_lock_is_the_default_one_on_a_store_without_homes() {
    use lockshift_decide::id::LockId;
    let cluster = MemoryStore::new().with_datacenters(vec![(dc("dc1"), 3), (dc("dc2"), 3)], 7);
    let a = cluster.client_in(&dc("dc1")).unwrap();
    let x = Route::HomeOf(LockId::new("X").unwrap());
    a.write_fenced_via(&x, SCRATCH, "acct-3", &balance(1), 5)
        .await
        .unwrap();
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    // SERIAL, as the default route: no side of a split has a quorum — and
    // never LOCAL_SERIAL in one datacenter, which a homes router alone may
    // choose (it knows where the lock's home is).
    let e = a
        .write_fenced_via(&x, SCRATCH, "acct-3", &balance(2), 6)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
}
