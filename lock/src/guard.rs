//! [`Won`]: what a locker hands out for a lock it took — the lease, released
//! explicitly or on drop.

use std::fmt;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span};

use crate::api::Algorithm;
use crate::error::{FenceError, LeaseLostReason, ReleaseError};
use crate::id::{LockId, OwnerId};
use crate::lease::{FenceFailure, Lease};

/// A lock won by one algorithm's locker.
///
/// A service never sees one: the `lockshift` crate's node wraps it into
/// the service's `LockGuard`, which adds the node's keep-alive and its
/// release at shutdown. Tests, benchmarks and other algorithm crates use it
/// directly.
///
/// Release it with [`release`](Won::release) to learn whether its cells
/// were removed; dropping it releases in the background (best effort — and
/// not at all if the runtime is shutting down, e.g. at the end of `main`:
/// the cells then live out their TTL). While held, its lease is renewed in
/// the background; watch [`lost`](Won::lost) and stop touching the
/// guarded resource when it fires.
#[must_use = "the lock is held only while the guard lives: keep it for as long as you use the resource, then `release().await` it"]
pub struct Won {
    /// Logs a drop without release; declared first, so it logs before the
    /// lease's own drop starts deleting the cells.
    note: DropNote,
    lease: Lease,
    lock: LockId,
    owner: OwnerId,
    algorithm: Algorithm,
    /// The fencing token, once asked for (one per hold).
    fencing_token: tokio::sync::OnceCell<u64>,
    acquired_at: Instant,
    /// The lease's lost signal.
    lost: CancellationToken,
}

impl fmt::Debug for Won {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Won")
            .field("lock", &self.lock)
            .field("owner", &self.owner)
            .field("algorithm", &self.algorithm)
            .field("fencing_token", &self.fencing_token.get())
            .field("lost", &self.lost.is_cancelled())
            .finish()
    }
}

impl Won {
    /// Wraps the lease of a successful acquisition by `algorithm`: how a
    /// locker hands out the lock it took. Acquired now.
    pub fn new(lease: Lease, algorithm: Algorithm) -> Self {
        Won {
            note: DropNote {
                lock: lease.lock().clone(),
                owner: lease.owner().clone(),
                algorithm,
                armed: true,
            },
            lock: lease.lock().clone(),
            owner: lease.owner().clone(),
            lost: lease.lost_token(),
            lease,
            algorithm,
            fencing_token: tokio::sync::OnceCell::new(),
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
        let lease = &self.lease;
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
    /// # async fn f(won: lockshift_lock::Won) {
    /// let lost = won.lost();
    /// tokio::select! {
    ///     _ = lost.cancelled() => eprintln!("lost the lock, stopping"),
    ///     _ = work() => {}
    /// }
    /// let _ = won.release().await;
    /// # }
    /// ```
    pub fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Resolves once the lease can no longer be proven, with the reason:
    /// the form of [`lost`](Self::lost) for `tokio::select!`.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn work() {}
    /// # async fn f(won: lockshift_lock::Won) {
    /// tokio::select! {
    ///     reason = won.until_lost() => eprintln!("lost the lock ({reason}), stopping"),
    ///     _ = work() => {}
    /// }
    /// let _ = won.release().await;
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
        self.lease.check_valid()
    }

    /// Why the lease was lost, once it was.
    pub fn lost_reason(&self) -> Option<LeaseLostReason> {
        self.lease.lost_reason()
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
        let (lock, owner) = (self.lock.clone(), self.owner.clone());
        let lease = self.into_lease();
        let ttl = lease.ttl().as_duration();
        match lease.release().instrument(span).await {
            Ok(()) => {
                info!(?held_for, "released");
                Ok(())
            }
            Err(error) => Err(ReleaseError {
                lock,
                owner,
                ttl,
                error,
            }),
        }
    }

    /// Writes the cell `column` of this lock's row in `table` through the
    /// lease: it carries the lease TTL, is renewed with the holding and
    /// deleted at release — a cell that lives exactly as long as the lock
    /// is held (a leader's record, docs/design.md §5b).
    ///
    /// # Errors
    /// The store error (the cell stays registered and is removed at
    /// release either way).
    pub async fn write_cell(
        &self,
        table: lockshift_store::Table,
        column: &str,
        value: &[u8],
    ) -> Result<(), lockshift_store::StoreError> {
        self.lease.write(table, column, value).await
    }

    /// The lease, for a wrapper that releases it for the holder (the
    /// node's release of a held lock at shutdown): still renewed and
    /// holding its cells, without this guard's own release record (its
    /// `release` span and `released` line) or its drop note.
    pub fn into_lease(mut self) -> Lease {
        self.note.armed = false;
        self.lease
    }
}

/// Logs a [`Won`] dropped without release.
struct DropNote {
    lock: LockId,
    owner: OwnerId,
    algorithm: Algorithm,
    /// Cleared when the lease leaves the guard.
    armed: bool,
}

impl Drop for DropNote {
    fn drop(&mut self) {
        if self.armed {
            info!(lock = %self.lock, owner = %self.owner, algorithm = %self.algorithm,
                "guard dropped without release; releasing in the background");
        }
        // The lease's own Drop stops renewal and deletes its cells.
    }
}
