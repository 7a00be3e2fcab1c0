//! Lockers of each algorithm for simulated nodes, all from the one factory
//! (`lockshift_rollout::Lockers`): each locker owns its time service.

use std::sync::Arc;

use async_trait::async_trait;
use lockshift_decide::binding::Pacing;
use lockshift_lock::{
    AcquireError, AcquireOptions, Algorithm, Binding, LockGuard, LockId, Locker, TryAcquireError,
};
use lockshift_queue_lock::{QueueSettings, TimeSettings};
use lockshift_rollout::{LockerSettings, Lockers};

use crate::sim::NodeEnv;

/// A simulated node's raw locker (no node runtime: the simulations drive
/// the algorithms directly).
#[derive(Debug)]
pub struct SimLocker {
    /// The locker (it keeps its own time service running).
    pub locker: Arc<dyn Locker>,
}

fn build(env: &NodeEnv, algorithm: Algorithm, settings: LockerSettings) -> SimLocker {
    SimLocker {
        locker: Lockers::new(env.ctx.clone(), settings).build(algorithm),
    }
}

/// A legacy locker for `env`.
pub fn legacy(env: &NodeEnv) -> SimLocker {
    build(env, Algorithm::Legacy, LockerSettings::default())
}

/// A queue locker for `env` with the default (hybrid) time service.
pub fn queue(env: &NodeEnv) -> SimLocker {
    queue_with(env, QueueSettings::default(), TimeSettings::default())
}

/// A queue locker for `env` with the given settings.
pub fn queue_with(env: &NodeEnv, queue: QueueSettings, time: TimeSettings) -> SimLocker {
    build(
        env,
        Algorithm::Queue,
        LockerSettings {
            queue,
            time,
            ..LockerSettings::default()
        },
    )
}

/// A combined locker for `env` with the default (hybrid) time service.
pub fn combined(env: &NodeEnv) -> SimLocker {
    build(env, Algorithm::Combined, LockerSettings::default())
}

/// A combined locker for `env` at full speed, as from stage `dual` on: it
/// prepares hand-offs (a checked `shadow` cell, reservations behind the
/// waiter ahead) even though a legacy contender may be about — which a
/// rollout never lets happen, but exclusion must not depend on.
pub fn combined_at_full_speed(env: &NodeEnv) -> SimLocker {
    SimLocker {
        locker: Arc::new(AtFullSpeed(
            build(env, Algorithm::Combined, LockerSettings::default()).locker,
        )),
    }
}

/// A locker whose acquisitions pace at full speed where their binding sets
/// no pacing: the part a node at stage `dual` plays, through the binding as
/// a node's own.
#[derive(Debug)]
struct AtFullSpeed(Arc<dyn Locker>);

#[async_trait]
impl Locker for AtFullSpeed {
    fn algorithm(&self) -> Algorithm {
        self.0.algorithm()
    }

    async fn acquire_with(
        &self,
        lock: &LockId,
        options: AcquireOptions,
        binding: &Binding,
    ) -> Result<LockGuard, AcquireError> {
        let binding = binding.with_default_pacing(Pacing::FullSpeed);
        self.0.acquire_with(lock, options, &binding).await
    }

    async fn try_acquire(
        &self,
        lock: &LockId,
        binding: &Binding,
    ) -> Result<LockGuard, TryAcquireError> {
        let binding = binding.with_default_pacing(Pacing::FullSpeed);
        self.0.try_acquire(lock, &binding).await
    }

    async fn try_acquire_shared(
        &self,
        lock: &LockId,
        sharing: lockshift_lock::Sharing,
        binding: &Binding,
    ) -> Result<LockGuard, TryAcquireError> {
        let binding = binding.with_default_pacing(Pacing::FullSpeed);
        self.0.try_acquire_shared(lock, sharing, &binding).await
    }
}
