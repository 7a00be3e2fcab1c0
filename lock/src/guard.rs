//! [`LockGuard`]: proof of holding a lock, released explicitly or on drop.

use std::fmt;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span};

use crate::api::Algorithm;
use crate::error::{FenceError, LeaseLostReason, ReleaseError};
use crate::id::{LockId, OwnerId};
use crate::lease::{FenceFailure, Lease};

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
    /// The fencing token, once asked for (one per guard).
    fencing_token: tokio::sync::OnceCell<u64>,
    acquired_at: Instant,
    lost: CancellationToken,
    /// Whatever the locker that handed the guard out keeps alive for as long
    /// as the lock is held (the node runtime's record of this acquisition);
    /// dropped after the lease is released.
    attachment: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock)
            .field("owner", &self.owner)
            .field("algorithm", &self.algorithm)
            .field("fencing_token", &self.fencing_token.get())
            .field("lost", &self.lost.is_cancelled())
            .finish()
    }
}

impl LockGuard {
    /// Wraps the lease of a successful acquisition. For lockers only.
    #[doc(hidden)]
    pub fn new(lease: Lease, algorithm: Algorithm) -> Self {
        LockGuard {
            lock: lease.lock().clone(),
            owner: lease.owner().clone(),
            lost: lease.lost_token(),
            lease: Some(lease),
            algorithm,
            fencing_token: tokio::sync::OnceCell::new(),
            acquired_at: Instant::now(),
            attachment: None,
        }
    }

    /// Keeps `value` alive until the lock is released (or the guard dropped),
    /// and drops it after the lease's cells are deleted. For lockers that
    /// wrap others: the node runtime attaches its record of the acquisition.
    #[doc(hidden)]
    pub fn attach(&mut self, value: Box<dyn std::any::Any + Send + Sync>) {
        self.attachment = Some(value);
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

    /// A fencing token for this hold: larger than every token any earlier
    /// holder of this lock was given, whatever algorithm either used. Hand it
    /// to the guarded resource with every request, and have the resource
    /// refuse a request whose token is below the largest it has seen — then
    /// a holder that was paused past its lease (and so replaced) cannot
    /// touch the resource after its successor did.
    ///
    /// The first call costs two store round trips (read the lock's fencing
    /// cell, advance it); later calls return the same token at once.
    ///
    /// # Why tokens increase
    /// The token is `max(last + 1, now)` where `last` is read from the
    /// lock's fencing cell, and it is written back as that cell's value *and*
    /// write timestamp, so the cell never moves back (last write wins by
    /// timestamp). A holder gets its token only after that write is
    /// acknowledged *and* its lease is still proven — so while its `main`
    /// cell still existed. The next holder took the lock only after that
    /// cell was gone, hence after the write, and its own read of the fencing
    /// cell (later still) sees the token or a newer one. Tokens of holders
    /// that never ask are simply skipped. Binaries that predate lockshift
    /// take no tokens; a resource shared with them cannot be fenced.
    ///
    /// # Errors
    /// [`FenceError::Store`] if the cell could not be read or written (ask
    /// again), [`FenceError::LeaseLost`] if the lease was lost meanwhile
    /// (stop touching the resource).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves the fencing cell advanced or not,
    /// and the next call takes a new token either way.
    pub async fn fencing_token(&self) -> Result<u64, FenceError> {
        let Some(lease) = &self.lease else {
            // Only `release` takes the lease, and it consumes the guard.
            return Err(FenceError::LeaseLost {
                lock: self.lock.clone(),
                owner: self.owner.clone(),
                reason: LeaseLostReason::Released,
            });
        };
        self.fencing_token
            .get_or_try_init(|| async {
                lease.next_fencing_token().await.map_err(|e| match e {
                    FenceFailure::Store(source) => FenceError::Store {
                        lock: self.lock.clone(),
                        source,
                    },
                    FenceFailure::Lost(reason) => FenceError::LeaseLost {
                        lock: self.lock.clone(),
                        owner: self.owner.clone(),
                        reason,
                    },
                })
            })
            .await
            .copied()
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
            // Only `release` takes the lease, and it consumes the guard.
            None => Err(LeaseLostReason::Released),
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
