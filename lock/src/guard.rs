//! [`LockGuard`]: proof of holding a lock, released explicitly or on drop.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::RwLock;
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
/// were removed; dropping it releases in the background (best effort — and
/// not at all if the runtime is shutting down, e.g. at the end of `main`:
/// the cells then live out their TTL). While held, its lease is renewed in
/// the background; watch [`lost`](LockGuard::lost) and stop touching the
/// guarded resource when it fires.
///
/// A guard cannot be made by its holder: only a locker that took the lock
/// hands one out.
#[must_use = "the lock is held only while the guard lives: keep it for as long as you use the resource, then `release().await` it"]
pub struct LockGuard {
    core: Arc<GuardCore>,
    lock: LockId,
    owner: OwnerId,
    algorithm: Algorithm,
    /// The fencing token, once asked for (one per guard).
    fencing_token: tokio::sync::OnceCell<u64>,
    acquired_at: Instant,
    /// Fires with the lease's lost signal, or when the lock is revoked.
    lost: CancellationToken,
}

/// What a [`Revoker`] shares with its guard.
struct GuardCore {
    lock: LockId,
    owner: OwnerId,
    /// `None` once the lock was revoked (a guard's own `release` consumes
    /// the guard). Read-locked across a fencing-token round trip; the write
    /// lock is taken only to revoke.
    lease: RwLock<Option<Lease>>,
    /// Whatever the locker that handed the guard out keeps alive for as long
    /// as the lock is held (the node runtime's record of this acquisition);
    /// dropped after the lease is released. Declared after `lease` so a
    /// plain drop releases first, then lets go of the attachment.
    attachment: Mutex<Option<Box<dyn Any + Send + Sync>>>,
    lost: CancellationToken,
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
    // Hidden until the facade owns the guard, which replaces this.
    #[doc(hidden)]
    pub fn new(lease: Lease, algorithm: Algorithm) -> Self {
        // A child of the lease's signal: it fires with it, and a revocation
        // can fire it alone.
        let lost = lease.lost_token().child_token();
        LockGuard {
            lock: lease.lock().clone(),
            owner: lease.owner().clone(),
            core: Arc::new(GuardCore {
                lock: lease.lock().clone(),
                owner: lease.owner().clone(),
                lease: RwLock::new(Some(lease)),
                attachment: Mutex::new(None),
                lost: lost.clone(),
            }),
            lost,
            algorithm,
            fencing_token: tokio::sync::OnceCell::new(),
            acquired_at: Instant::now(),
        }
    }

    /// Keeps `value` alive until the lock is released (or the guard dropped,
    /// or the lock revoked), and drops it after the lease's cells are
    /// deleted. For lockers that wrap others: the node runtime attaches its
    /// record of the acquisition.
    // Hidden until the facade owns the guard, which replaces this.
    #[doc(hidden)]
    pub fn attach(&mut self, value: Box<dyn Any + Send + Sync>) {
        *self
            .core
            .attachment
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(value);
    }

    /// A handle that can release this lock for its holder (a node shutting
    /// down). It does not keep the guard alive. For lockers only.
    // Hidden until the facade owns the guard, which replaces this.
    #[doc(hidden)]
    pub fn revoker(&self) -> Revoker {
        Revoker {
            core: Arc::downgrade(&self.core),
        }
    }

    /// The lease's own lost signal, which a revocation does not fire (the
    /// node runtime counts real lease losses with it). For lockers only.
    // Hidden until the facade owns the guard, which replaces this.
    #[doc(hidden)]
    pub fn lease_lost_token(&self) -> CancellationToken {
        // The parent of `lost`: kept by the lease for as long as it lives.
        match self.core.lease.try_read() {
            Ok(lease) => lease
                .as_ref()
                .map_or_else(CancellationToken::new, Lease::lost_token),
            Err(_) => CancellationToken::new(),
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
        let revoked = || FenceError::LeaseLost {
            lock: self.lock.clone(),
            owner: self.owner.clone(),
            reason: LeaseLostReason::Revoked,
        };
        // Read-locked for the round trips: a revocation waits for them.
        let Ok(lease) = self.core.lease.try_read() else {
            return Err(revoked());
        };
        // `release` consumes the guard, so a missing lease was revoked.
        let Some(lease) = lease.as_ref() else {
            return Err(revoked());
        };
        self.fencing_token
            .get_or_try_init(|| async {
                lease.next_fencing_token().await.map_err(|e| match e {
                    FenceFailure::Store(error) => FenceError::Store {
                        lock: self.lock.clone(),
                        error,
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

    /// Resolves once the lock is lost — its lease can no longer be proven,
    /// or its node released it at shutdown — with the reason: the form of
    /// [`lost`](Self::lost) for `tokio::select!`.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn work() {}
    /// # async fn f(guard: lockshift_lock::LockGuard) {
    /// tokio::select! {
    ///     reason = guard.until_lost() => eprintln!("lost the lock ({reason}), stopping"),
    ///     _ = work() => {}
    /// }
    /// let _ = guard.release().await;
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub async fn until_lost(&self) -> LeaseLostReason {
        self.lost.cancelled().await;
        self.lost_reason().unwrap_or(LeaseLostReason::Revoked)
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
        // Only a revocation write-locks the lease; `release` consumes the
        // guard. Either way a guard that cannot read its lease holds nothing.
        match self.core.lease.try_read() {
            Ok(lease) => match lease.as_ref() {
                Some(lease) => lease.check_valid(),
                None => Err(LeaseLostReason::Revoked),
            },
            Err(_) => Err(LeaseLostReason::Revoked),
        }
    }

    /// Why the lease was lost, once it was.
    pub fn lost_reason(&self) -> Option<LeaseLostReason> {
        match self.core.lease.try_read() {
            Ok(lease) => match lease.as_ref() {
                Some(lease) => lease.lost_reason(),
                None => Some(LeaseLostReason::Revoked),
            },
            Err(_) => Some(LeaseLostReason::Revoked),
        }
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
    pub async fn release(self) -> Result<(), ReleaseError> {
        let span = info_span!("release", lock = %self.lock, owner = %self.owner, algorithm = %self.algorithm);
        let held_for = self.acquired_at.elapsed();
        self.core
            .release(None)
            .instrument(span)
            .await
            .inspect(|released| {
                if *released {
                    info!(?held_for, "released");
                }
            })
            .map(|_| ())
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // Only the last guard-side owner of the core logs: a revoker may
        // hold it for a moment, and then releases itself.
        let live = self
            .core
            .lease
            .try_read()
            .map(|l| l.is_some())
            .unwrap_or(false);
        if live {
            info!(lock = %self.lock, owner = %self.owner, algorithm = %self.algorithm,
                "guard dropped without release; releasing in the background");
        }
        // The lease's own Drop (with the core's) stops renewal and deletes
        // its cells.
    }
}

impl GuardCore {
    /// Releases the lease if it is still here: `Ok(true)` if this call did,
    /// `Ok(false)` if it was already gone. `revoked` fires the guard's lost
    /// signal first (a revocation: the holder must stop).
    async fn release(&self, revoked: Option<&CancellationToken>) -> Result<bool, ReleaseError> {
        let lease = self.lease.write().await.take();
        let Some(lease) = lease else {
            return Ok(false);
        };
        if let Some(lost) = revoked {
            lost.cancel();
        }
        let ttl = lease.ttl().as_duration();
        let result = lease.release().await;
        // The attachment goes after the cells (see its field).
        drop(
            self.attachment
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        result.map(|()| true).map_err(|error| ReleaseError {
            lock: self.lock.clone(),
            owner: self.owner.clone(),
            ttl,
            error,
        })
    }
}

/// Releases a guard's lock for its holder: the guard's
/// [`lost`](LockGuard::lost) signal fires, its checks report
/// [`LeaseLostReason::Revoked`], and its own `release` becomes a no-op.
/// Held by the node runtime for every guard it handed out, so that a
/// graceful shutdown releases what is still held. For lockers only.
// Hidden until the facade owns the guard, which replaces this.
#[doc(hidden)]
#[derive(Clone)]
pub struct Revoker {
    core: Weak<GuardCore>,
}

impl fmt::Debug for Revoker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let core = self.core.upgrade();
        f.debug_struct("Revoker")
            .field("lock", &core.as_ref().map(|c| &c.lock))
            .field("owner", &core.as_ref().map(|c| &c.owner))
            .finish()
    }
}

impl Revoker {
    /// Releases the lock if the guard still holds it; `Ok(true)` if this
    /// call did.
    ///
    /// # Errors
    /// [`ReleaseError`] when some cells could not be deleted; they expire
    /// within the lease TTL.
    ///
    /// # Cancel safety
    /// If dropped after it started deleting, the cells are deleted in the
    /// background; the guard counts as revoked either way.
    pub async fn revoke(&self) -> Result<bool, ReleaseError> {
        let Some(core) = self.core.upgrade() else {
            return Ok(false);
        };
        let lost = core.lost.clone();
        let revoked = core.release(Some(&lost)).await;
        if let Ok(true) = revoked {
            info!(lock = %core.lock, owner = %core.owner, "released for its holder (revoked)");
        }
        revoked
    }
}
