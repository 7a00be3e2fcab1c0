//! [`QueueLocker`]: the fair queue lock — a [`Line`] whose first waiter
//! writes `main` and re-reads it (listing 7 lines 3–8).

use std::sync::Arc;

use async_trait::async_trait;
use lockshift_lock::{
    AcquireError, AcquireOptions, Algorithm, Lease, LockContext, LockGuard, LockId, Locker,
    TryAcquireError,
};
use lockshift_store::{RowQuery, Store, StoreError, schema};
use tracing::debug;

use crate::queue::{Position, position};

use crate::line::{Entry, Line, MainEntry, Place, Prepared, verdict_on_main};
use crate::settings::QueueSettings;
use crate::time::TimeSource;
use lockshift_lock::RESERVED_VALUE;

/// The queue lock's entry: write my `main` cell, re-read `main`.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueEntry;

#[async_trait]
impl MainEntry for QueueEntry {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Queue
    }

    async fn enter(&self, store: &dyn Store, lease: &Lease) -> Result<Entry, StoreError> {
        let me = lease.owner().as_str();
        // Line 3: my main cell.
        lease
            .write(schema::MAIN, me, Algorithm::Queue.as_str().as_bytes())
            .await?;
        // Line 4: Lemma 1 on main — of two writers, at least one sees both
        // cells here. Two cells are enough to know "only mine".
        let main = store
            .read(schema::MAIN, lease.lock().as_str(), &RowQuery::first(2))
            .await?;
        // Lines 4–8.
        verdict_on_main(lease, &main).await
    }

    /// The reservation: write my `main` cell now, beside the holder's,
    /// marked [`RESERVED_VALUE`]. Q1 still decides: the lock is mine only
    /// once a read of `main` — made after this write — shows my cell alone.
    /// The holder, already past its own verifying read, is not disturbed;
    /// nobody else reserves while two cells are in `main`.
    ///
    /// Only behind the head of the queue, and never behind a reservation: a
    /// reservation left alone in `main` looks like a holder by its column,
    /// and a waiter reserving behind it would wait for a waiter waiting for
    /// it — for ever.
    async fn prepare(
        &self,
        _store: &dyn Store,
        lease: &Lease,
        holder: &lockshift_store::Cell,
        behind_head: bool,
    ) -> Result<bool, StoreError> {
        if !behind_head || holder.value == RESERVED_VALUE {
            return Ok(false);
        }
        let me = lease.owner().as_str();
        lease.write(schema::MAIN, me, RESERVED_VALUE).await?;
        Ok(true)
    }

    /// One read of `main`: my cell alone means the holder left and the lock
    /// is mine — the hand-off costs the holder's delete and this read. The
    /// claim then marks the cell a holding in the background, so the next
    /// waiter may reserve behind it.
    ///
    /// Two reservations can meet (Q5): reserving is check-then-act, so a
    /// waiter whose queue cell sorts just ahead of the next waiter's (a
    /// clock a little behind) can reserve in the same moment. Each would
    /// wait for the other for ever once the holder leaves; so when every
    /// other cell in `main` is a reservation, the queue decides: the
    /// reservation that is not first in line withdraws, the first stays.
    /// Withdrawing is always safe (it only gives up the preparation), and
    /// of two reservations both in the queue at most one is first.
    async fn poll_prepared(
        &self,
        store: &dyn Store,
        lease: &Lease,
        _behind: &str,
        place: &Place<'_>,
    ) -> Result<Prepared, StoreError> {
        let me = lease.owner().as_str();
        let main = store
            .read(
                schema::MAIN,
                lease.lock().as_str(),
                &RowQuery::first(RESERVATIONS_SEEN),
            )
            .await?;
        if !main.iter().any(|c| c.column == me) {
            return Ok(Prepared::Lost);
        }
        let others: Vec<_> = main.iter().filter(|c| c.column != me).collect();
        if others.is_empty() {
            lease.rewrite_in_background(schema::MAIN, me, Algorithm::Queue.as_str().as_bytes());
            return Ok(Prepared::Acquired);
        }
        if others.iter().any(|c| c.value != RESERVED_VALUE) {
            // The holder, or a waiter entering that will see my cell and
            // step back (it cannot hold: its read would see my reservation).
            return Ok(Prepared::Waiting);
        }
        // Only reservations besides mine: the queue decides who stays.
        let lock = lease.lock().as_str();
        match position(store, lock, place.column, place.now, place.stale_after, 1).await? {
            Position::First => Ok(Prepared::Waiting),
            Position::Behind { .. } | Position::Missing => {
                debug!("another reservation is ahead of mine in line; withdrawing");
                Ok(Prepared::Lost)
            }
        }
    }
}

/// How many `main` cells a prepared queue waiter reads per poll: enough to
/// tell "a holding is among them" from "only reservations" in every case
/// but a crowd of four reservations with the holding beyond them — and
/// then the waiter only waits longer, it never deadlocks (the first in
/// line stays; the rest withdraw).
const RESERVATIONS_SEEN: u32 = 4;

/// The fair queue lock.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use lockshift_lock::{LeaseSettings, LockContext, LockId, Locker, NodeId};
/// use lockshift_queue_lock::{QueueLocker, QueueSettings, TimeService, TimeSettings};
/// use lockshift_store::{MemoryStore, SharedStore, SystemClock};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store: SharedStore = Arc::new(MemoryStore::new());
/// let time = TimeService::start(&TimeSettings::default(), store.clone(), Arc::new(SystemClock));
/// let ctx = LockContext::new(store, Arc::new(SystemClock), NodeId::new("n1")?,
///     LeaseSettings::default(), None)?;
/// let locker = QueueLocker::new(Arc::new(ctx), time.source(), QueueSettings::default());
/// let guard = locker.acquire(&LockId::new("accounts")?).await?;
/// assert!(guard.fencing_token().await? > 0);
/// guard.release().await?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct QueueLocker {
    line: Line,
}

impl QueueLocker {
    /// A queue locker over `ctx`, naming queue cells with `time`.
    pub fn new(ctx: Arc<LockContext>, time: Arc<dyn TimeSource>, settings: QueueSettings) -> Self {
        QueueLocker {
            line: Line::new(ctx, time, settings, Arc::new(QueueEntry)),
        }
    }
}

#[async_trait]
impl Locker for QueueLocker {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Queue
    }

    async fn acquire_with(
        &self,
        lock: &LockId,
        options: AcquireOptions,
    ) -> Result<LockGuard, AcquireError> {
        self.line.acquire(lock, options).await
    }

    async fn try_acquire(&self, lock: &LockId) -> Result<LockGuard, TryAcquireError> {
        self.line.try_acquire(lock).await
    }
}
