//! The acquire path of a [`Node`]: each acquisition is bound to the stage
//! it resolved under — its locker gets the [`Binding`] that paces and
//! invalidates it — and its guard handed out only under the binding's
//! conditions (R3, R4, R7).

use std::sync::{Arc, PoisonError};

use lockshift_lock::{
    AcquireError, AcquireOptions, Algorithm, Binding, LockGuard, LockId, Locker, Revoker, Sharing,
    TryAcquireError,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::runtime::NodeParts;
use super::{Node, NodeInner};

impl NodeParts {
    fn locker(&self, algorithm: Algorithm) -> &dyn Locker {
        match algorithm {
            Algorithm::Legacy => self.legacy.as_ref(),
            Algorithm::Combined => self.combined.as_ref(),
            Algorithm::Queue => self.queue.as_ref(),
        }
    }

    fn used(&self, algorithm: Algorithm) {
        let now = self.clock.now();
        self.state().last_used.insert(algorithm, now);
    }

    /// Binds a new acquisition of `lock` (R3).
    fn begin(
        self: &Arc<Self>,
        lock: &LockId,
        cancel: Option<&CancellationToken>,
    ) -> Result<Attempt, AcquireError> {
        let mut st = self.state();
        if st.closed {
            return Err(AcquireError::NodeStopped {
                lock: lock.clone(),
                node: self.id.clone(),
            });
        }
        self.reevaluate(&mut st, Instant::now());
        let algorithm = st.resolution.algorithm;
        let st = &mut *st;
        let (id, binding) = st.bindings.bind(algorithm, &st.view, cancel);
        Ok(Attempt {
            shared: self.clone(),
            id,
            algorithm,
            binding,
            armed: true,
        })
    }
}

/// One bound acquisition (R3): unbound when dropped, unless its guard was
/// handed out — then the guard carries a [`Held`] instead.
struct Attempt {
    shared: Arc<NodeParts>,
    id: u64,
    algorithm: Algorithm,
    /// What its locker reads: how it paces itself (a combined
    /// acquisition: what the node's confirmed stage calls for, updated
    /// while it waits), whether it was invalidated, where legacy holders
    /// it sees go.
    binding: Binding,
    /// Cleared when the binding passes to a [`Held`].
    armed: bool,
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if self.armed {
            self.shared.state().bindings.unbind(self.id);
        }
    }
}

/// A handed-out guard's binding: keeps the node running and reported while
/// the lock is held (R7), unbound when the guard goes — released, dropped,
/// or revoked by a shutdown.
struct Held {
    core: Arc<NodeInner>,
    id: u64,
    algorithm: Algorithm,
    since: Instant,
    /// The lease's own lost signal (a revocation does not fire it): a loss
    /// is counted when the guard goes, which a holder that watches `lost()`
    /// makes soon after — no task per held lock to watch it.
    lease_lost: CancellationToken,
}

impl Drop for Held {
    fn drop(&mut self) {
        let shared = &self.core.shared;
        shared
            .metrics
            .released(self.algorithm, self.since.elapsed());
        if self.lease_lost.is_cancelled() {
            shared.metrics.lease_lost(self.algorithm);
        }
        shared
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        shared.state().bindings.unbind(self.id);
    }
}

impl Node {
    /// Decides whether `attempt`'s guard may be handed out (R4, R8); if so, ties
    /// the binding to the guard. Otherwise the guard is released and the
    /// caller re-enters.
    async fn hand_out(
        &self,
        mut attempt: Attempt,
        guard: LockGuard,
        started: Instant,
    ) -> Option<LockGuard> {
        let refused = {
            let mut st = self.core.shared.state();
            let st = &mut *st;
            st.bindings
                .hand_out(attempt.id, &st.view, Instant::now().into_std())
                .err()
        };
        match refused {
            None => {
                let shared = &self.core.shared;
                shared.used(attempt.algorithm);
                shared
                    .metrics
                    .acquired(attempt.algorithm, started.elapsed());
                let revoker = Revoker::new(&guard);
                let held = Held {
                    core: self.core.clone(),
                    id: attempt.id,
                    algorithm: attempt.algorithm,
                    since: Instant::now(),
                    lease_lost: revoker.lease_lost(),
                };
                // The binding lives on in `held`, with the guard; the node
                // keeps the revoker so a shutdown can release it.
                attempt.armed = false;
                revoker.attach(Box::new(held));
                shared
                    .held
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(attempt.id, revoker);
                Some(guard)
            }
            Some(why) => {
                info!(node = %self.core.shared.id, lock = %guard.lock_id(), algorithm = %attempt.algorithm, ?why,
                    "the stage moved while this acquisition waited; releasing and re-entering");
                if let Err(e) = guard.release().await {
                    debug!(error = %e, "release of a refused guard left cells to their TTL");
                }
                None
            }
        }
    }

    /// [`Node::acquire_with`] once the name is a [`LockId`]. Each attempt
    /// is bound (its [`Binding`] paces it by the stage the node confirmed);
    /// one invalidated while it waits re-enters.
    ///
    /// # Cancel safety
    /// As every locker's; a dropped acquisition is unbound at once.
    pub(crate) async fn acquire_id(
        &self,
        lock: &LockId,
        options: AcquireOptions,
    ) -> Result<LockGuard, AcquireError> {
        let shared = &self.core.shared;
        let started = Instant::now();
        let deadline = options.timeout.map(|t| started + t);
        loop {
            let attempt = shared.begin(lock, options.cancel.as_ref())?;
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let inner = AcquireOptions {
                timeout: remaining,
                cancel: options.cancel.clone(),
                watch: options.watch.clone(),
                sharing: options.sharing,
            };
            match shared
                .locker(attempt.algorithm)
                .acquire_with(lock, inner, &attempt.binding)
                .await
            {
                Ok(won) => {
                    if let Some(guard) = self.hand_out(attempt, won, started).await {
                        return Ok(guard);
                    }
                }
                Err(AcquireError::Cancelled { lock, owner })
                    if invalidated(&attempt.binding, options.cancel.as_ref()) =>
                {
                    // R3: leave the line and re-enter with whatever the
                    // node resolves now.
                    drop(attempt);
                    if shared.state().closed {
                        return Err(AcquireError::NodeStopped {
                            lock,
                            node: shared.id.clone(),
                        });
                    }
                    debug!(%lock, %owner, "re-resolving a waiting acquisition");
                }
                Err(AcquireError::Timeout { lock, owner, .. }) => {
                    shared.metrics.timed_out(attempt.algorithm);
                    return Err(AcquireError::Timeout {
                        lock,
                        owner,
                        waited: started.elapsed(),
                    });
                }
                Err(e @ AcquireError::Unreachable { .. }) => {
                    // A wait the store cut short is a timeout for the
                    // metrics: the caller waited its deadline out.
                    shared.metrics.timed_out(attempt.algorithm);
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// [`Node::try_acquire`] once the name is a [`LockId`].
    pub(crate) async fn try_acquire_id(
        &self,
        lock: &LockId,
        sharing: Sharing,
    ) -> Result<LockGuard, TryAcquireError> {
        let shared = &self.core.shared;
        // A second try covers a stage change between resolving and handing
        // out; a third would only chase a flapping stage.
        let started = Instant::now();
        for _ in 0..2 {
            let attempt = shared.begin(lock, None)?;
            let won = shared
                .locker(attempt.algorithm)
                .try_acquire_shared(lock, sharing, &attempt.binding)
                .await?;
            if let Some(guard) = self.hand_out(attempt, won, started).await {
                return Ok(guard);
            }
        }
        Err(TryAcquireError::Held {
            lock: lock.clone(),
            holder: None,
        })
    }
}

/// Whether a `Cancelled` acquisition was cut short by its invalidation
/// (R3), not by its caller: the binding was invalidated and the caller's
/// token has not fired. A locker checks the caller's token first, so a
/// cancel by both is the caller's.
fn invalidated(binding: &Binding, caller: Option<&CancellationToken>) -> bool {
    binding.is_invalidated() && !caller.is_some_and(CancellationToken::is_cancelled)
}
