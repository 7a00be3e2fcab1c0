//! A move's reads and writes, each sent again after a transient failure,
//! and the rollout lock a planned move holds.

use std::sync::Arc;
use std::time::Duration;

use lockshift_decide::algorithm::Algorithm;
use lockshift_decide::home::{HOMES_ROW, HomeRecord};
use lockshift_decide::registry::LiveNode;
use lockshift_decide::rollout::ROLLOUT_LOCK;
use lockshift_lock::{
    AcquireOptions, Binding, LeaseSettings, LockContext, LockGuard, LockId, NodeId,
};
use lockshift_queue_lock::{QueueSettings, TimeSettings, TimeSourceKind};
use lockshift_store::{
    CellWrite, Datacenter, Route, RowQuery, SharedClock, SharedStore, StoreError, StoreErrorKind,
    Timestamp, WriteOptions, schema,
};

use crate::error::RolloutError;
use crate::{LockerSettings, Lockers};

/// Writes `record` to `column` of the homes row in `dc` at `stamp`
/// ([`write_patiently`]).
pub(super) async fn write_record(
    store: &SharedStore,
    dc: &Datacenter,
    column: &str,
    record: &HomeRecord,
    stamp: Timestamp,
) -> Result<(), StoreError> {
    let value = record_value(record)?;
    write_patiently(
        store,
        &Route::Datacenter(dc.clone()),
        column,
        &value,
        WriteOptions::at(stamp),
    )
    .await
}

/// `record` as the value of its cell in the homes row.
///
/// # Errors
/// [`StoreErrorKind::Invalid`] if it cannot be serialized.
pub(super) fn record_value(record: &HomeRecord) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(record).map_err(|e| {
        StoreError::new(
            StoreErrorKind::Invalid,
            lockshift_store::OpKind::Write,
            Some(schema::ROLLOUT),
            e.to_string(),
        )
    })
}

/// Writes `value` to `column` of the homes row on `route`, again after a
/// transient failure: the same cell at the same stamp every time, so
/// sending it again (even after a failure that may have landed) is
/// idempotent.
pub(super) async fn write_patiently(
    store: &SharedStore,
    route: &Route,
    column: &str,
    value: &[u8],
    options: WriteOptions,
) -> Result<(), StoreError> {
    let mut attempt = 1;
    loop {
        let result = store
            .write_via(
                route,
                schema::ROLLOUT,
                HOMES_ROW,
                &[CellWrite::new(column, value.to_vec())],
                options,
            )
            .await;
        match result {
            Err(e) if e.is_retryable() && attempt < READ_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            result => return result,
        }
    }
}

/// How many times a move reads a row before it takes a datacenter for
/// out of reach — a transient failure (a timeout, a node restarting) must
/// not make a planned move look impossible, nor a forced one allowed —
/// and sends each write of the record before it gives up on it.
pub(super) const READ_ATTEMPTS: usize = 3;

/// Reads `row` of `table` on `route`, again after a transient failure, at
/// most [`READ_ATTEMPTS`] times.
pub(super) async fn read_patiently(
    store: &SharedStore,
    route: &Route,
    table: lockshift_store::Table,
    row: &str,
) -> Result<Vec<lockshift_store::Cell>, StoreError> {
    let mut attempt = 1;
    loop {
        match store.read_via(route, table, row, &RowQuery::all()).await {
            Err(e) if e.is_retryable() && attempt < READ_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            result => return result,
        }
    }
}

/// The live processes registered in the datacenter of `route`, each
/// registry row's read again after a transient failure, at most
/// [`READ_ATTEMPTS`] times.
pub(super) async fn registry_patiently(
    store: &SharedStore,
    route: &Route,
    now: Timestamp,
    margin: Duration,
) -> Result<Vec<LiveNode>, StoreError> {
    crate::registry::live_nodes_patiently(store.as_ref(), route, now, margin, READ_ATTEMPTS)
        .await
        .map(|(nodes, _)| nodes)
}

/// The rollout lock, taken with a combined locker on the local clock (as
/// the rollout's transitions take it).
pub(super) async fn rollout_lock(
    store: &SharedStore,
    clock: &SharedClock,
    lease: &LeaseSettings,
    by: &str,
) -> Result<LockGuard, RolloutError> {
    let internal = |e: &dyn std::fmt::Display| RolloutError::Internal(e.to_string());
    let node = NodeId::new(crate::rollout::sanitize_node(by)).map_err(|e| internal(&e))?;
    let ctx = LockContext::new(store.clone(), clock.clone(), node, lease.clone(), None)
        .map_err(|e| internal(&e))?;
    let locker = Lockers::new(
        Arc::new(ctx),
        LockerSettings {
            queue: QueueSettings::default(),
            time: TimeSettings {
                source: TimeSourceKind::Local,
                ..TimeSettings::default()
            },
            ..LockerSettings::default()
        },
    )
    .build(Algorithm::Combined);
    let lock = LockId::new(ROLLOUT_LOCK).map_err(|e| internal(&e))?;
    Ok(locker
        .acquire_with(
            &lock,
            AcquireOptions::with_timeout(Duration::from_secs(60)),
            &Binding::unbound(),
        )
        .await?)
}
