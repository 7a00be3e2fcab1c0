//! [`CombinedLocker`]: thesis §7.2 — queue order, entry into `main` through
//! the legacy shadow arbitration, then a re-read of `main`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lockshift_legacy::{LegacySettings, ShadowEntry, enter_through_shadow};
use lockshift_lock::{
    AcquireError, AcquireOptions, Algorithm, Lease, LockContext, LockGuard, LockId, Locker,
    TryAcquireError,
};
use lockshift_queue_lock::{
    Entry, Line, MainEntry, Place, Prepared, QueueSettings, TimeSource, verdict_on_main,
};
use lockshift_store::{RowQuery, Store, StoreError, schema};
use tracing::trace;

/// Whether legacy contenders may be about, and how they pace themselves.
///
/// A legacy contender is invisible while it waits (it only reads `main`)
/// and polls at its own pace — up to `lock.legacy.owner_wait_max` after
/// finding the lock owned. A combined waiter polling at the queue's speed,
/// or holding a prepared `shadow` cell across the current hold, wins every
/// hand-off, and legacy nodes starve (issue 10 item 6). So while legacy
/// contenders may be about — stage `legacy`, or a stage the node cannot
/// confirm — the combined lock takes its turn at their pace: no prepared
/// hand-off, and its first waiter pauses like a legacy contender while
/// `main` is taken. From `dual` on no legacy node runs, and it goes at the
/// queue's speed. The pacing changes when, and only when, legacy may run
/// — never the exclusion argument, which rests on C1 and C2 alone.
#[derive(Debug)]
pub struct LegacyPacing {
    beside_legacy: AtomicBool,
    owner_wait_max: Duration,
}

impl LegacyPacing {
    /// Pacing for a fleet whose legacy contenders pause up to
    /// `owner_wait_max` when the lock is owned; beside legacy at first.
    pub fn new(owner_wait_max: Duration) -> Arc<Self> {
        Arc::new(LegacyPacing {
            beside_legacy: AtomicBool::new(true),
            owner_wait_max,
        })
    }

    /// Whether legacy contenders may be about.
    pub fn beside_legacy(&self) -> bool {
        self.beside_legacy.load(Ordering::Relaxed)
    }

    /// Says whether legacy contenders may be about (the node does, from the
    /// stage it confirmed).
    pub fn set_beside_legacy(&self, beside: bool) {
        self.beside_legacy.store(beside, Ordering::Relaxed);
    }
}

/// The combined lock's entry: shadow arbitration (so legacy contenders see
/// it), then a re-read of `main` (so queue holders are seen).
#[derive(Debug, Clone)]
pub struct CombinedEntry {
    pacing: Arc<LegacyPacing>,
}

#[async_trait]
impl MainEntry for CombinedEntry {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Combined
    }

    fn prepares(&self) -> bool {
        !self.pacing.beside_legacy()
    }

    fn busy_pause(&self, ctx: &LockContext) -> Option<Duration> {
        self.pacing
            .beside_legacy()
            .then(|| ctx.random_below(self.pacing.owner_wait_max))
    }

    async fn enter(&self, store: &dyn Store, lease: &Lease) -> Result<Entry, StoreError> {
        let value = Algorithm::Combined.as_str().as_bytes();
        // C1: write shadow, read shadow alone, fresh read of main empty, write main.
        match enter_through_shadow(store, lease, value).await? {
            ShadowEntry::Entered => {}
            ShadowEntry::Contended | ShadowEntry::MainTaken => return Ok(Entry::Busy(None)),
        }
        reread_main(store, lease).await
    }

    /// Lines 7–8 ahead of time: announce myself in `shadow` and check I am
    /// alone there, while the one ahead still holds `main`. The legacy
    /// argument needs only that my shadow cell lives from this write until
    /// after my `main` write (the lease keeps it), and that my fresh read of
    /// `main` comes after this read of `shadow` — both hold however long I
    /// wait in between.
    ///
    /// Behind anyone: a shadow cell never makes `main` look occupied, so
    /// preparations cannot wait for each other (two preparers see each other
    /// in `shadow` and both step back).
    async fn prepare(
        &self,
        store: &dyn Store,
        lease: &Lease,
        _holder: &lockshift_store::Cell,
        _behind_head: bool,
    ) -> Result<bool, StoreError> {
        if !self.prepares() {
            return Ok(false);
        }
        let me = lease.owner().as_str();
        lease
            .write(schema::SHADOW, me, Algorithm::Combined.as_str().as_bytes())
            .await?;
        let shadow = store
            .read(schema::SHADOW, lease.lock().as_str(), &RowQuery::first(2))
            .await?;
        if matches!(shadow.as_slice(), [only] if only.column == me) {
            return Ok(true);
        }
        lease.delete(schema::SHADOW, me).await?;
        Ok(false)
    }

    /// The fresh read of `main` doubles as the poll: once it is empty, write
    /// `main` (line 11) and re-read it (C2) — two round trips after the
    /// holder leaves instead of five.
    async fn poll_prepared(
        &self,
        store: &dyn Store,
        lease: &Lease,
        _behind: &str,
        _place: &Place<'_>,
    ) -> Result<Prepared, StoreError> {
        let lock = lease.lock().as_str();
        let me = lease.owner().as_str();
        if !store
            .read(schema::MAIN, lock, &RowQuery::first(1))
            .await?
            .is_empty()
        {
            return Ok(Prepared::Waiting);
        }
        // The argument needs my shadow cell to have lived all along.
        if lease.check_valid().is_err() || !lease.is_proven(schema::SHADOW, me) {
            return Ok(Prepared::Lost);
        }
        lease
            .write(schema::MAIN, me, Algorithm::Combined.as_str().as_bytes())
            .await?;
        Ok(match reread_main(store, lease).await? {
            Entry::Acquired => Prepared::Acquired,
            Entry::Busy(_) => Prepared::Lost,
        })
    }

    async fn tidy(&self, lease: &Lease) -> Result<(), StoreError> {
        lease.delete_all_in(schema::SHADOW).await?;
        lease.delete_all_in(schema::MAIN).await
    }
}

/// C2: re-read `main` after writing it (Lemma 1 against queue holders, which
/// never look at `shadow`) and take Q1's verdict. The shadow cell is no
/// longer needed either way; its delete overlaps the read instead of adding a
/// round trip.
async fn reread_main(store: &dyn Store, lease: &Lease) -> Result<Entry, StoreError> {
    let first_two = RowQuery::first(2);
    let (main, shadow_deleted) = tokio::join!(
        store.read(schema::MAIN, lease.lock().as_str(), &first_two),
        lease.delete(schema::SHADOW, lease.owner().as_str()),
    );
    if let Err(e) = shadow_deleted {
        // A lingering shadow cell only makes contenders retry; the lease
        // removes it at release or its TTL does.
        trace!(error = %e, "shadow cell not removed after entry");
    }
    verdict_on_main(lease, &main?).await
}

/// The combined lock: safe beside legacy holders, queue holders and itself.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use lockshift_combined::CombinedLocker;
/// use lockshift_lock::{LeaseSettings, LockContext, LockId, Locker, NodeId};
/// use lockshift_queue_lock::{QueueSettings, TimeService, TimeSettings};
/// use lockshift_store::{MemoryStore, SharedStore, SystemClock};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store: SharedStore = Arc::new(MemoryStore::new());
/// let time = TimeService::start(&TimeSettings::default(), store.clone(), Arc::new(SystemClock));
/// let ctx = LockContext::new(store, Arc::new(SystemClock), NodeId::new("n1")?,
///     LeaseSettings::default(), None)?;
/// let locker = CombinedLocker::new(Arc::new(ctx), time.source(), QueueSettings::default());
/// let guard = locker.acquire(&LockId::new("accounts")?).await?;
/// guard.release().await?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct CombinedLocker {
    line: Line,
}

impl CombinedLocker {
    /// A combined locker over `ctx`, naming queue cells with `time`, paced
    /// for legacy contenders with the legacy lock's default settings (it
    /// cannot know there are none: see [`LegacyPacing`]).
    pub fn new(ctx: Arc<LockContext>, time: Arc<dyn TimeSource>, settings: QueueSettings) -> Self {
        let pacing = LegacyPacing::new(LegacySettings::default().owner_wait_max);
        Self::with_pacing(ctx, time, settings, pacing)
    }

    /// As [`new`](Self::new), with `pacing` decided by its owner (a node
    /// turns it off once no legacy node can run).
    pub fn with_pacing(
        ctx: Arc<LockContext>,
        time: Arc<dyn TimeSource>,
        settings: QueueSettings,
        pacing: Arc<LegacyPacing>,
    ) -> Self {
        CombinedLocker {
            line: Line::new(ctx, time, settings, Arc::new(CombinedEntry { pacing })),
        }
    }
}

#[async_trait]
impl Locker for CombinedLocker {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Combined
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

#[cfg(test)]
mod tests {
    use lockshift_lock::{LeaseSettings, NodeId};
    use lockshift_queue_lock::{TimeService, TimeSettings, TimeSourceKind};
    use lockshift_store::{FaultyStore, MemoryStore, OpKind, SharedClock, TokioClock};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn uncontended_acquire_costs_eight_operations_and_release_two() {
        let clock: SharedClock = Arc::new(TokioClock::new());
        let store = Arc::new(FaultyStore::new(MemoryStore::with_clock(clock.clone()), 1));
        let time = TimeService::start(
            &TimeSettings {
                source: TimeSourceKind::Local,
                ..TimeSettings::default()
            },
            store.clone(),
            clock.clone(),
        );
        let ctx = LockContext::new(
            store.clone(),
            clock,
            NodeId::new("n").unwrap(),
            LeaseSettings::default(),
            Some(1),
        )
        .unwrap();
        let locker = CombinedLocker::new(Arc::new(ctx), time.source(), QueueSettings::default());
        let guard = locker.acquire(&LockId::new("L").unwrap()).await.unwrap();
        let c = store.op_counts();
        // Enqueue, am-I-first; C1: shadow write, shadow read, fresh main
        // read, main write; C2: main re-read beside the shadow delete.
        assert_eq!(c.get(schema::QUEUE, OpKind::Write), 1, "{c}");
        assert_eq!(c.get(schema::QUEUE, OpKind::Read), 1, "{c}");
        assert_eq!(c.get(schema::SHADOW, OpKind::Write), 1, "{c}");
        assert_eq!(c.get(schema::SHADOW, OpKind::Read), 1, "{c}");
        assert_eq!(c.get(schema::SHADOW, OpKind::Delete), 1, "{c}");
        assert_eq!(c.get(schema::MAIN, OpKind::Write), 1, "{c}");
        assert_eq!(c.get(schema::MAIN, OpKind::Read), 2, "{c}");
        assert_eq!(c.total(), 8, "{c}");
        store.reset_counts();
        guard.release().await.unwrap();
        assert_eq!(
            store.op_counts().of_kind(OpKind::Delete),
            2,
            "main and queue; shadow is already gone"
        );
    }
}
