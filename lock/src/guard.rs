//! [`LockGuard`]: the one guard of a held lock — what a locker hands out,
//! and what a `lockshift::Node` hands its caller — released explicitly, on
//! drop, or for its holder through a [`Revoker`].

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
/// Release it with [`release`](LockGuard::release) to learn whether its
/// cells were removed; dropping it releases in the background (best effort
/// — and not at all if the runtime is shutting down, e.g. at the end of
/// `main`: the cells then live out their TTL). While held, its lease is
/// renewed in the background; watch [`lost`](LockGuard::lost) and stop
/// touching the guarded resource when it fires.
///
/// A service gets one from its `lockshift::Node`, which also releases it
/// for the holder at shutdown (the guard then reports
/// [`LeaseLostReason::Revoked`]). Only a locker makes one, from the lease
/// of the acquisition that took the lock ([`Lease::into_guard`]); its
/// fields are its own:
///
/// ```compile_fail
/// # fn forge(lock: lockshift_lock::LockId, taken: lockshift_lock::LockGuard) -> lockshift_lock::LockGuard {
/// // No struct literal, even from another guard: its fields are private.
/// lockshift_lock::LockGuard { lock, ..taken }
/// # }
/// ```
#[must_use = "the lock is held only while the guard lives: keep it for as long as you use the resource, then `release().await` it"]
pub struct LockGuard {
    core: Arc<Hold>,
    lock: LockId,
    owner: OwnerId,
    algorithm: Algorithm,
    acquired_at: Instant,
    /// The fencing token, once asked for (one per hold).
    fencing_token: tokio::sync::OnceCell<u64>,
    /// Fires with the lease's lost signal, or when the lock is revoked.
    lost: CancellationToken,
}

/// What a guard shares with its [`Revoker`]s.
struct Hold {
    lock: LockId,
    owner: OwnerId,
    algorithm: Algorithm,
    /// `None` once the lock was released (`release` consumes the guard, so
    /// only a revocation leaves a guard without it). Read-locked across a
    /// fencing-token round trip; the write lock is taken only to release.
    lease: RwLock<Option<Lease>>,
    /// The lease's own lost signal (a revocation does not fire it).
    lease_lost: CancellationToken,
    /// The guard's lost signal: a child of the lease's.
    lost: CancellationToken,
    /// What the guard's hander-out keeps alive for as long as the lock is
    /// held ([`Revoker::attach`]); dropped after the lease is released.
    /// Declared after `lease` so a plain drop releases first, then lets go
    /// of the attachment.
    attachment: Mutex<Option<Box<dyn Any + Send + Sync>>>,
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

impl Lease {
    /// The guard of the lock this lease's acquisition took by `algorithm`:
    /// how a locker hands it out. Acquired now.
    pub fn into_guard(self, algorithm: Algorithm) -> LockGuard {
        let lease_lost = self.lost_token();
        // A child of the lease's signal: it fires with it, and a
        // revocation can fire it alone.
        let lost = lease_lost.child_token();
        let (lock, owner) = (self.lock().clone(), self.owner().clone());
        LockGuard {
            core: Arc::new(Hold {
                lock: lock.clone(),
                owner: owner.clone(),
                algorithm,
                lease: RwLock::new(Some(self)),
                lease_lost,
                lost: lost.clone(),
                attachment: Mutex::new(None),
            }),
            lock,
            owner,
            algorithm,
            acquired_at: Instant::now(),
            fencing_token: tokio::sync::OnceCell::new(),
            lost,
        }
    }
}

impl LockGuard {
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
    /// again), [`FenceError::LeaseLost`] if the lease was lost meanwhile, or
    /// the lock released for its holder (stop touching the resource).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves the fencing cell advanced or not,
    /// and the next call takes a new token either way.
    pub async fn fencing_token(&self) -> Result<u64, FenceError> {
        let lost = |reason| FenceError::LeaseLost {
            lock: self.lock.clone(),
            owner: self.owner.clone(),
            reason,
        };
        // Read-locked for the round trips: a revocation waits for them.
        let Ok(lease) = self.core.lease.try_read() else {
            return Err(lost(LeaseLostReason::Revoked));
        };
        let Some(lease) = lease.as_ref() else {
            return Err(lost(LeaseLostReason::Revoked));
        };
        self.fencing_token
            .get_or_try_init(|| async {
                lease.next_fencing_token().await.map_err(|e| match e {
                    FenceFailure::Store(error) => FenceError::Store {
                        lock: self.lock.clone(),
                        error,
                    },
                    FenceFailure::Lost(reason) => lost(reason),
                })
            })
            .await
            .copied()
    }

    /// When the lock was acquired (tokio's clock).
    pub fn acquired_at(&self) -> Instant {
        self.acquired_at
    }

    /// The lost signal: fires (once, for good) when the lease can no longer
    /// be proven — before the TTL can run out — or when the lock is
    /// released for its holder (its node shut down). Not fired by the
    /// holder's own release.
    ///
    /// # Examples
    /// ```no_run
    /// # use lockshift_lock::LockGuard;
    /// # async fn work() {}
    /// # async fn f(guard: LockGuard) {
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
    /// or it was released for its holder — with the reason: the form of
    /// [`lost`](Self::lost) for `tokio::select!`.
    ///
    /// # Examples
    /// ```no_run
    /// # use lockshift_lock::LockGuard;
    /// # async fn work() {}
    /// # async fn f(guard: LockGuard) {
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
        self.core
            .reading(Lease::check_valid)
            .unwrap_or(Err(LeaseLostReason::Revoked))
    }

    /// Why the lease was lost, once it was.
    pub fn lost_reason(&self) -> Option<LeaseLostReason> {
        self.core
            .reading(Lease::lost_reason)
            .unwrap_or(Some(LeaseLostReason::Revoked))
    }

    /// Releases the lock: stops renewal and deletes every cell the
    /// acquisition wrote, in one round trip per table, concurrently. A lock
    /// already released for its holder is not released again.
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
        let released = self.core.release(None).instrument(span).await;
        if let Ok(true) = released {
            info!(?held_for, "released");
        }
        released.map(|_| ())
    }

    /// Writes the cell `column` of this lock's row in `table` through the
    /// lease: it carries the lease TTL, is renewed with the holding and
    /// deleted at release — a cell that lives exactly as long as the lock
    /// is held. `None` once the lock was released for its holder.
    pub(crate) async fn write_cell(
        &self,
        table: lockshift_store::Table,
        column: &str,
        value: &[u8],
    ) -> Option<Result<(), lockshift_store::StoreError>> {
        let lease = self.core.lease.try_read().ok()?;
        let lease = lease.as_ref()?;
        Some(lease.write(table, column, value).await)
    }
}

impl Hold {
    /// `read` of the lease, or `None` when it was released. Only a release
    /// write-locks it, so a guard that cannot read its lease at once holds
    /// nothing.
    fn reading<T>(&self, read: impl FnOnce(&Lease) -> T) -> Option<T> {
        let lease = self.lease.try_read().ok()?;
        lease.as_ref().map(read)
    }

    /// Releases the lock if it is still here: `Ok(true)` if this call did,
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
        let result = lease.release().await.map_err(|error| ReleaseError {
            lock: self.lock.clone(),
            owner: self.owner.clone(),
            ttl,
            error,
        });
        // The attachment goes after the cells (see its field).
        drop(
            self.attachment
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        result.map(|()| true)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.lease.get_mut().is_some() {
            info!(lock = %self.lock, owner = %self.owner, algorithm = %self.algorithm,
                "guard dropped without release; releasing in the background");
        }
        // The lease's own drop (a field, dropped next) stops renewal and
        // deletes its cells; the attachment follows it.
    }
}

/// Releases a guard's lock for its holder: the guard's
/// [`lost`](LockGuard::lost) signal fires, its checks report
/// [`LeaseLostReason::Revoked`], and its own `release` becomes a no-op.
/// A `lockshift::Node` keeps one for every guard it handed out, so that a
/// graceful shutdown releases what is still held. It does not keep the
/// guard alive.
#[derive(Clone)]
pub struct Revoker {
    core: Weak<Hold>,
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
    /// A revoker of `guard`'s lock.
    pub fn new(guard: &LockGuard) -> Revoker {
        Revoker {
            core: Arc::downgrade(&guard.core),
        }
    }

    /// The lease's own lost signal, which a revocation does not fire (the
    /// guard's [`lost`](LockGuard::lost) fires on both); a token that never
    /// fires once the guard is gone.
    pub fn lease_lost(&self) -> CancellationToken {
        self.core
            .upgrade()
            .map_or_else(CancellationToken::new, |core| core.lease_lost.clone())
    }

    /// Keeps `attachment` alive for as long as the guard holds the lock:
    /// it is dropped once the lock is released — by the holder, by a
    /// revocation, or when the guard is dropped — after the lease's cells
    /// are deleted (or their deletion started in the background). Replaces
    /// an earlier attachment; dropped at once if the guard is gone.
    pub fn attach(&self, attachment: Box<dyn Any + Send + Sync>) {
        if let Some(core) = self.core.upgrade() {
            let old = core
                .attachment
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .replace(attachment);
            drop(old);
        }
    }

    /// Releases the lock if the guard still holds it; `Ok(true)` if this
    /// call did. Waits for a fencing-token call in flight on the guard.
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
