//! Errors of the lock API: one enum per operation, each naming the lock and
//! owner, keeping store failures (one attempt) apart from lock outcomes.
//!
//! Every message shows its cause (`…: {error}`), so `to_string()` says it
//! all; the cause is a field to match on, and not also returned by
//! [`std::error::Error::source`] — a chain printer (anyhow's `{:#}`) would
//! print it twice. The workspace keeps this rule for every error type
//! (`tests/integration/repository.rs` checks it); `#[error(transparent)]`
//! variants pass their inner error's text and chain through unchanged.

use std::time::Duration;

use lockshift_store::{StoreError, Table};

use crate::id::{InvalidId, LockId, NodeId, OwnerId};
use lockshift_decide::duration::fmt_duration_rounded;

/// Why a lease can no longer be proven.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseLostReason {
    /// No renewal has been proven for too long: the cells may expire soon.
    #[error(
        "no renewal proven for {} (limit {})",
        fmt_duration_rounded(*overdue_for),
        fmt_duration_rounded(*limit)
    )]
    RenewalOverdue {
        /// Time since the last proven renewal was sent.
        overdue_for: Duration,
        /// The configured limit (`lost_after_fraction` × `lease_ttl`).
        limit: Duration,
    },
    /// The lock was released: nothing is held any more.
    #[error("the lock was released")]
    Released,
    /// The lock was released for its holder: the node that handed the
    /// guard out shut down (`Node::shutdown`). Stop touching the resource.
    #[error("the lock was released for its holder: the node shut down")]
    Revoked,
    /// A renewal found the cell already gone (expired or deleted).
    #[error("the {table} cell {column:?} is gone")]
    CellGone {
        /// The table of the missing cell.
        table: Table,
        /// Its column.
        column: String,
    },
}

/// `acquire` did not produce a guard.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcquireError {
    /// The deadline passed first; everything written was removed (best effort).
    #[error(
        "acquiring lock {lock} as {owner} timed out after {}",
        fmt_duration_rounded(*waited)
    )]
    Timeout {
        /// The lock.
        lock: LockId,
        /// The would-be owner.
        owner: OwnerId,
        /// How long it waited.
        waited: Duration,
    },
    /// The caller's cancellation token fired first.
    #[error("acquiring lock {lock} as {owner} was cancelled")]
    Cancelled {
        /// The lock.
        lock: LockId,
        /// The would-be owner.
        owner: OwnerId,
    },
    /// The lock was entered, but by then its lease could no longer be proven
    /// (the store was too slow); the cells were removed and nothing is held.
    #[error("lock {lock} was entered as {owner} but its lease could not be proven: {reason}")]
    LeaseLost {
        /// The lock.
        lock: LockId,
        /// The would-be owner.
        owner: OwnerId,
        /// Why the lease failed.
        reason: LeaseLostReason,
    },
    /// The node this locker belongs to was shut down; nothing is held.
    #[error("acquiring lock {lock} failed: node {node} was shut down")]
    NodeStopped {
        /// The lock.
        lock: LockId,
        /// The node.
        node: NodeId,
    },
    /// The lock's name is not a valid [`LockId`]; nothing was written.
    #[error("cannot acquire: {0}")]
    InvalidLockId(InvalidId),
    /// The deadline passed while the store kept failing, and no read showed
    /// anyone in the lock's way: whether the lock was free is not known, so
    /// this is not a [`Timeout`](AcquireError::Timeout) ("not free"). Store
    /// failures retrying may fix (the store unreachable, too few replicas
    /// alive) are retried until the deadline; `error` is the last one,
    /// with the store's reason — and, when the store said, the replicas
    /// it needed. Everything written was removed (best effort).
    #[error(
        "acquiring lock {lock} as {owner} gave up after {}: {}: {error}",
        fmt_duration_rounded(*waited),
        if *lock_read {
            "the store kept failing, and no read showed anyone holding or waiting for the lock"
        } else {
            "no read of the lock succeeded"
        }
    )]
    Unreachable {
        /// The lock.
        lock: LockId,
        /// The would-be owner.
        owner: OwnerId,
        /// How long it waited.
        waited: Duration,
        /// Whether any read of the lock's rows succeeded meanwhile.
        lock_read: bool,
        /// The last store error (shown in the message, not chained).
        error: StoreError,
    },
    /// A store failure that retrying cannot fix (invalid request, missing
    /// schema, a lock whose home datacenter is out of reach).
    #[error("acquiring lock {lock} as {owner} failed: {error}")]
    Store {
        /// The lock.
        lock: LockId,
        /// The would-be owner.
        owner: OwnerId,
        /// The last store error (shown in the message, not chained: see
        /// the module docs).
        error: StoreError,
    },
    /// Another acquisition of the lock shares it in a way this one cannot
    /// share with (docs/design.md §3a, P2): a semaphore taken as a plain
    /// lock or a read/write lock, or with another number of permits. One
    /// name is one kind of lock; nothing was overcommitted, and everything
    /// written was removed (best effort).
    #[error("acquiring lock {lock} as {owner} failed: {conflict}")]
    KindConflict {
        /// The lock.
        lock: LockId,
        /// The would-be owner.
        owner: OwnerId,
        /// How this acquisition and the other share it.
        conflict: lockshift_decide::sharing::KindConflict,
    },
    /// A shared acquisition (a reader, a permit) asked of a locker that
    /// takes none: the legacy lock (docs/design.md §3a, P4). Nothing was
    /// written.
    #[error(
        "cannot acquire lock {lock} as {sharing}: the {algorithm} lock takes only exclusive acquisitions (shared ones need the queue or combined lock)"
    )]
    SharingRefused {
        /// The lock.
        lock: LockId,
        /// How the acquisition asked to share it.
        sharing: lockshift_decide::sharing::Sharing,
        /// The algorithm that refused.
        algorithm: crate::Algorithm,
    },
}

impl From<InvalidId> for AcquireError {
    fn from(e: InvalidId) -> Self {
        AcquireError::InvalidLockId(e)
    }
}

impl AcquireError {
    /// The lock the error is about (`None` when its name was invalid).
    pub fn lock(&self) -> Option<&LockId> {
        match self {
            AcquireError::Timeout { lock, .. }
            | AcquireError::Unreachable { lock, .. }
            | AcquireError::Cancelled { lock, .. }
            | AcquireError::LeaseLost { lock, .. }
            | AcquireError::NodeStopped { lock, .. }
            | AcquireError::Store { lock, .. }
            | AcquireError::KindConflict { lock, .. }
            | AcquireError::SharingRefused { lock, .. } => Some(lock),
            AcquireError::InvalidLockId(_) => None,
        }
    }

    /// Whether trying again later could succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            AcquireError::Timeout { .. }
            | AcquireError::Unreachable { .. }
            | AcquireError::Cancelled { .. }
            | AcquireError::LeaseLost { .. } => true,
            AcquireError::NodeStopped { .. }
            | AcquireError::InvalidLockId(_)
            | AcquireError::KindConflict { .. }
            | AcquireError::SharingRefused { .. } => false,
            AcquireError::Store { error, .. } => error.is_retryable(),
        }
    }
}

/// What one acquisition saw of its lock while it waited, to tell a
/// timeout the store caused from one another owner caused: a locker notes
/// its reads in it and [`explain`](Seen::explain)s its error with it.
#[derive(Debug, Default)]
pub struct Seen {
    /// A read of the lock's rows succeeded.
    pub lock_read: bool,
    /// A read showed someone in the way: a holder, waiters ahead, a
    /// contender arbitrating, an entry blocked by another.
    pub in_the_way: bool,
    /// The last store error retried.
    pub last_error: Option<StoreError>,
}

impl Seen {
    /// `error`, told apart by what was seen: "not free" only once someone
    /// was seen in the way.
    pub fn explain(self, error: AcquireError) -> AcquireError {
        let last_error = self.last_error.filter(|_| !self.in_the_way);
        error.after_store_failures(self.lock_read, last_error)
    }
}

impl AcquireError {
    /// This error, told apart by what the acquisition saw while it waited:
    /// a [`Timeout`](AcquireError::Timeout) after store failures, of an
    /// acquisition that never saw anyone in the lock's way, becomes
    /// [`Unreachable`](AcquireError::Unreachable) with `last_error` — the
    /// store, not another owner, kept it from the lock, and "not free"
    /// would be wrong. Lockers call it with `last_error` = `None` once a
    /// read showed a holder or waiters ahead (then a timeout is one), and
    /// `lock_read` = whether any read of the lock's rows succeeded. Every
    /// other error is returned as it is.
    pub(crate) fn after_store_failures(
        self,
        lock_read: bool,
        last_error: Option<StoreError>,
    ) -> Self {
        match (self, last_error) {
            (
                AcquireError::Timeout {
                    lock,
                    owner,
                    waited,
                },
                Some(error),
            ) => AcquireError::Unreachable {
                lock,
                owner,
                waited,
                lock_read,
                error,
            },
            (other, _) => other,
        }
    }
}

/// A name that is always a valid lock id (`&LockId`, `LockId`) cannot fail
/// to convert; this lets `acquire` take those as well as `&str`.
impl From<std::convert::Infallible> for AcquireError {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

/// `try_acquire` did not produce a guard.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TryAcquireError {
    /// Someone else holds the lock or is entering it right now.
    #[error("lock {lock} is held by {}", holder.as_ref().map_or("another owner", |h| h.as_str()))]
    Held {
        /// The lock.
        lock: LockId,
        /// The holder seen, when one was.
        holder: Option<OwnerId>,
    },
    /// The attempt itself failed.
    #[error(transparent)]
    Failed(#[from] AcquireError),
}

impl TryAcquireError {
    /// Whether the lock was simply busy.
    pub fn is_held(&self) -> bool {
        matches!(self, TryAcquireError::Held { .. })
    }
}

/// No fencing token could be handed out; ask again (a store failure) or
/// stop touching the resource (a lost lease).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FenceError {
    /// Reading or advancing the lock's fencing cell failed.
    #[error("no fencing token for lock {lock}: {error}")]
    Store {
        /// The lock.
        lock: LockId,
        /// The store error (shown in the message, not chained).
        error: StoreError,
    },
    /// The lease was lost before the token was known to be the newest: it
    /// may already be stale, so none is given.
    #[error("no fencing token for lock {lock} as {owner}: the lease was lost ({reason})")]
    LeaseLost {
        /// The lock.
        lock: LockId,
        /// The owner.
        owner: OwnerId,
        /// Why the lease was lost.
        reason: LeaseLostReason,
    },
}

/// `release` could not remove every cell; the rest expire within the lease TTL.
#[derive(Clone, Debug, thiserror::Error)]
#[error(
    "releasing lock {lock} as {owner} left cells behind (they expire within {}): {error}",
    fmt_duration_rounded(*ttl)
)]
pub struct ReleaseError {
    /// The lock.
    pub lock: LockId,
    /// The owner.
    pub owner: OwnerId,
    /// The lease TTL: the cells are gone by then at the latest.
    pub ttl: Duration,
    /// The store error (shown in the message, not chained).
    pub error: StoreError,
}

#[cfg(test)]
mod tests {
    use lockshift_store::{OpKind, StoreErrorKind, schema};

    use super::*;

    /// Issue 31 item 1: an acquisition that timed out while the store kept
    /// failing, and never saw anyone in the lock's way, says so with the
    /// store's reason — not "timed out" (read by callers as "not free").
    #[test]
    fn a_timeout_after_store_failures_is_not_a_lock_held() {
        let lock = LockId::new("nightly").unwrap();
        let owner = OwnerId::from_stored("n1/0000000100000000");
        let timeout = || AcquireError::Timeout {
            lock: lock.clone(),
            owner: owner.clone(),
            waited: Duration::from_secs(20),
        };
        let unavailable = StoreError::new(
            StoreErrorKind::Unavailable,
            OpKind::Read,
            Some(schema::MAIN),
            "Not enough nodes are alive to satisfy required consistency level \
             (consistency: Quorum, required: 2, alive: 1)",
        );
        // (lock read, last error, the message's start after the lock and
        // owner, retryable)
        let cases: [(bool, Option<StoreError>, &str); 3] = [
            (
                false,
                Some(unavailable.clone()),
                "gave up after 20s: no read of the lock succeeded: read on table main failed: \
                 not enough replicas available: Not enough nodes are alive to satisfy required \
                 consistency level (consistency: Quorum, required: 2, alive: 1)",
            ),
            (
                true,
                Some(unavailable.clone()),
                "gave up after 20s: the store kept failing, and no read showed anyone holding \
                 or waiting for the lock: read on table main failed",
            ),
            // Someone was seen in the way (the locker passes no error): a
            // timeout stays one.
            (true, None, "timed out after 20s"),
        ];
        for (i, (lock_read, error, want)) in cases.into_iter().enumerate() {
            let e = timeout().after_store_failures(lock_read, error);
            let text = e.to_string();
            let prefix = "acquiring lock nightly as n1/0000000100000000 ";
            assert!(
                text.strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with(want)),
                "case #{i}: {text}"
            );
            assert!(e.is_retryable(), "case #{i}");
            assert_eq!(e.lock(), Some(&lock), "case #{i}");
        }
        // Other errors pass through unchanged.
        let cancelled = AcquireError::Cancelled {
            lock: lock.clone(),
            owner,
        }
        .after_store_failures(false, Some(unavailable));
        assert!(matches!(cancelled, AcquireError::Cancelled { .. }));
    }
}
