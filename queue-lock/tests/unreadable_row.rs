//! Issue 18 item 4: a lock whose rows the database refuses to read (more
//! tombstones than the failure threshold) stops an acquisition at once
//! with that refusal; it does not wait until the timeout and report the
//! lock as "not free".

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use lockshift_lock::{
    AcquireError, AcquireOptions, Binding, LeaseSettings, LockContext, LockId, Locker, NodeId,
};
use lockshift_queue_lock::{QueueLocker, QueueSettings, TimeService, TimeSettings};
use lockshift_store::{
    CellWrite, MemoryStore, SharedStore, Store, StoreErrorKind, SystemClock, Timestamp,
    TombstoneThresholds, WriteOptions, schema,
};

/// `lock`'s `main` and `queue` rows hold 20 deleted cells each, over a
/// failure threshold of 10.
async fn unreadable_store(lock: &str) -> SharedStore {
    let store =
        MemoryStore::new().with_tombstone_thresholds(TombstoneThresholds { warn: 5, fail: 10 });
    for table in [schema::MAIN, schema::QUEUE] {
        let columns: Vec<String> = (0..20).map(|i| format!("gone-{i:02}")).collect();
        let cells: Vec<CellWrite> = columns
            .iter()
            .map(|c| CellWrite::new(c.clone(), b"x".to_vec()))
            .collect();
        store
            .write(
                table,
                lock,
                &cells,
                WriteOptions::at(Timestamp::from_micros(1)),
            )
            .await
            .unwrap();
        store
            .delete(table, lock, &columns, Timestamp::from_micros(2))
            .await
            .unwrap();
    }
    Arc::new(store)
}

#[tokio::test(start_paused = true)]
async fn a_queue_acquisition_stops_at_the_refusal_instead_of_timing_out() {
    let store = unreadable_store("jammed").await;
    let time = TimeService::start(
        &TimeSettings::default(),
        store.clone(),
        Arc::new(SystemClock),
    );
    let ctx = LockContext::new(
        store,
        Arc::new(SystemClock),
        NodeId::new("n1").unwrap(),
        LeaseSettings::default(),
        None,
    )
    .unwrap();
    let locker = QueueLocker::new(Arc::new(ctx), time.source(), QueueSettings::default());
    // Paused time: were the refusal retried, the hour would pass at once
    // and the error would be a timeout.
    let err = locker
        .acquire_with(
            &LockId::new("jammed").unwrap(),
            AcquireOptions::with_timeout(Duration::from_secs(3600)),
            &Binding::unbound(),
        )
        .await
        .unwrap_err();
    match &err {
        AcquireError::Store { error, .. } => {
            assert_eq!(error.kind(), StoreErrorKind::TooManyTombstones, "{err}")
        }
        other => panic!("expected the store's refusal, got: {other}"),
    }
    assert!(!err.is_retryable());
}
