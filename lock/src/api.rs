//! The [`Locker`] trait every algorithm implements, and acquisition options.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::error::{AcquireError, TryAcquireError};
use crate::guard::LockGuard;
use crate::id::LockId;

/// The lock algorithms (`lockshift_decide::algorithm`), which the lock API
/// takes and returns.
pub use lockshift_decide::algorithm::Algorithm;
/// How a combined acquisition paces itself beside legacy contenders,
/// defined in `lockshift_decide::binding`, re-exported for lockers and
/// their callers.
pub use lockshift_decide::binding::Pacing;

/// What a waiting acquisition has in its way, as its own reads of the
/// lock's rows showed it last — no read is made for it. Lockers update it
/// through [`AcquireOptions::watch`]; `migrate run-with-lock` prints it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitingFor {
    /// The owner of the holding in `main` in the way, when the waiter read
    /// `main` last (a waiter far back reads only the queue).
    pub holder: Option<String>,
    /// Waiters ahead in the queue (counted up to the read's window) and the
    /// owner of the first of them; `None` at the front of the line.
    pub ahead: Option<(u32, String)>,
}

/// The channel a waiting acquisition reports [`WaitingFor`] on.
pub type WaitWatch = Arc<tokio::sync::watch::Sender<WaitingFor>>;

/// Where an acquisition reads its [`Pacing`]: the current value, replaced
/// by its owner (a node, as the stage it confirms changes) while the
/// acquisition waits.
pub type PacingWatch = tokio::sync::watch::Receiver<Pacing>;

/// A [`PacingWatch`] that always reads `pacing`.
pub fn fixed_pacing(pacing: Pacing) -> PacingWatch {
    tokio::sync::watch::channel(pacing).1
}

/// How long a blocking acquisition may wait, how to call it off, and how
/// it paces itself.
#[derive(Clone, Debug, Default)]
pub struct AcquireOptions {
    /// Give up after this long ([`AcquireError::Timeout`]); `None` waits for ever.
    pub timeout: Option<Duration>,
    /// Give up when this fires ([`AcquireError::Cancelled`]).
    pub cancel: Option<CancellationToken>,
    /// Told what the acquisition waits for whenever its own reads show a
    /// change (see [`WaitingFor`]).
    pub watch: Option<WaitWatch>,
    /// How a combined acquisition paces itself, read at each step; `None`:
    /// as its locker was built to (other algorithms ignore it). A
    /// `lockshift::Node` ignores it too: it paces each acquisition by the
    /// stage it confirmed.
    pub pacing: Option<PacingWatch>,
}

impl AcquireOptions {
    /// Wait at most `timeout`.
    pub fn with_timeout(timeout: Duration) -> Self {
        AcquireOptions {
            timeout: Some(timeout),
            cancel: None,
            watch: None,
            pacing: None,
        }
    }

    /// Also stop when `cancel` fires.
    pub fn cancelled_by(mut self, cancel: CancellationToken) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Also report what the acquisition waits for on `watch`.
    pub fn watched_by(mut self, watch: WaitWatch) -> Self {
        self.watch = Some(watch);
        self
    }

    /// Also pace the acquisition by `pacing` (a combined acquisition; a
    /// `lockshift::Node` ignores it and uses its own).
    pub fn paced_by(mut self, pacing: PacingWatch) -> Self {
        self.pacing = Some(pacing);
        self
    }
}

/// A distributed lock algorithm over the `store` interface.
///
/// # Cancel safety
///
/// Dropping an `acquire` future mid-way stops the attempt and deletes the
/// cells it wrote in the background (its lease's drop); other waiters are
/// held up at most until that delete lands (or the stale-waiter threshold).
#[async_trait]
pub trait Locker: Send + Sync + fmt::Debug {
    /// Which algorithm this is.
    fn algorithm(&self) -> Algorithm;

    /// Waits until the lock is held, the timeout passes or the token fires.
    ///
    /// # Errors
    /// [`AcquireError::Timeout`], [`AcquireError::Cancelled`], or
    /// [`AcquireError::Store`] for a store failure retrying cannot fix.
    /// Transient store failures are retried until the deadline.
    async fn acquire_with(
        &self,
        lock: &LockId,
        options: AcquireOptions,
    ) -> Result<LockGuard, AcquireError>;

    /// Waits for the lock without a deadline.
    ///
    /// # Errors
    /// As [`acquire_with`](Locker::acquire_with).
    async fn acquire(&self, lock: &LockId) -> Result<LockGuard, AcquireError> {
        self.acquire_with(lock, AcquireOptions::default()).await
    }

    /// Takes the lock if it is free right now; never waits for a holder.
    ///
    /// # Errors
    /// [`TryAcquireError::Held`] when someone else holds it or is entering
    /// it; [`TryAcquireError::Failed`] when the attempt itself failed.
    async fn try_acquire(&self, lock: &LockId) -> Result<LockGuard, TryAcquireError>;

    /// As [`try_acquire`](Locker::try_acquire), paced by `pacing` (a
    /// combined attempt; other algorithms ignore it, as the default does).
    ///
    /// # Errors
    /// As [`try_acquire`](Locker::try_acquire).
    async fn try_acquire_paced(
        &self,
        lock: &LockId,
        pacing: PacingWatch,
    ) -> Result<LockGuard, TryAcquireError> {
        let _ = pacing;
        self.try_acquire(lock).await
    }
}
