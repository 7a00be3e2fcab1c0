//! [`LegacyLocker`]: GetLock (listing 5) and a single TryLock as try-acquire.

use std::sync::Arc;

use async_trait::async_trait;
use lockshift_lock::{
    AcquireError, AcquireOptions, Algorithm, Binding, Lease, LockContext, LockGuard, LockId,
    Locker, OwnerId, Seen, Sharing, Stop, TryAcquireError, Waiting,
};
use lockshift_store::schema;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::protocol::{TryLockOutcome, try_lock};
use crate::settings::LegacySettings;

/// The value legacy writes into its cells (operators see it in `inspect`).
pub(crate) const CELL_VALUE: &[u8] = b"legacy";

/// The legacy main/shadow lock.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use lockshift_legacy::{LegacyLocker, LegacySettings};
/// use lockshift_lock::{Binding, LeaseSettings, LockContext, LockId, Locker, NodeId};
/// use lockshift_store::{MemoryStore, SystemClock};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let ctx = LockContext::new(Arc::new(MemoryStore::new()), Arc::new(SystemClock),
///     NodeId::new("n1")?, LeaseSettings::default(), None)?;
/// let locker = LegacyLocker::new(Arc::new(ctx), LegacySettings::default());
/// let lock = LockId::new("accounts")?;
/// let guard = locker.acquire(&lock).await?;
/// assert!(locker.try_acquire(&lock, &Binding::unbound()).await.unwrap_err().is_held());
/// guard.release().await?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct LegacyLocker {
    ctx: Arc<LockContext>,
    settings: LegacySettings,
}

impl LegacyLocker {
    /// A legacy locker over `ctx`, pacing itself by `settings`. Services
    /// get one from a node; other code (tests, the benchmark) builds lockers
    /// with `lockshift_rollout::Lockers`.
    pub fn new(ctx: Arc<LockContext>, settings: LegacySettings) -> Self {
        LegacyLocker { ctx, settings }
    }

    /// A slot (the lowest free one: L7) and its lease.
    fn fresh(&self, lock: &LockId) -> (OwnerId, Lease) {
        let lease = self
            .ctx
            .start_lease(self.ctx.take_slot(lock), Algorithm::Legacy, None);
        (lease.owner().clone(), lease)
    }

    async fn get_lock(
        &self,
        lock: &LockId,
        waiting: &Waiting,
        (owner, lease): (&mut OwnerId, &mut Lease),
        seen: &mut Seen,
    ) -> Result<(), Stop> {
        let store = self.ctx.store().as_ref();
        let mut contention: u32 = 1;
        let mut attempts: u32 = 0;
        loop {
            waiting.check().map_err(Stop::Interrupted)?;
            if lease.lost_token().is_cancelled() {
                // A fresh slot: the old lease keeps its own until its
                // background cleanup is done (L7), so it cannot touch any
                // cell of the new attempts.
                (*owner, *lease) = self.fresh(lock);
            }
            // Leftovers of a step that failed in an unknown way.
            let tidy = async {
                lease.delete_all_in(schema::SHADOW).await?;
                lease.delete_all_in(schema::MAIN).await
            };
            let (step, tried) = match tidy.await {
                Ok(()) => {
                    attempts += 1;
                    (try_lock(store, lease, CELL_VALUE).await, true)
                }
                Err(e) => (Err(e), false),
            };
            seen.lock_read |= step.is_ok();
            let pause = match step {
                Ok(TryLockOutcome::Success) => match lease.check_valid() {
                    Ok(()) => {
                        info!(attempts, waited = ?waiting.elapsed(), "acquired");
                        return Ok(());
                    }
                    Err(reason) => {
                        warn!(%reason, "entered the lock but the lease is no longer proven; retrying");
                        (*owner, *lease) = self.fresh(lock);
                        continue;
                    }
                },
                Ok(TryLockOutcome::AnotherThreadIsOwner(holder)) => {
                    debug!(%holder, "held by another owner");
                    seen.in_the_way = true;
                    waiting.saw(|w| {
                        let now = Some(holder.as_str().to_string());
                        let changed = w.holder != now;
                        w.holder = now;
                        changed
                    });
                    self.ctx.random_below(self.settings.owner_wait_max)
                }
                Ok(TryLockOutcome::ConcurrentAttempt) => {
                    debug!(contention, "concurrent attempt");
                    seen.in_the_way = true;
                    let max = self.settings.contention_wait_max(contention);
                    contention = contention.saturating_add(1);
                    self.ctx.random_below(max)
                }
                Err(e) if e.is_retryable() => {
                    debug!(error = %e, "store error, retrying");
                    // TryLock reads `main` before it writes anything: a
                    // failed write or delete of it followed a read.
                    seen.lock_read |= tried && e.op().is_mutation();
                    // A moving home names when it serves: nothing sooner
                    // can succeed (docs/design.md §4a, H3).
                    let serves_in = e.retry_after().unwrap_or_default();
                    seen.last_error = Some(e);
                    let max = self.settings.contention_wait_max(contention);
                    contention = contention.saturating_add(1);
                    serves_in.saturating_add(self.ctx.random_below(max))
                }
                Err(e) => return Err(Stop::Store(e)),
            };
            waiting.pause(pause).await.map_err(Stop::Interrupted)?;
        }
    }
}

async fn abandon(lease: Lease) {
    if let Err(e) = lease.release().await {
        debug!(error = %e, "cleanup after a failed acquisition left cells to their TTL");
    }
}

#[async_trait]
impl Locker for LegacyLocker {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Legacy
    }

    async fn acquire_with(
        &self,
        lock: &LockId,
        options: AcquireOptions,
        binding: &Binding,
    ) -> Result<LockGuard, AcquireError> {
        // P4: shared acquisitions run the queue algorithm only.
        if options.sharing != Sharing::Exclusive {
            return Err(AcquireError::SharingRefused {
                lock: lock.clone(),
                sharing: options.sharing,
                algorithm: Algorithm::Legacy,
            });
        }
        // The legacy lock paces itself by its own settings: only its
        // deadline, cancellation and invalidation come from `binding`.
        let waiting = Waiting::new(&options, binding);
        let (mut owner, mut lease) = self.fresh(lock);
        let mut seen = Seen::default();
        let span = info_span!("acquire", lock = %lock, owner = %owner, algorithm = "legacy");
        let outcome = self
            .get_lock(lock, &waiting, (&mut owner, &mut lease), &mut seen)
            .instrument(span)
            .await;
        match outcome {
            Ok(()) => Ok(lease.into_guard(Algorithm::Legacy)),
            Err(exit) => {
                abandon(lease).await;
                Err(seen.explain(exit.into_error(&waiting, lock, &owner)))
            }
        }
    }

    async fn try_acquire(
        &self,
        lock: &LockId,
        _binding: &Binding,
    ) -> Result<LockGuard, TryAcquireError> {
        let (owner, lease) = self.fresh(lock);
        let span = info_span!("try_acquire", lock = %lock, owner = %owner, algorithm = "legacy");
        let outcome = try_lock(self.ctx.store().as_ref(), &lease, CELL_VALUE)
            .instrument(span)
            .await;
        let held = |holder| TryAcquireError::Held {
            lock: lock.clone(),
            holder,
        };
        match outcome {
            Ok(TryLockOutcome::Success) => match lease.check_valid() {
                Ok(()) => Ok(lease.into_guard(Algorithm::Legacy)),
                Err(reason) => {
                    abandon(lease).await;
                    Err(AcquireError::LeaseLost {
                        lock: lock.clone(),
                        owner,
                        reason,
                    }
                    .into())
                }
            },
            Ok(TryLockOutcome::AnotherThreadIsOwner(holder)) => {
                abandon(lease).await;
                Err(held(Some(holder)))
            }
            Ok(TryLockOutcome::ConcurrentAttempt) => {
                abandon(lease).await;
                Err(held(None))
            }
            Err(error) => {
                abandon(lease).await;
                Err(AcquireError::Store {
                    lock: lock.clone(),
                    owner,
                    error,
                }
                .into())
            }
        }
    }
}
