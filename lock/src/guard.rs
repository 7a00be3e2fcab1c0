//! [`LockGuard`]: proof of holding a lock, released explicitly or on drop.

use std::fmt;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span};

use crate::api::Algorithm;
use crate::error::{LeaseLostReason, ReleaseError};
use crate::id::{LockId, OwnerId};
use crate::lease::Lease;

/// A held lock.
///
/// Release it with [`release`](LockGuard::release) to learn whether its cells
/// were removed; dropping it releases in the background (best effort). While
/// held, its lease is renewed in the background; watch
/// [`lost`](LockGuard::lost) and stop touching the guarded resource when it
/// fires.
pub struct LockGuard {
    lease: Option<Lease>,
    lock: LockId,
    owner: OwnerId,
    algorithm: Algorithm,
    fencing_token: Option<u64>,
    acquired_at: Instant,
    lost: CancellationToken,
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock)
            .field("owner", &self.owner)
            .field("algorithm", &self.algorithm)
            .field("fencing_token", &self.fencing_token)
            .field("lost", &self.lost.is_cancelled())
            .finish()
    }
}

impl LockGuard {
    /// Wraps the lease of a successful acquisition. For lockers only.
    pub fn new(lease: Lease, algorithm: Algorithm, fencing_token: Option<u64>) -> Self {
        LockGuard {
            lock: lease.lock().clone(),
            owner: lease.owner().clone(),
            lost: lease.lost_token(),
            lease: Some(lease),
            algorithm,
            fencing_token,
            acquired_at: Instant::now(),
        }
    }

    /// The lock held.
    pub fn lock_id(&self) -> &LockId {
        &self.lock
    }

    /// The owner id of this acquisition (unique per acquisition).
    pub fn owner(&self) -> &OwnerId {
        &self.owner
    }

    /// The algorithm that took the lock (and will release it).
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// A token that grows with every acquisition of this lock through the
    /// queue (the queue cell's time prefix, in µs): hand it to the guarded
    /// resource so it can refuse a stale holder. `None` for legacy holders.
    pub fn fencing_token(&self) -> Option<u64> {
        self.fencing_token
    }

    /// When the lock was acquired (tokio's clock).
    pub fn acquired_at(&self) -> Instant {
        self.acquired_at
    }

    /// The lease-lost signal: fires (once, for good) when the lease can no
    /// longer be proven — before the TTL can run out. Not fired by release.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn work() {}
    /// # async fn f(guard: lockshift_lock::LockGuard) {
    /// let lost = guard.lost();
    /// tokio::select! {
    ///     _ = lost.cancelled() => eprintln!("lost the lock, stopping"),
    ///     _ = work() => {}
    /// }
    /// let _ = guard.release().await;
    /// # }
    /// ```
    pub fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Whether the lease is lost — checked against the clock, not only the
    /// signal: `true` as soon as the last proven renewal is older than the
    /// limit (`lost_after_fraction × lease_ttl`), even if the background
    /// task has not run yet (a paused process). Call it right before every
    /// action on the guarded resource; hand the resource the
    /// [fencing token](Self::fencing_token) too, since a pause can still
    /// fall between this check and the action.
    pub fn is_lost(&self) -> bool {
        self.check_valid().is_err()
    }

    /// Whether the lease is still proven now, and why not: as
    /// [`is_lost`](Self::is_lost), with the reason. An overdue lease is
    /// declared lost here, so [`lost`](Self::lost) fires too.
    ///
    /// # Errors
    /// The reason the lease is lost.
    pub fn check_valid(&self) -> Result<(), LeaseLostReason> {
        match &self.lease {
            Some(lease) => lease.check_valid(),
            // Only `release` takes the lease, and it consumes the guard: no
            // caller can observe this state.
            None => Ok(()),
        }
    }

    /// Why the lease was lost, once it was.
    pub fn lost_reason(&self) -> Option<LeaseLostReason> {
        self.lease.as_ref().and_then(Lease::lost_reason)
    }

    /// Releases the lock: stops renewal and deletes every cell the
    /// acquisition wrote, in one round trip per table, concurrently.
    ///
    /// # Errors
    /// [`ReleaseError`] when some cells could not be deleted; they expire
    /// within the lease TTL.
    ///
    /// # Cancel safety
    /// If the future is dropped, the remaining cells are deleted in the
    /// background.
    pub async fn release(mut self) -> Result<(), ReleaseError> {
        let Some(lease) = self.lease.take() else {
            return Ok(());
        };
        let span = info_span!("release", lock = %self.lock, owner = %self.owner, algorithm = %self.algorithm);
        let held_for = self.acquired_at.elapsed();
        let ttl = lease.ttl().as_duration();
        async move {
            let result = lease.release().await;
            info!(?held_for, ok = result.is_ok(), "released");
            result
        }
        .instrument(span)
        .await
        .map_err(|source| ReleaseError {
            lock: self.lock.clone(),
            owner: self.owner.clone(),
            ttl,
            source,
        })
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.lease.is_some() {
            info!(lock = %self.lock, owner = %self.owner, algorithm = %self.algorithm,
                "guard dropped without release; releasing in the background");
        }
        // The lease's own Drop stops renewal and deletes its cells.
    }
}
