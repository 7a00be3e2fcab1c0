//! `TryLock` (thesis listing 4): one attempt at entering `main` through the
//! shadow-table arbitration. Shared with the combined lock, which runs it
//! once it is first in the queue.

use lockshift_lock::{Lease, OwnerId};
use lockshift_store::{RowQuery, Store, StoreError, schema};
use tracing::trace;

/// The three outcomes of listing 4.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TryLockOutcome {
    /// `main` holds exactly my cell.
    Success,
    /// `main` holds exactly one cell, another owner's.
    AnotherThreadIsOwner(OwnerId),
    /// Someone else was contending in `shadow`, or `main` was not empty on
    /// the fresh read (or held several cells).
    ConcurrentAttempt,
}

/// Listing 4 for `lease.owner()` on `lease.lock()`, writing `value` into the
/// cells it creates. Every write goes through the lease (TTL, renewal,
/// cleanup).
///
/// Round trips: 1 when another owner holds the lock; 6 on success (read main,
/// write shadow, read shadow, fresh read of main, write main, delete shadow);
/// 4 on a concurrent attempt.
///
/// # Errors
/// A store error from any step. Cells that may have been written stay
/// registered with the lease, and the caller must remove them
/// ([`Lease::delete_all_in`]) before trying again.
pub async fn try_lock(
    store: &dyn Store,
    lease: &Lease,
    value: &[u8],
) -> Result<TryLockOutcome, StoreError> {
    let lock = lease.lock().as_str();
    let me = lease.owner().as_str();
    // Lines 1–6. Two cells are enough to tell "none", "exactly one" and
    // "more than one" apart.
    let main = store.read(schema::MAIN, lock, &RowQuery::first(2)).await?;
    if let [only] = main.as_slice() {
        return Ok(if only.column == me {
            TryLockOutcome::Success
        } else {
            TryLockOutcome::AnotherThreadIsOwner(OwnerId::from_stored(&only.column))
        });
    }
    // Line 7: announce myself in shadow.
    lease.write(schema::SHADOW, me, value).await?;
    // Line 8: who else is announcing? Lemma 1 on shadow: of two contenders
    // that both wrote, at least one sees the other here.
    let shadow = store
        .read(schema::SHADOW, lock, &RowQuery::first(2))
        .await?;
    let alone = matches!(shadow.as_slice(), [only] if only.column == me);
    if alone {
        // Line 10: a fresh read — main may have been taken since line 1.
        let main = store.read(schema::MAIN, lock, &RowQuery::first(1)).await?;
        if main.is_empty() {
            // Lines 11–13. No re-read of main after this write: that is the
            // legacy algorithm, and why it must never run beside the queue
            // lock (DESIGN.md §3).
            lease.write(schema::MAIN, me, value).await?;
            if let Err(e) = lease.delete(schema::SHADOW, me).await {
                // The lock is ours; the lingering shadow cell only makes
                // contenders retry, and release or its TTL removes it.
                trace!(error = %e, "shadow cell not removed after success");
            }
            return Ok(TryLockOutcome::Success);
        }
    }
    // Lines 14–15.
    lease.delete(schema::SHADOW, me).await?;
    Ok(TryLockOutcome::ConcurrentAttempt)
}
