//! Unit tests of listing 4's outcomes and round trips; the contention,
//! fault and lease tests shared by all algorithms live in `tests/`.

use std::sync::Arc;
use std::time::Duration;

use lockshift_lock::{AcquireOptions, Binding, LeaseSettings, LockContext, LockId, Locker, NodeId};
use lockshift_store::{
    CellWrite, FaultyStore, MemoryStore, OpKind, RowQuery, SharedClock, Store, Timestamp,
    TokioClock, WriteOptions, schema,
};

use super::*;

struct Fixture {
    store: Arc<FaultyStore<MemoryStore>>,
    locker: LegacyLocker,
}

fn fixture() -> Fixture {
    let clock: SharedClock = Arc::new(TokioClock::new());
    let store = Arc::new(FaultyStore::new(MemoryStore::with_clock(clock.clone()), 5));
    let ctx = LockContext::new(
        store.clone(),
        clock,
        NodeId::new("n1").unwrap(),
        LeaseSettings::default(),
        Some(5),
    )
    .unwrap();
    Fixture {
        store,
        locker: LegacyLocker::new(Arc::new(ctx), LegacySettings::default()),
    }
}

fn lock() -> LockId {
    LockId::new("L").unwrap()
}

async fn columns(store: &dyn Store, table: lockshift_store::Table) -> Vec<String> {
    store
        .read(table, "L", &RowQuery::all())
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.column)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn uncontended_success_costs_six_round_trips_and_release_one() {
    let f = fixture();
    let guard = f.locker.acquire(&lock()).await.unwrap();
    let counts = f.store.op_counts();
    assert_eq!(counts.get(schema::MAIN, OpKind::Read), 2, "{counts}");
    assert_eq!(counts.get(schema::SHADOW, OpKind::Write), 1, "{counts}");
    assert_eq!(counts.get(schema::SHADOW, OpKind::Read), 1, "{counts}");
    assert_eq!(counts.get(schema::MAIN, OpKind::Write), 1, "{counts}");
    assert_eq!(counts.get(schema::SHADOW, OpKind::Delete), 1, "{counts}");
    assert_eq!(counts.total(), 6, "{counts}");
    assert_eq!(
        columns(f.store.inner(), schema::MAIN).await,
        [guard.owner().as_str()]
    );
    assert!(columns(f.store.inner(), schema::SHADOW).await.is_empty());
    // Legacy holders get fencing tokens too, on request: two round trips
    // the first time (read and advance the lock's fencing cell), none after.
    f.store.reset_counts();
    let token = guard.fencing_token().await.unwrap();
    assert_eq!(guard.fencing_token().await.unwrap(), token);
    let counts = f.store.op_counts();
    assert_eq!(counts.get(schema::GLOBAL_TIME, OpKind::Read), 1, "{counts}");
    assert_eq!(
        counts.get(schema::GLOBAL_TIME, OpKind::Write),
        1,
        "{counts}"
    );
    assert_eq!(counts.total(), 2, "{counts}");
    f.store.reset_counts();
    guard.release().await.unwrap();
    assert_eq!(f.store.op_counts().total(), 1);
    assert!(columns(f.store.inner(), schema::MAIN).await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn try_lock_reports_another_owner_and_concurrent_attempts() {
    let f = fixture();
    let t = WriteOptions::at(Timestamp::from_micros(1));
    let inner = f.store.inner();
    // Someone else's shadow cell: a concurrent attempt.
    inner
        .write(
            schema::SHADOW,
            "L",
            &[CellWrite::new("rival", b"x".to_vec())],
            t,
        )
        .await
        .unwrap();
    let err = f
        .locker
        .try_acquire(&lock(), &Binding::unbound())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            lockshift_lock::TryAcquireError::Held { holder: None, .. }
        ),
        "{err}"
    );
    assert_eq!(
        columns(inner, schema::SHADOW).await,
        ["rival"],
        "own shadow cell removed"
    );
    // Someone else in main: another owner, named.
    inner
        .write(
            schema::MAIN,
            "L",
            &[CellWrite::new("holder", b"x".to_vec())],
            t,
        )
        .await
        .unwrap();
    let err = f
        .locker
        .try_acquire(&lock(), &Binding::unbound())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "lock L is held by holder");
    // Two cells in main (a transient mixed-mode state): not "another owner",
    // listing 4 goes on to shadow and the fresh read of main refuses entry.
    inner
        .delete(
            schema::SHADOW,
            "L",
            &["rival".into()],
            Timestamp::from_micros(2),
        )
        .await
        .unwrap();
    inner
        .write(
            schema::MAIN,
            "L",
            &[CellWrite::new("other", b"x".to_vec())],
            t,
        )
        .await
        .unwrap();
    let err = f
        .locker
        .try_acquire(&lock(), &Binding::unbound())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            lockshift_lock::TryAcquireError::Held { holder: None, .. }
        ),
        "{err}"
    );
    assert_eq!(
        columns(inner, schema::MAIN).await,
        ["holder", "other"],
        "never wrote main"
    );
}

#[tokio::test(start_paused = true)]
async fn acquire_waits_for_release_and_times_out_cleanly() {
    let f = fixture();
    let first = f.locker.acquire(&lock()).await.unwrap();
    let err = f
        .locker
        .acquire_with(
            &lock(),
            AcquireOptions::with_timeout(Duration::from_secs(3)),
            &Binding::unbound(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, lockshift_lock::AcquireError::Timeout { .. }),
        "{err}"
    );
    assert!(
        columns(f.store.inner(), schema::SHADOW).await.is_empty(),
        "timed-out waiter left nothing"
    );
    let waiter = {
        let locker = f.locker.clone();
        tokio::spawn(async move { locker.acquire(&lock()).await })
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!waiter.is_finished());
    first.release().await.unwrap();
    let second = waiter.await.unwrap().unwrap();
    assert_eq!(
        columns(f.store.inner(), schema::MAIN).await,
        [second.owner().as_str()]
    );
}

#[tokio::test(start_paused = true)]
async fn a_main_write_that_may_have_applied_is_removed_before_retrying() {
    let f = fixture();
    // Fail exactly the main write, after applying it.
    f.store.set_plan(lockshift_store::FaultPlan {
        scope: lockshift_store::FaultScope {
            tables: Some(vec![schema::MAIN]),
            ops: Some(vec![OpKind::Write]),
        },
        ..Default::default()
    });
    f.store.fail_next(1, lockshift_store::FailPoint::After);
    let guard = f.locker.acquire(&lock()).await.unwrap();
    assert_eq!(
        columns(f.store.inner(), schema::MAIN).await,
        [guard.owner().as_str()]
    );
    assert!(
        f.store.op_counts().get(schema::MAIN, OpKind::Delete) >= 1,
        "the maybe-written cell was deleted"
    );
}

/// G3: a lone `main` cell under the owner id of the slot this acquisition
/// takes — a late write of the slot's previous lease (L5) — is not a
/// holding of this acquisition. The thesis' `Success` ("mine") held the
/// lock through it, never renewed it, and the lock fell free under its
/// "holder" once it expired; now the contender buries it and enters
/// through shadow with a cell of its own, which its lease renews.
#[tokio::test(start_paused = true)]
async fn a_leftover_under_my_own_slot_is_not_my_holding() {
    use lockshift_lock::{Incarnation, OwnerId};
    use lockshift_store::Clock;
    let f = fixture();
    let slot0 = OwnerId::for_slot(&NodeId::new("n1").unwrap(), Incarnation::from_seed(5), 0);
    let clock = TokioClock::new();
    let leftover = WriteOptions::at(clock.now().saturating_sub(Duration::from_secs(1)))
        .with_ttl(lockshift_store::Ttl::from_secs(60).unwrap());
    f.store
        .inner()
        .write(
            schema::MAIN,
            "L",
            &[CellWrite::new(slot0.as_str(), b"legacy".to_vec())],
            leftover,
        )
        .await
        .unwrap();
    let guard = f.locker.acquire(&lock()).await.unwrap();
    assert_eq!(guard.owner(), &slot0, "the slot the leftover names");
    assert!(columns(f.store.inner(), schema::SHADOW).await.is_empty());
    // Long past the leftover's TTL: the holder's own cell, renewed.
    tokio::time::sleep(Duration::from_secs(150)).await;
    let main = f
        .store
        .inner()
        .read(schema::MAIN, "L", &RowQuery::all())
        .await
        .unwrap();
    assert_eq!(main.len(), 1, "{main:?}");
    assert!(
        main[0].writetime > clock.now().saturating_sub(Duration::from_secs(20)),
        "renewed by the holder's lease: {main:?}"
    );
    assert!(!guard.is_lost());
    guard.release().await.unwrap();
}
