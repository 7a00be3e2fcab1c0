//! [`Lockers`]: the one place lockers are built — the node runtime, the
//! rollout's own lock, the test fleets and the benchmark all go through it.
//!
//! A locker owns what it needs. The queue and combined lockers name queue
//! cells with a time service whose background updater keeps the fleet's
//! `GlobalTime` moving (docs/design.md §2, "Time"). Every locker built holds
//! a source of the factory's time service, and a source keeps its updater
//! running, so the updater runs exactly as long as some locker can use it —
//! and all lockers of one factory share one service (one updater per node,
//! not one per algorithm). The lockers built are the algorithms' own: no
//! code of this crate runs while they acquire.

use std::fmt;
use std::sync::{Arc, OnceLock};

use lockshift_combined::CombinedLocker;
use lockshift_legacy::{LegacyLocker, LegacySettings};
use lockshift_lock::{Algorithm, LockContext, Locker};
use lockshift_queue_lock::{QueueLocker, QueueSettings, TimeService, TimeSettings};

/// What lockers are built from besides their [`LockContext`]: each
/// algorithm's settings and the time service's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LockerSettings {
    /// `[lock.legacy]`: the legacy lock's backoff.
    pub legacy: LegacySettings,
    /// `[lock.queue]`: polling and staleness of the queue and combined locks.
    pub queue: QueueSettings,
    /// `[time]`: how queue cells are named.
    pub time: TimeSettings,
}

/// Builds lockers of every algorithm for one node (one [`LockContext`]).
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use lockshift_rollout::{LockerSettings, Lockers};
/// use lockshift_lock::{Algorithm, LeaseSettings, LockContext, LockId, Locker, NodeId};
/// use lockshift_store::{MemoryStore, SystemClock};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let ctx = LockContext::new(Arc::new(MemoryStore::new()), Arc::new(SystemClock),
///     NodeId::new("n1")?, LeaseSettings::default(), None)?;
/// let locker = Lockers::new(Arc::new(ctx), LockerSettings::default()).build(Algorithm::Queue);
/// // The factory may go: the locker keeps its time service running.
/// let guard = locker.acquire(&LockId::new("accounts")?).await?;
/// guard.release().await?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct Lockers {
    ctx: Arc<LockContext>,
    settings: LockerSettings,
    /// Started with the first queue or combined locker: a legacy-only
    /// factory runs no updater.
    time: OnceLock<TimeService>,
}

impl fmt::Debug for Lockers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lockers")
            .field("node", self.ctx.node())
            .field("settings", &self.settings)
            .field("time", &self.time.get())
            .finish()
    }
}

impl Lockers {
    /// A factory over `ctx` with `settings`.
    pub fn new(ctx: Arc<LockContext>, settings: LockerSettings) -> Self {
        Lockers {
            ctx,
            settings,
            time: OnceLock::new(),
        }
    }

    /// The context lockers are built on.
    pub fn context(&self) -> &Arc<LockContext> {
        &self.ctx
    }

    /// A locker of `algorithm`. It holds everything it needs (the time
    /// service included) for as long as it lives.
    ///
    /// # Panics
    /// Outside a tokio runtime, for a queue or combined locker whose time
    /// source has a background updater (the default): it spawns the
    /// updater on first use.
    pub fn build(&self, algorithm: Algorithm) -> Arc<dyn Locker> {
        match algorithm {
            Algorithm::Legacy => Arc::new(LegacyLocker::new(
                self.ctx.clone(),
                self.settings.legacy.clone(),
            )),
            Algorithm::Queue => Arc::new(QueueLocker::new(
                self.ctx.clone(),
                self.time().source(),
                self.settings.queue.clone(),
            )),
            Algorithm::Combined => Arc::new(CombinedLocker::new(
                self.ctx.clone(),
                self.time().source(),
                self.settings.queue.clone(),
            )),
        }
    }

    fn time(&self) -> &TimeService {
        self.time.get_or_init(|| {
            TimeService::start(
                &self.settings.time,
                self.ctx.store().clone(),
                self.ctx.clock().clone(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use lockshift_decide::binding::Pacing;
    use lockshift_lock::{LeaseSettings, NodeId};
    use lockshift_queue_lock::TimeSourceKind;
    use lockshift_store::{
        MemoryStore, RowQuery, SharedClock, SharedStore, Store, TokioClock, schema,
    };

    use super::*;

    /// A combined acquisition told nothing (an unbound one: the rollout's
    /// own lock) paces itself for legacy contenders with the legacy lock's
    /// own default settings.
    #[test]
    fn the_default_pacing_is_the_legacy_lock_default() {
        assert_eq!(
            Pacing::default(),
            Pacing::BesideLegacy {
                owner_wait_max: LegacySettings::default().owner_wait_max
            }
        );
    }

    /// The time service runs as long as a locker does, not as long as the
    /// factory: the `GlobalTime` cell keeps moving after the factory is gone.
    #[tokio::test(start_paused = true)]
    async fn a_locker_keeps_its_time_service_running() {
        let clock: SharedClock = Arc::new(TokioClock::new());
        let store: SharedStore = Arc::new(MemoryStore::with_clock(clock.clone()));
        let ctx = LockContext::new(
            store.clone(),
            clock,
            NodeId::new("n").unwrap(),
            LeaseSettings::default(),
            Some(1),
        )
        .unwrap();
        let settings = LockerSettings {
            time: TimeSettings {
                source: TimeSourceKind::Hybrid,
                ..TimeSettings::default()
            },
            ..LockerSettings::default()
        };
        let locker = Lockers::new(Arc::new(ctx), settings).build(Algorithm::Queue);
        let global = |store: SharedStore| async move {
            store
                .read(
                    schema::GLOBAL_TIME,
                    lockshift_queue_lock::time::GLOBAL_TIME_ROW,
                    &RowQuery::all(),
                )
                .await
                .unwrap()
                .first()
                .map(|c| c.writetime)
        };
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = global(store.clone()).await.expect("the updater wrote");
        tokio::time::sleep(Duration::from_secs(5)).await;
        let after = global(store.clone()).await.expect("still there");
        assert!(after > before, "the updater stopped with the factory");
        drop(locker);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let stopped = global(store.clone()).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            global(store).await,
            stopped,
            "the updater outlived the last locker"
        );
    }
}
