//! Handles for shared acquisitions (docs/design.md §3a): a [`Semaphore`]
//! of `n` permits and a read/write lock ([`RwLock`]), each a name taken
//! through a [`Node`] — fair (in arrival order, P3), fenced (every guard
//! has its [`fencing_token`](LockGuard::fencing_token)), and leased like
//! a lock (every guard has its [`lost`](LockGuard::lost) signal).
//!
//! One name is one kind of lock (P2): a semaphore's name taken as a plain
//! lock or with another number of permits stops with
//! [`AcquireError::KindConflict`], never an overcommit. A read/write
//! lock's writer is a plain lock of the same name. A node in mode
//! `legacy` refuses both ([`AcquireError::SharingRefused`], P4).

use std::num::NonZeroU32;

use lockshift_lock::{AcquireError, AcquireOptions, LockGuard, LockId, Sharing, TryAcquireError};

use crate::Node;

/// A semaphore of `n` permits on one name: at most `n` guards of it are
/// held at once, handed out in arrival order (a waiter that arrived
/// earlier takes a permit first). Each permit is a [`LockGuard`]: release
/// it, watch its `lost()` signal, take its fencing token, as for a lock.
///
/// A permit's fencing token is larger than every token of the semaphore
/// asked for before its own ask began — a permit that took the place of
/// one whose lease was lost fences that one out — but two permits held
/// together that ask at the same time may get the same token (they share
/// the semaphore by design; a fenced write accepts an equal token). Tell
/// permits apart by their [`owner`](LockGuard::owner).
///
/// # Examples
/// ```
/// use std::num::NonZeroU32;
/// use std::sync::Arc;
/// use lockshift::Node;
/// use lockshift::store::MemoryStore;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let node = Node::builder().store(Arc::new(MemoryStore::new())).start().await?;
/// let pool = node.semaphore("db-connections", NonZeroU32::new(2).unwrap())?;
/// let one = pool.acquire().await?;
/// let two = pool.acquire().await?;
/// assert!(pool.try_acquire().await.is_err(), "both permits are held");
/// one.release().await?;
/// let three = pool.try_acquire().await?;
/// two.release().await?;
/// three.release().await?;
/// node.shutdown().await;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Semaphore {
    node: Node,
    lock: LockId,
    permits: NonZeroU32,
}

impl Semaphore {
    pub(crate) fn new(node: Node, lock: LockId, permits: NonZeroU32) -> Semaphore {
        Semaphore {
            node,
            lock,
            permits,
        }
    }

    /// The semaphore's name.
    pub fn name(&self) -> &LockId {
        &self.lock
    }

    /// How many permits it has.
    pub fn permits(&self) -> NonZeroU32 {
        self.permits
    }

    fn sharing(&self) -> Sharing {
        Sharing::Permit {
            permits: self.permits,
        }
    }

    /// Waits for a permit, then hands out its guard.
    ///
    /// # Errors
    /// As [`Node::acquire`], and [`AcquireError::KindConflict`] when the
    /// name is taken as another kind of lock or with another number of
    /// permits; [`AcquireError::SharingRefused`] on a node in mode
    /// `legacy`.
    ///
    /// # Cancel safety
    /// As [`Node::acquire`].
    pub async fn acquire(&self) -> Result<LockGuard, AcquireError> {
        self.acquire_with(AcquireOptions::default()).await
    }

    /// As [`acquire`](Self::acquire), with a timeout, a cancel token or a
    /// watch (`options.sharing` is the semaphore's own).
    ///
    /// # Errors
    /// As [`Node::acquire_with`] and [`acquire`](Self::acquire).
    pub async fn acquire_with(&self, options: AcquireOptions) -> Result<LockGuard, AcquireError> {
        self.node
            .acquire_id(&self.lock, options.shared_as(self.sharing()))
            .await
    }

    /// Takes a permit if one is free for it right now (no waiter ahead).
    ///
    /// # Errors
    /// [`TryAcquireError::Held`] when every permit is held or someone
    /// waits ahead; [`TryAcquireError::Failed`] otherwise.
    pub async fn try_acquire(&self) -> Result<LockGuard, TryAcquireError> {
        self.node.try_acquire_id(&self.lock, self.sharing()).await
    }
}

/// A read/write lock on one name: readers hold together, a writer alone;
/// a writer in line holds back every reader that arrives after it, so
/// writers never starve and wait for one generation of readers at most.
/// The writer is a plain lock of the same name.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use lockshift::Node;
/// use lockshift::store::MemoryStore;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let node = Node::builder().store(Arc::new(MemoryStore::new())).start().await?;
/// let table = node.rw_lock("accounts")?;
/// let a = table.read().await?;
/// let b = table.read().await?;
/// assert!(table.try_write().await.is_err(), "readers hold it");
/// a.release().await?;
/// b.release().await?;
/// let w = table.write().await?;
/// assert!(table.try_read().await.is_err(), "a writer holds it");
/// w.release().await?;
/// node.shutdown().await;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct RwLock {
    node: Node,
    lock: LockId,
}

impl RwLock {
    pub(crate) fn new(node: Node, lock: LockId) -> RwLock {
        RwLock { node, lock }
    }

    /// The lock's name.
    pub fn name(&self) -> &LockId {
        &self.lock
    }

    /// Waits to read: beside other readers, never beside a writer.
    ///
    /// # Errors
    /// As [`Semaphore::acquire`].
    pub async fn read(&self) -> Result<LockGuard, AcquireError> {
        self.read_with(AcquireOptions::default()).await
    }

    /// As [`read`](Self::read), with a timeout, a cancel token or a watch.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub async fn read_with(&self, options: AcquireOptions) -> Result<LockGuard, AcquireError> {
        self.node
            .acquire_id(&self.lock, options.shared_as(Sharing::Shared))
            .await
    }

    /// Reads if no writer holds or waits right now.
    ///
    /// # Errors
    /// As [`Semaphore::try_acquire`].
    pub async fn try_read(&self) -> Result<LockGuard, TryAcquireError> {
        self.node.try_acquire_id(&self.lock, Sharing::Shared).await
    }

    /// Waits to write: alone.
    ///
    /// # Errors
    /// As [`Node::acquire`].
    pub async fn write(&self) -> Result<LockGuard, AcquireError> {
        self.write_with(AcquireOptions::default()).await
    }

    /// As [`write`](Self::write), with a timeout, a cancel token or a
    /// watch.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    pub async fn write_with(&self, options: AcquireOptions) -> Result<LockGuard, AcquireError> {
        self.node
            .acquire_id(&self.lock, options.shared_as(Sharing::Exclusive))
            .await
    }

    /// Writes if nobody holds or waits right now.
    ///
    /// # Errors
    /// As [`Node::try_acquire`].
    pub async fn try_write(&self) -> Result<LockGuard, TryAcquireError> {
        self.node
            .try_acquire_id(&self.lock, Sharing::Exclusive)
            .await
    }
}
