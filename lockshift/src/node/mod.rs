//! [`Node`]: what a service embeds — the one handle to acquire locks with,
//! whose algorithm follows the configured mode and the rollout stage, plus the
//! background work that keeps it honest: registry heartbeats, stage
//! re-reads, config reloads.
//!
//! # The rules it keeps
//!
//! The node keeps the rollout rules R2–R8 of docs/design.md §4 and C1 (§4b); why they
//! keep legacy and queue acquisitions apart is argued there once ("Why no
//! legacy and queue acquisitions overlap"). The decisions themselves are
//! pure and live in [`lockshift_decide::binding`] (the facade's `binding`
//! gives each acquisition its handle, `lockshift_lock::Binding`: the
//! pacing it reads, the token that takes it out of its line when
//! invalidated, the sightings its reads write into);
//! the parts of this module run them:
//!
//! - `runtime` re-reads the stage (and the config file) every
//!   `rollout.stage_reread_every` and heartbeats every
//!   `rollout.heartbeat_every` (R5). It re-resolves the mode and applies the
//!   result to every acquisition on each change, and the moment the view
//!   expires (R2, R3). A heartbeat writes the activity promises first, then
//!   the row, and confirms the view only once both have landed (R8).
//! - `acquire` binds every acquisition, takes a waiting one out of the line
//!   when it is invalidated (R3), and hands a guard out only under the
//!   binding's conditions (R4, R8). A held guard is released by its own
//!   lease, whatever the node resolves by then (R7).
//! - `clock` measures the process's clock against the database's when the
//!   node starts and every minute, reports it in the heartbeat, and keeps
//!   the node combined while it is not known within
//!   `rollout.clock_skew_margin` (C1, docs/design.md §4b).
//! - `builder` draws the incarnation that names the registry row, so a
//!   second process under the same node id never hides this one (R5). The
//!   lock cells name the same process.
//! - [`Node`] and every guard it handed out keep the runtime alive; shutting
//!   down releases the held locks before the node leaves the registry (R7).
//!
//! Every public method of [`Node`] is in this file, the handles it gives
//! out ([`Semaphore`], [`RwLock`], [`Election`]) among them. Its private
//! methods are in the part of their role: `acquire` (the acquire path) and
//! `builder` (starting).

use std::num::NonZeroU32;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lockshift_lock::{
    AcquireError, AcquireOptions, FenceError, LockGuard, LockId, NodeId, Revoker, TryAcquireError,
};
use lockshift_store::StoreError;
use lockshift_store::fenced::FencedWriter;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::error::StartError;
use crate::{Election, RwLock, Semaphore};

mod acquire;
mod builder;
mod clock;
mod runtime;
mod status;

// The public types of the node, each in the part that runs it.
pub use builder::NodeBuilder;
pub use status::NodeStatus;

use runtime::NodeParts;

/// The running node: shared state plus the background tasks. It lives as
/// long as any [`Node`] or guard it handed out (R7).
#[derive(Debug)]
struct NodeInner {
    shared: Arc<NodeParts>,
    stop: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl NodeInner {
    fn stop_tasks(&self) {
        self.stop.cancel();
        for t in self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            t.abort();
        }
    }
}

impl Drop for NodeInner {
    fn drop(&mut self) {
        self.stop_tasks();
        // Nothing can act for this node any more (R7): leave the registry
        // now rather than after the row's TTL, if a runtime is around.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = self.shared.clone();
        if shared.state().left {
            return;
        }
        runtime.spawn(async move { shared.leave().await });
    }
}

/// A lockshift node: the handle a service keeps. See the module docs.
///
/// Cloning is cheap and every clone is the same node.
/// It is the one handle to acquire with: [`acquire`](Self::acquire),
/// [`acquire_with`](Self::acquire_with) and
/// [`try_acquire`](Self::try_acquire) take a lock by name. The node runs —
/// heartbeats, stage re-reads, config reloads — for as long as a clone or
/// a held guard lives (R7); [`shutdown`](Self::shutdown) ends it gracefully.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use lockshift::{Node, Settings};
/// use lockshift::store::MemoryStore;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let node = Node::builder().store(Arc::new(MemoryStore::new())).start().await?;
/// // A clone is the same node; a held guard keeps it alive.
/// let guard = node.clone().acquire("accounts").await?;
/// drop(node);
/// assert!(!guard.is_lost());
/// guard.release().await?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
#[must_use = "the node runs only while a handle or a guard lives; end it with `shutdown().await`"]
pub struct Node {
    core: Arc<NodeInner>,
}

impl Node {
    /// Starts a node the way a service does: settings from `config_file`
    /// with the `LOCKSHIFT__…` environment on top, the store they name
    /// opened, the system clock, and `node.mode` re-read from the file
    /// while running.
    ///
    /// # Errors
    /// [`StartError`]: unreadable or invalid settings (naming the key and
    /// where its value came from), or a store that cannot be opened.
    pub async fn connect(config_file: impl AsRef<Path>) -> Result<Node, StartError> {
        Node::builder()
            .config_file(config_file.as_ref())
            .start()
            .await
    }

    /// Everything [`connect`](Self::connect) decides, one choice at a time.
    pub fn builder() -> NodeBuilder {
        NodeBuilder::default()
    }

    /// This node's id.
    pub fn id(&self) -> &NodeId {
        &self.core.shared.id
    }

    /// Waits until `lock` is held, then hands out its guard. `lock` is a
    /// name (`"accounts"`, a `String`) or a [`LockId`].
    ///
    /// The algorithm is the one the node resolves from its configured mode
    /// and the rollout stage at that moment; a waiting acquisition follows
    /// the stage (R3). Watch the guard's [`lost`](LockGuard::lost) signal
    /// while using the resource, and hand the resource its
    /// [fencing token](LockGuard::fencing_token).
    ///
    /// # Errors
    /// [`AcquireError::InvalidLockId`] for a name that is not a valid lock
    /// id, [`AcquireError::NodeStopped`] after [`shutdown`](Self::shutdown),
    /// [`AcquireError::Store`] for a store failure that retrying cannot fix
    /// — among them a lock whose home datacenter this process cannot reach
    /// (`StoreErrorKind::HomeUnreachable`, docs/design.md §4a).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped acquisition leaves its place in line and
    /// deletes what it wrote in the background.
    pub async fn acquire(
        &self,
        lock: impl TryInto<LockId, Error: Into<AcquireError>>,
    ) -> Result<LockGuard, AcquireError> {
        self.acquire_with(lock, AcquireOptions::default()).await
    }

    /// As [`acquire`](Self::acquire), giving up after `options.timeout`
    /// ([`AcquireError::Timeout`]) or when `options.cancel` fires
    /// ([`AcquireError::Cancelled`]). `options.watch` hears what the
    /// acquisition waits for. How it paces itself is the node's business:
    /// it follows the stage the node confirmed.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), plus the two above, and
    /// [`AcquireError::Unreachable`] when the deadline passed with the
    /// store failing and nobody seen in the lock's way (the last store
    /// answer is in it).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn acquire_with(
        &self,
        lock: impl TryInto<LockId, Error: Into<AcquireError>>,
        options: AcquireOptions,
    ) -> Result<LockGuard, AcquireError> {
        let lock = lock.try_into().map_err(Into::into)?;
        self.acquire_id(&lock, options).await
    }

    /// Takes `lock` if it is free right now; never waits for a holder.
    ///
    /// # Errors
    /// [`TryAcquireError::Held`] when someone holds it or is entering it;
    /// [`TryAcquireError::Failed`] otherwise (an invalid name included).
    pub async fn try_acquire(
        &self,
        lock: impl TryInto<LockId, Error: Into<AcquireError>>,
    ) -> Result<LockGuard, TryAcquireError> {
        let lock = lock.try_into().map_err(Into::into)?;
        self.try_acquire_id(&lock, lockshift_lock::Sharing::Exclusive)
            .await
    }

    /// The semaphore of `permits` permits named `name` (docs/design.md
    /// §3a). Every process that uses the name must give the same number:
    /// one that does not gets [`AcquireError::KindConflict`] on acquiring.
    ///
    /// # Errors
    /// [`AcquireError::InvalidLockId`] for a name that is not a valid lock
    /// id.
    pub fn semaphore(
        &self,
        name: impl TryInto<LockId, Error: Into<AcquireError>>,
        permits: NonZeroU32,
    ) -> Result<Semaphore, AcquireError> {
        let lock = name.try_into().map_err(Into::into)?;
        Ok(Semaphore::new(self.clone(), lock, permits))
    }

    /// The read/write lock named `name` (docs/design.md §3a).
    ///
    /// # Errors
    /// [`AcquireError::InvalidLockId`] for a name that is not a valid lock
    /// id.
    pub fn rw_lock(
        &self,
        name: impl TryInto<LockId, Error: Into<AcquireError>>,
    ) -> Result<RwLock, AcquireError> {
        let lock = name.try_into().map_err(Into::into)?;
        Ok(RwLock::new(self.clone(), lock))
    }

    /// The election named `name` (docs/design.md §5b): its lock's holder
    /// leads. [`Election::campaign`] to lead, [`Election::leader`] or
    /// [`Election::observe`] to learn who does.
    ///
    /// # Errors
    /// [`AcquireError::InvalidLockId`] for a name that is not a valid lock
    /// id.
    pub fn election(
        &self,
        name: impl TryInto<LockId, Error: Into<AcquireError>>,
    ) -> Result<Election, AcquireError> {
        let lock = name.try_into().map_err(Into::into)?;
        Ok(Election::new(self.clone(), lock))
    }

    /// A writer of fenced cells for `guard`'s lock, under the guard's
    /// fencing token, through this node's store (docs/design.md §5,
    /// "Fenced writes"): each [`write`](FencedWriter::write) is one
    /// compare-and-set the database refuses once a later holder of the
    /// lock has written the cell.
    ///
    /// The writer is routed as the lock is: with homes (docs/design.md
    /// §4a), each write goes to the lock's home *as this node sees it
    /// when the write is sent* — only while the node's view confirms that
    /// home and it serves — and is refused without being sent otherwise
    /// (F1), so a holder paused across a move of the home cannot
    /// overwrite its successor's writes at the new home. The node's store
    /// itself is not handed out: the writer is the one way to write
    /// through it.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use lockshift::Node;
    /// use lockshift::fenced::{CellWrite, SCRATCH};
    /// use lockshift::store::MemoryStore;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let node = Node::builder().store(Arc::new(MemoryStore::new())).start().await?;
    /// let guard = node.acquire("accounts").await?;
    /// let writer = node.fenced_writer(&guard).await?;
    /// writer.write(SCRATCH, "acct-3", &CellWrite::new("balance", "90")).await?;
    /// guard.release().await?;
    /// node.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`FenceError`] when the guard's fencing token cannot be taken (its
    /// lease is lost, or the store failed).
    pub async fn fenced_writer(&self, guard: &LockGuard) -> Result<FencedWriter, FenceError> {
        let token = guard.fencing_token().await?;
        Ok(FencedWriter::for_lock(
            self.store().clone(),
            guard.lock_id(),
            token,
        ))
    }

    /// The node's store, routed by its homes.
    pub(crate) fn store(&self) -> &lockshift_store::SharedStore {
        &self.core.shared.store
    }

    /// The node's clock.
    pub(crate) fn clock(&self) -> &lockshift_store::SharedClock {
        &self.core.shared.clock
    }

    /// Fires when the node's background work stops (shutdown, or the last
    /// handle dropped).
    pub(crate) fn stopped(&self) -> CancellationToken {
        self.core.stop.clone()
    }

    /// What the node runs now.
    pub fn status(&self) -> NodeStatus {
        self.core.shared.status()
    }

    /// Re-reads the stage and the config file now, instead of waiting for
    /// the next period.
    ///
    /// # Errors
    /// The store error reading the stage (the last stage is kept until it
    /// expires).
    pub async fn refresh(&self) -> Result<(), StoreError> {
        self.core.shared.refresh().await
    }

    /// Writes the registry heartbeat now.
    ///
    /// # Errors
    /// The store error.
    pub async fn heartbeat(&self) -> Result<(), StoreError> {
        self.core.shared.heartbeat().await
    }

    /// Shuts the node down gracefully, for every handle of it:
    ///
    /// 1. no new acquisitions start; waiting ones end with
    ///    [`AcquireError::NodeStopped`], leaving their places in line;
    /// 2. every lock still held through a guard of this node is released:
    ///    its holder's [`lost`](LockGuard::lost) signal fires first, its
    ///    checks report
    ///    [`LeaseLostReason::Revoked`](lockshift_lock::LeaseLostReason::Revoked) and its own `release` does
    ///    nothing more;
    /// 3. the background loops stop and the node leaves the registry, after
    ///    a last activity report — so the registry says the truth: nothing
    ///    of this node waits or holds.
    ///
    /// Call it before `main` returns: a guard merely dropped then leaves its
    /// cells to their TTL, since the runtime that would delete them is
    /// going away. Calling it again does nothing.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped half-way, some locks may stay held (their
    /// guards still release them) and the node may stay registered until
    /// its row expires.
    pub async fn shutdown(&self) {
        let shared = self.core.shared.clone();
        {
            let mut st = shared.state();
            if st.left {
                return;
            }
            st.closed = true;
            st.bindings.invalidate_waiting();
        }
        // Waiting acquisitions notice within one poll and give up their
        // places; give them a moment so the registry's last word is true.
        let deadline = Instant::now() + Duration::from_secs(5);
        while shared.state().bindings.any_waiting() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let held: Vec<Revoker> = shared
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for revoker in held {
            // Each revocation waits for a fencing-token call in flight on
            // that guard, then deletes its cells; the attachment it drops
            // unbinds the acquisition.
            if let Err(e) = revoker.revoke().await {
                warn!(node = %shared.id, error = %e, "releasing a held lock at shutdown left cells to their TTL");
            }
        }
        self.core.stop_tasks();
        shared.leave().await;
    }
}

#[cfg(test)]
mod tests;
