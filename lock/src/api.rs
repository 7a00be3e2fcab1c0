//! The [`Locker`] trait every algorithm implements, and acquisition options.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::binding::Binding;
use crate::error::{AcquireError, TryAcquireError};
use crate::guard::LockGuard;
use crate::id::LockId;

/// The lock algorithms (`lockshift_decide::algorithm`), which the lock API
/// takes and returns.
pub use lockshift_decide::algorithm::Algorithm;
/// How an acquisition shares its lock (`lockshift_decide::sharing`): a
/// plain lock is exclusive; a read/write lock's reader is shared; a
/// semaphore's permit is one of its `n` (docs/design.md §3a).
pub use lockshift_decide::sharing::{KindConflict, Sharing};

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
    /// The TTL the holder's `main` cell had left at that read of `main`,
    /// in whole seconds as the store counts them: how long the lock stays
    /// taken should its holder stop renewing now.
    pub holder_ttl: Option<Duration>,
}

/// The channel a waiting acquisition reports [`WaitingFor`] on.
pub type WaitWatch = Arc<tokio::sync::watch::Sender<WaitingFor>>;

/// How long a blocking acquisition may wait, how to call it off, and who
/// hears what it waits for: the caller's choices. What its runner (a node)
/// gives it — pacing, invalidation — is its [`Binding`], a separate
/// argument of [`Locker::acquire_with`], so no caller can set it.
#[derive(Clone, Debug, Default)]
pub struct AcquireOptions {
    /// Give up after this long ([`AcquireError::Timeout`]); `None` waits for ever.
    pub timeout: Option<Duration>,
    /// Give up when this fires ([`AcquireError::Cancelled`]).
    pub cancel: Option<CancellationToken>,
    /// Told what the acquisition waits for whenever its own reads show a
    /// change (see [`WaitingFor`]).
    pub watch: Option<WaitWatch>,
    /// How the acquisition shares the lock: exclusive (the default), a
    /// reader's share, or one of a semaphore's permits. Only the queue and
    /// combined lockers take a shared one (P4); the legacy locker refuses
    /// it ([`AcquireError::SharingRefused`]).
    pub sharing: Sharing,
}

impl AcquireOptions {
    /// Wait at most `timeout`.
    pub fn with_timeout(timeout: Duration) -> Self {
        AcquireOptions {
            timeout: Some(timeout),
            ..AcquireOptions::default()
        }
    }

    /// Share the lock as `sharing` says.
    pub fn shared_as(mut self, sharing: Sharing) -> Self {
        self.sharing = sharing;
        self
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
}

/// A distributed lock algorithm over the `store` interface.
///
/// Every acquisition takes a [`Binding`] from whoever runs it: a node
/// gives each its own (pacing, invalidation, where legacy sightings go);
/// code that runs a locker alone passes [`Binding::unbound`], as
/// [`acquire`](Locker::acquire) does.
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

    /// Waits until the lock is held, the timeout passes, the caller's
    /// token fires or `binding` is invalidated. A combined acquisition
    /// paces itself by `binding` at each step; legacy holders it sees go
    /// to the binding's sightings.
    ///
    /// # Errors
    /// [`AcquireError::Timeout`], [`AcquireError::Cancelled`] (by the
    /// caller's token, or for a bound acquisition by its invalidation), or
    /// [`AcquireError::Store`] for a store failure retrying cannot fix.
    /// Transient store failures are retried until the deadline.
    async fn acquire_with(
        &self,
        lock: &LockId,
        options: AcquireOptions,
        binding: &Binding,
    ) -> Result<LockGuard, AcquireError>;

    /// Waits for the lock without a deadline, unbound.
    ///
    /// # Errors
    /// As [`acquire_with`](Locker::acquire_with).
    async fn acquire(&self, lock: &LockId) -> Result<LockGuard, AcquireError> {
        self.acquire_with(lock, AcquireOptions::default(), &Binding::unbound())
            .await
    }

    /// Takes the lock if it is free right now; never waits for a holder. A
    /// combined attempt paces itself by `binding` (an attempt does not
    /// wait, so nothing invalidates it: its runner checks the binding
    /// before it hands the guard out).
    ///
    /// # Errors
    /// [`TryAcquireError::Held`] when someone else holds it or is entering
    /// it; [`TryAcquireError::Failed`] when the attempt itself failed.
    async fn try_acquire(
        &self,
        lock: &LockId,
        binding: &Binding,
    ) -> Result<LockGuard, TryAcquireError>;

    /// As [`try_acquire`](Locker::try_acquire), sharing the lock as
    /// `sharing` says. A locker that takes no shared acquisitions (the
    /// legacy one, P4) refuses every one but an exclusive.
    ///
    /// # Errors
    /// As [`try_acquire`](Locker::try_acquire), and
    /// [`AcquireError::SharingRefused`] (as a failure) for a shared one
    /// this locker does not take.
    async fn try_acquire_shared(
        &self,
        lock: &LockId,
        sharing: Sharing,
        binding: &Binding,
    ) -> Result<LockGuard, TryAcquireError> {
        if sharing == Sharing::Exclusive {
            return self.try_acquire(lock, binding).await;
        }
        Err(TryAcquireError::Failed(AcquireError::SharingRefused {
            lock: lock.clone(),
            sharing,
            algorithm: self.algorithm(),
        }))
    }
}
