//! [`LockGuard`]: the lock a [`Node`](crate::Node) handed out — the lock an
//! algorithm won, the node's keep-alive, and its release for the holder at
//! shutdown.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use lockshift_lock::{Algorithm, FenceError, LeaseLostReason, LockId, OwnerId, ReleaseError, Won};
use tokio::sync::RwLock;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// A held lock.
///
/// Release it with [`release`](LockGuard::release) to learn whether its cells
/// were removed; dropping it releases in the background (best effort — and
/// not at all if the runtime is shutting down, e.g. at the end of `main`:
/// the cells then live out their TTL). While held, its lease is renewed in
/// the background; watch [`lost`](LockGuard::lost) and stop touching the
/// guarded resource when it fires.
///
/// A guard cannot be made by its holder: only a [`Node`](crate::Node) that
/// took the lock hands one out.
///
/// ```compile_fail
/// # fn forge(won: lockshift_lock::Won) {
/// // No public constructor: a guard comes only from a node.
/// let guard = lockshift::LockGuard::new(won, Box::new(()));
/// # }
/// ```
///
/// ```compile_fail
/// # fn forge(lock: lockshift::LockId, taken: lockshift::LockGuard) -> lockshift::LockGuard {
/// // Nor a struct literal, even from another guard: its fields are private.
/// lockshift::LockGuard { lock, ..taken }
/// # }
/// ```
///
/// ```
/// # use std::sync::Arc;
/// # use lockshift_store::MemoryStore;
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // Where a guard does come from.
/// let node = lockshift::Node::builder().store(Arc::new(MemoryStore::new())).start().await?;
/// let guard: lockshift::LockGuard = node.acquire("accounts").await?;
/// guard.release().await?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[must_use = "the lock is held only while the guard lives: keep it for as long as you use the resource, then `release().await` it"]
pub struct LockGuard {
    core: Arc<GuardCore>,
    lock: LockId,
    owner: OwnerId,
    algorithm: Algorithm,
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
    won: RwLock<Option<Won>>,
    /// What the node keeps alive for as long as the lock is held (its
    /// record of this acquisition); dropped after the lease is released.
    /// Declared after `won` so a plain drop releases first, then lets go of
    /// the attachment.
    attachment: Mutex<Option<Box<dyn Any + Send + Sync>>>,
    lost: CancellationToken,
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock)
            .field("owner", &self.owner)
            .field("algorithm", &self.algorithm)
            .field("lost", &self.lost.is_cancelled())
            .finish()
    }
}

impl LockGuard {
    /// Wraps `won` for its holder; `attachment` lives until the lock is
    /// released (or the guard dropped, or the lock revoked) and is dropped
    /// after the lease's cells are deleted. Returns the revoker the node
    /// keeps. Only the node's hand-out calls it.
    pub(crate) fn new(won: Won, attachment: Box<dyn Any + Send + Sync>) -> (Self, Revoker) {
        // A child of the lease's signal: it fires with it, and a revocation
        // can fire it alone.
        let lost = won.lost().child_token();
        let guard = LockGuard {
            lock: won.lock_id().clone(),
            owner: won.owner().clone(),
            algorithm: won.algorithm(),
            acquired_at: won.acquired_at(),
            core: Arc::new(GuardCore {
                lock: won.lock_id().clone(),
                owner: won.owner().clone(),
                won: RwLock::new(Some(won)),
                attachment: Mutex::new(Some(attachment)),
                lost: lost.clone(),
            }),
            lost,
        };
        let revoker = Revoker {
            core: Arc::downgrade(&guard.core),
        };
        (guard, revoker)
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
    /// Why tokens increase, holder after holder and whatever the
    /// algorithm, is argued once, at [`Won::fencing_token`] (the lock the
    /// algorithm won, which takes the token). Binaries that predate
    /// lockshift take no tokens; a resource shared with them cannot be
    /// fenced.
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
        let Ok(won) = self.core.won.try_read() else {
            return Err(revoked());
        };
        match won.as_ref() {
            Some(won) => won.fencing_token().await,
            None => Err(revoked()),
        }
    }

    /// Writes a cell of the lock's row in `table` through the lease (it
    /// lives as long as the holding); `None` once the lock was revoked.
    pub(crate) async fn write_cell(
        &self,
        table: lockshift_store::Table,
        column: &str,
        value: &[u8],
    ) -> Option<Result<(), lockshift_store::StoreError>> {
        let won = self.core.won.try_read().ok()?;
        let won = won.as_ref()?;
        Some(won.write_cell(table, column, value).await)
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
    /// # async fn f(guard: lockshift::LockGuard) {
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
    /// # async fn f(guard: lockshift::LockGuard) {
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
        self.reading_won(Won::check_valid)
            .unwrap_or(Err(LeaseLostReason::Revoked))
    }

    /// Why the lease was lost, once it was.
    pub fn lost_reason(&self) -> Option<LeaseLostReason> {
        self.reading_won(Won::lost_reason)
            .unwrap_or(Some(LeaseLostReason::Revoked))
    }

    /// `read` of the lock this guard holds, or `None` when it was revoked.
    /// Only a revocation write-locks it (`release` consumes the guard), so
    /// a guard that cannot read its lock at once holds nothing.
    fn reading_won<T>(&self, read: impl FnOnce(&Won) -> T) -> Option<T> {
        let won = self.core.won.try_read().ok()?;
        won.as_ref().map(read)
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
        self.core.release(None).await.map(|_| ())
    }
}

impl GuardCore {
    /// Releases the lock if it is still here: `Ok(true)` if this call did,
    /// `Ok(false)` if it was already gone. `revoked` fires the guard's lost
    /// signal first (a revocation: the holder must stop).
    async fn release(&self, revoked: Option<&CancellationToken>) -> Result<bool, ReleaseError> {
        let won = self.won.write().await.take();
        let Some(won) = won else {
            return Ok(false);
        };
        let result = match revoked {
            // The holder's own release: the lock's release record too.
            None => won.release().await,
            // For the holder: its lost signal fires first, and only the
            // revocation is recorded (below).
            Some(lost) => {
                lost.cancel();
                let lease = won.into_lease();
                let ttl = lease.ttl().as_duration();
                lease.release().await.map_err(|error| ReleaseError {
                    lock: self.lock.clone(),
                    owner: self.owner.clone(),
                    ttl,
                    error,
                })
            }
        };
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

/// Releases a guard's lock for its holder: the guard's
/// [`lost`](LockGuard::lost) signal fires, its checks report
/// [`LeaseLostReason::Revoked`], and its own `release` becomes a no-op.
/// The node keeps one for every guard it handed out, so that a graceful
/// shutdown releases what is still held. It does not keep the guard alive.
#[derive(Clone)]
pub(crate) struct Revoker {
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
    pub(crate) async fn revoke(&self) -> Result<bool, ReleaseError> {
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
