//! `TryLock` (thesis listing 4): one attempt at entering `main` through the
//! shadow-table arbitration. The combined lock runs the same steps from its
//! own pieces (`combined/src/locker.rs`), because it must disregard the
//! cells of waiters reserved behind it; nothing reserves behind a legacy
//! contender, so this one keeps the thesis' checks exactly.

use lockshift_lock::{Lease, OwnerId};
use lockshift_store::{RowQuery, Store, StoreError, schema};
use tracing::trace;

/// The three outcomes of listing 4.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TryLockOutcome {
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
/// 4 on a concurrent attempt; one more when `main` held only a leftover
/// under my own owner id (G3).
///
/// # Errors
/// A store error from any step. Cells that may have been written stay
/// registered with the lease, and the caller must remove them
/// ([`Lease::delete_all_in`]) before trying again (G2).
pub(crate) async fn try_lock(
    store: &dyn Store,
    lease: &Lease,
    value: &[u8],
) -> Result<TryLockOutcome, StoreError> {
    let lock = lease.lock().as_str();
    let me = lease.owner().as_str();
    // Lines 1–6. Two cells would tell "none", "exactly one" and "more
    // than one" apart, but every read here reads the whole row: a CQL row
    // whose value cell is gone still takes a place within a LIMIT while it
    // is no cell (the CQL backend's `rows` module), and G1 judges by what a
    // read does not show. The row holds a few live cells and a bounded
    // number of tombstones (§2a), all of which a short read passes anyway.
    let main = store.read(schema::MAIN, lock, &RowQuery::all()).await?;
    match main.as_slice() {
        [only] if only.column != me => {
            return Ok(TryLockOutcome::AnotherThreadIsOwner(OwnerId::from_stored(
                &only.column,
            )));
        }
        // The thesis' `Success` ("mine") would hold the lock through a cell
        // this acquisition never wrote (G3): it is a leftover of my slot's
        // previous acquisition — a write of its lease that landed late
        // (L5). Nobody holds through it; bury it (my stamps
        // are above all of that lease's, L1) and enter as usual.
        [_] => lease.delete(schema::MAIN, me).await?,
        _ => {}
    }
    Ok(match enter_through_shadow(store, lease, value).await? {
        ShadowEntry::Entered => {
            // Line 12.
            if let Err(e) = lease.delete(schema::SHADOW, lease.owner().as_str()).await {
                // The lock is ours; the lingering shadow cell only makes
                // contenders retry, and release or its TTL removes it.
                trace!(error = %e, "shadow cell not removed after entry");
            }
            TryLockOutcome::Success
        }
        ShadowEntry::Contended | ShadowEntry::MainTaken => TryLockOutcome::ConcurrentAttempt,
    })
}

/// What the shadow arbitration (listing 4 lines 7–15) found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShadowEntry {
    /// My `main` cell is written; my `shadow` cell is still there for the
    /// caller to delete (line 12) when it suits it.
    Entered,
    /// Another contender was in `shadow`.
    Contended,
    /// I was alone in `shadow` but `main` was not empty on the fresh read.
    MainTaken,
}

/// Listing 4 lines 7–11 and 14–15: enter `main` through the shadow
/// arbitration, after finding `main` not held by exactly one owner.
///
/// Round trips: 4 on entry (write shadow, read shadow, fresh read of main,
/// write main; the caller then deletes its shadow cell), 3 or 4 otherwise.
///
/// # Errors
/// A store error from any step; cells that may have been written stay
/// registered with the lease.
pub(crate) async fn enter_through_shadow(
    store: &dyn Store,
    lease: &Lease,
    value: &[u8],
) -> Result<ShadowEntry, StoreError> {
    let lock = lease.lock().as_str();
    let me = lease.owner().as_str();
    // Line 7: announce myself in shadow.
    lease.write(schema::SHADOW, me, value).await?;
    // Line 8: who else is announcing? Lemma 1 on shadow: of two contenders
    // that both wrote, at least one sees the other here.
    let shadow = store.read(schema::SHADOW, lock, &RowQuery::all()).await?;
    let alone = matches!(shadow.as_slice(), [only] if only.column == me);
    let outcome = if !alone {
        ShadowEntry::Contended
    } else {
        // Line 10: a fresh read — main may have been taken since the caller
        // last looked.
        let main = store.read(schema::MAIN, lock, &RowQuery::all()).await?;
        if main.is_empty() {
            // Lines 11–13. The legacy lock does not re-read main after this
            // write: that is why it must never run beside the queue lock
            // (docs/design.md §3).
            lease.write(schema::MAIN, me, value).await?;
            return Ok(ShadowEntry::Entered);
        }
        ShadowEntry::MainTaken
    };
    // Lines 14–15.
    lease.delete(schema::SHADOW, me).await?;
    Ok(outcome)
}
