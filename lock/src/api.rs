//! The [`Locker`] trait every algorithm implements, and acquisition options.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::error::{AcquireError, TryAcquireError};
use crate::guard::LockGuard;
use crate::id::LockId;

/// The lock algorithms lockshift runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// The main/shadow lock (thesis listings 4–5).
    Legacy,
    /// The combined lock (thesis §7.2): queue order, shadow entry, main re-read.
    Combined,
    /// The fair queue lock (thesis listings 6–8).
    Queue,
}

impl Algorithm {
    /// Every algorithm, in rollout order.
    pub const ALL: [Algorithm; 3] = [Algorithm::Legacy, Algorithm::Combined, Algorithm::Queue];

    /// Lowercase name, as in config and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Legacy => "legacy",
            Algorithm::Combined => "combined",
            Algorithm::Queue => "queue",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Algorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown algorithm {:?}; expected legacy, combined or queue",
                    crate::id::cut_short(s)
                )
            })
    }
}

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

/// How long a blocking acquisition may wait, and how to call it off.
#[derive(Clone, Debug, Default)]
pub struct AcquireOptions {
    /// Give up after this long ([`AcquireError::Timeout`]); `None` waits for ever.
    pub timeout: Option<Duration>,
    /// Give up when this fires ([`AcquireError::Cancelled`]).
    pub cancel: Option<CancellationToken>,
    /// Told what the acquisition waits for whenever its own reads show a
    /// change (see [`WaitingFor`]).
    pub watch: Option<WaitWatch>,
}

impl AcquireOptions {
    /// Wait at most `timeout`.
    pub fn with_timeout(timeout: Duration) -> Self {
        AcquireOptions {
            timeout: Some(timeout),
            cancel: None,
            watch: None,
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
}
