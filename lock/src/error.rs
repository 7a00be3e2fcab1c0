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
    /// A store failure that retrying cannot fix (invalid request, missing
    /// schema), or transient failures outlasted the deadline.
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
            | AcquireError::Cancelled { lock, .. }
            | AcquireError::LeaseLost { lock, .. }
            | AcquireError::NodeStopped { lock, .. }
            | AcquireError::Store { lock, .. } => Some(lock),
            AcquireError::InvalidLockId(_) => None,
        }
    }

    /// Whether trying again later could succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            AcquireError::Timeout { .. }
            | AcquireError::Cancelled { .. }
            | AcquireError::LeaseLost { .. } => true,
            AcquireError::NodeStopped { .. } | AcquireError::InvalidLockId(_) => false,
            AcquireError::Store { error, .. } => error.is_retryable(),
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
