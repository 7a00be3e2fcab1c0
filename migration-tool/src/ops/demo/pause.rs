//! `migrate demo --pause-holder`: one holder paused past its lease
//! mid-transfer, as a GC pause or SIGSTOP would pause its process.
//!
//! Each node talks to the store through a [`Pausable`] connection. The
//! first worker to reach the point between its last lease check and its
//! first write, after the fleet has run a little, pauses its *node*: every
//! request of that node — its lease renewals, its registry heartbeat, its
//! other workers' reads and writes — waits, and nothing is sent, as in a
//! process that does not run. Its cells then expire, another node takes
//! the accounts' locks and writes them under a larger fencing token. The
//! pause ends once a later holder has written the paused transfer's first
//! account (or after [`PAUSE_LIMIT`]); the paused worker then sends the
//! write it was about to send, with its old token, and the store refuses
//! it (`DemoReport::fenced_refusals`).
//!
//! The pause never splits another transfer's two writes: a transfer writes
//! two rows, and a pause between them would leave the books off whether
//! the writes are fenced or not — fencing orders each row's writes, it does
//! not make two rows one transaction. So a transfer holds the node's
//! [`Pausable::writing`] guard from its first write to its second, and a
//! pause waits for those in flight.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use lockshift_store::{Request, Response, SharedStore, Store, StoreError};
use tokio::sync::{OwnedRwLockReadGuard, RwLock, watch};
use tokio::time::Instant;

/// The fault: whether it is still to come, from when, how long at least,
/// and what happened (for the report).
#[derive(Debug)]
pub(super) struct PauseFault {
    armed: AtomicBool,
    not_before: Instant,
    /// The shortest pause: past the lease TTL, so the holder's cells expire.
    pub(super) at_least: Duration,
    notes: Mutex<Vec<String>>,
}

impl PauseFault {
    /// A fault that strikes once, the first time a transfer reaches its
    /// writes after `not_before`; `None`: never.
    pub(super) fn new(when: Option<(Instant, Duration)>) -> Self {
        let (not_before, at_least) = when.unwrap_or((Instant::now(), Duration::ZERO));
        PauseFault {
            armed: AtomicBool::new(when.is_some()),
            not_before,
            at_least,
            notes: Mutex::new(Vec::new()),
        }
    }

    /// Whether this caller is the one to pause (true once).
    pub(super) fn claim(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
            && Instant::now() >= self.not_before
            && self.armed.swap(false, Ordering::AcqRel)
    }

    /// Records what happened.
    pub(super) fn note(&self, line: String) {
        self.notes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
    }

    /// What happened, in order.
    pub(super) fn notes(&self) -> Vec<String> {
        self.notes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The longest a paused holder waits for a later holder to write its
/// account before it resumes anyway.
pub(super) const PAUSE_LIMIT: Duration = Duration::from_secs(30);

/// A node's connection that can be paused: while paused, every request
/// waits before it is sent.
#[derive(Debug)]
pub(super) struct Pausable {
    inner: SharedStore,
    running: watch::Sender<bool>,
    /// Held (shared) by each transfer between its two writes; a pause
    /// takes it exclusively first.
    writes: Arc<RwLock<()>>,
}

impl Pausable {
    pub(super) fn new(inner: SharedStore) -> Self {
        Pausable {
            inner,
            running: watch::Sender::new(true),
            writes: Arc::new(RwLock::new(())),
        }
    }

    /// The connection itself, unpaused: what an observer outside the
    /// paused process sees.
    pub(super) fn inner(&self) -> &SharedStore {
        &self.inner
    }

    /// Held from a transfer's first write to its second.
    pub(super) async fn writing(&self) -> OwnedRwLockReadGuard<()> {
        self.writes.clone().read_owned().await
    }

    /// Pauses the node once no transfer of it is between its two writes,
    /// until `resume` resolves.
    pub(super) async fn pause_until(&self, resume: impl Future<Output = ()>) {
        let _no_split = self.writes.write().await;
        self.running.send_replace(false);
        resume.await;
        self.running.send_replace(true);
    }

    async fn gate(&self) {
        let mut running = self.running.subscribe();
        // `wait_for` fails only if the sender is gone: it lives in self.
        let _ = running.wait_for(|r| *r).await;
    }
}

#[async_trait]
impl Store for Pausable {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        self.gate().await;
        self.inner.call(request).await
    }

    fn wraps(&self) -> Option<&dyn Store> {
        Some(&self.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockshift_store::{CellWrite, FencedOutcome, MemoryStore, RowQuery, schema};

    #[tokio::test(start_paused = true)]
    async fn a_paused_connection_sends_nothing_until_resumed() {
        let store = Arc::new(Pausable::new(Arc::new(MemoryStore::new())));
        let (resume, resumed) = tokio::sync::oneshot::channel::<()>();
        let pauser = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .pause_until(async {
                        let _ = resumed.await;
                    })
                    .await
            })
        };
        tokio::task::yield_now().await;
        let writer = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .write_fenced(schema::SCRATCH, "a", &CellWrite::new("c", b"1".to_vec()), 1)
                    .await
            })
        };
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!writer.is_finished(), "a paused node sends nothing");
        let seen = store
            .inner()
            .read(schema::SCRATCH, "a", &RowQuery::all())
            .await;
        assert!(seen.unwrap().is_empty());
        resume.send(()).unwrap();
        pauser.await.unwrap();
        assert!(matches!(
            writer.await.unwrap(),
            Ok(FencedOutcome::Applied { .. })
        ));
    }
}
