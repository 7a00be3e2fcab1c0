//! [`QueueLocker`]: the fair queue lock — a `Line` whose first waiter
//! writes `main` and re-reads it (listing 7 lines 3–8); [`LineLocker`],
//! the locker around any line.

use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use lockshift_decide::binding::Pacing;
use lockshift_lock::{
    AcquireError, AcquireOptions, Algorithm, Binding, Lease, LockContext, LockGuard, LockId,
    Locker, Sharing, TryAcquireError,
};
use lockshift_store::{Store, StoreError, schema};

use crate::line::{Arrival, Line, MainEntry, read_main, reserve_and_read};
use crate::settings::QueueSettings;
use crate::time::TimeSource;
use lockshift_decide::waiter::{Arrived, Entered, Policy};

/// The queue lock's entry: write my `main` cell, read `main` after it.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueEntry;

#[async_trait]
impl MainEntry for QueueEntry {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Queue
    }

    fn policy(&self) -> Policy {
        Policy::QUEUE
    }

    /// The fast path (Lemma 1's minimum: one write round, one read round).
    /// Round 1 writes the queue cell and my `main` cell together; round 2
    /// reads my place and `main` together. The lock is mine iff I am first
    /// in line and the read of `main` — made after my `main` write — shows
    /// my cell alone (Q1); otherwise the line withdraws my `main` cell and I
    /// wait like anyone else (Q2). Exclusion is Q1's, whatever the queue
    /// says; "first in line" only keeps an arrival from overtaking a waiter.
    async fn arrive(
        &self,
        store: &dyn Store,
        lease: &Lease,
        arrival: Arrival<'_>,
        fast: bool,
        _pacing: Pacing,
    ) -> Result<Arrived, StoreError> {
        if !fast {
            return arrival.enqueue_then_place().await;
        }
        let me = lease.owner().as_str();
        // Round 1: both cells at once. The `main` cell carries the holding
        // value and the lease TTL: uncontended, it is the holding and needs
        // no rewrite (else it is withdrawn at once, Q2).
        let (queued, wrote) = tokio::join!(
            arrival.enqueue,
            lease.write_holding(schema::MAIN, me, self.holding_value())
        );
        queued?;
        wrote?;
        // Round 2: both reads after both writes (Lemma 1 needs my write
        // before my read of `main`; the place needs my queue cell there).
        let (position, main) = tokio::join!(arrival.position, read_main(store, lease));
        Ok(Arrived {
            position: position?,
            main: Some(main?),
            wrote: true,
        })
    }

    /// Listing 7 lines 3–4: my `main` cell — marked a reservation, since
    /// someone may still hold — then `main` read after it (Lemma 1 on
    /// `main`: of two writers, at least one sees both cells here).
    async fn enter(
        &self,
        store: &dyn Store,
        lease: &Lease,
        _shadow_checked: bool,
        _pacing: Pacing,
    ) -> Result<Entered, StoreError> {
        Ok(Entered::Read {
            main: reserve_and_read(store, lease).await?,
            marked_reservation: true,
        })
    }
}

/// The fair queue lock.
///
/// Services get lockers from a node; other code (tests, the benchmark)
/// builds them with `lockshift_rollout::Lockers`, or as here.
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
pub type QueueLocker = LineLocker<QueueEntry>;

/// A locker that waits in a [`Line`] and enters `main` with the entry `E`:
/// the queue lock ([`QueueLocker`]) and the combined lock
/// (`lockshift_combined::CombinedLocker`) are this, each with its entry.
#[derive(Debug, Clone)]
pub struct LineLocker<E> {
    line: Line,
    entry: PhantomData<fn() -> E>,
}

impl<E: MainEntry + Default + 'static> LineLocker<E> {
    /// A locker over `ctx`, naming queue cells with `time`, a
    /// [`TimeService`](crate::TimeService)'s source: the locker holds it,
    /// and with it the service's updater, for as long as it lives.
    pub fn new(ctx: Arc<LockContext>, time: Arc<dyn TimeSource>, settings: QueueSettings) -> Self {
        LineLocker {
            line: Line::new(ctx, time, settings, Arc::new(E::default())),
            entry: PhantomData,
        }
    }
}

#[async_trait]
impl<E: MainEntry + Default + 'static> Locker for LineLocker<E> {
    fn algorithm(&self) -> Algorithm {
        self.line.algorithm()
    }

    async fn acquire_with(
        &self,
        lock: &LockId,
        options: AcquireOptions,
        binding: &Binding,
    ) -> Result<LockGuard, AcquireError> {
        self.line.acquire(lock, options, binding).await
    }

    async fn try_acquire(
        &self,
        lock: &LockId,
        binding: &Binding,
    ) -> Result<LockGuard, TryAcquireError> {
        self.line.try_acquire(lock, binding).await
    }

    async fn try_acquire_shared(
        &self,
        lock: &LockId,
        sharing: Sharing,
        binding: &Binding,
    ) -> Result<LockGuard, TryAcquireError> {
        self.line.try_acquire_shared(lock, sharing, binding).await
    }
}
