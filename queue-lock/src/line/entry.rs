//! [`MainEntry`]: how a waiter of one algorithm writes and verifies `main`
//! — the only part of the line the queue lock and the combined lock do
//! differently. Entries do I/O and report what they read ([`Arrived`],
//! [`Entered`]: plain data, in `lockshift_decide::waiter`); what to make of
//! it is the waiter's decision (`lockshift_decide::waiter`).

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use lockshift_decide::binding::Pacing;
use lockshift_decide::cells::{RESERVED_VALUE, reserved_behind};
use lockshift_lock::{Algorithm, Lease};
use lockshift_store::{Cell, Store, StoreError, schema};

use lockshift_decide::queue::Position;

use lockshift_decide::waiter::{Arrived, Entered, Policy};

/// A boxed store operation (what [`Arrival`] carries).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The queue side of an arrival, handed to [`MainEntry::arrive`]: the
/// write of the waiter's queue cell and the read of its place, to run
/// beside the entry's own writes and reads. `position` must run only after
/// `enqueue` succeeded (before, the cell may not be there yet).
pub struct Arrival<'a> {
    /// Writes the queue cell (through the lease).
    pub enqueue: StoreFuture<'a, ()>,
    /// Reads where the queue cell stands.
    pub position: StoreFuture<'a, Position>,
}

impl Arrival<'_> {
    /// The slow path: enqueue, then read the place, nothing else — what an
    /// entry without a fast path does, and what one with a fast path does
    /// when the line says not to take it.
    ///
    /// # Errors
    /// The store error of either step.
    pub async fn enqueue_then_place(self) -> Result<Arrived, StoreError> {
        self.enqueue.await?;
        Ok(Arrived {
            position: self.position.await?,
            main: None,
            wrote: false,
        })
    }
}

impl fmt::Debug for Arrival<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Arrival")
    }
}

/// How the first waiter in line writes and verifies `main`.
///
/// Every write goes through the lease (TTL, renewal, cleanup). Each method
/// does only I/O and says what it read; the waiter decides, by what it
/// read and by the entry's [`Policy`] (a value the line hands the waiter).
/// Methods whose I/O depends on how the acquisition paces itself take its
/// [`Pacing`] as it stands at that step (only the combined lock reads it).
#[async_trait]
pub trait MainEntry: Send + Sync + fmt::Debug {
    /// The algorithm this entry belongs to.
    fn algorithm(&self) -> Algorithm;

    /// How this entry behaves, as the waiter needs to know it.
    fn policy(&self) -> Policy;

    /// The value of a holding `main` cell.
    fn holding_value(&self) -> &'static [u8] {
        self.algorithm().as_str().as_bytes()
    }

    /// Arrives: writes the queue cell and reads the place. The default is
    /// the slow path — enqueue, then read the place, nothing else. An entry
    /// with a fast path writes its own cells beside the queue cell and reads
    /// `main` after them, so an uncontended acquisition ends here.
    ///
    /// # Errors
    /// A store error; what was written stays registered with the lease.
    async fn arrive(
        &self,
        _store: &dyn Store,
        _lease: &Lease,
        arrival: Arrival<'_>,
        _fast: bool,
        _pacing: Pacing,
    ) -> Result<Arrived, StoreError> {
        arrival.enqueue_then_place().await
    }

    /// One attempt at `main` by the first waiter: write my `main` cell,
    /// then read `main` (Q1). `shadow_checked`: the last attempt ended
    /// [`Entered::Blocked`] with its preparation standing, and nothing
    /// failed since.
    ///
    /// # Errors
    /// A store error; what was written stays registered with the lease and
    /// [`tidy`](MainEntry::tidy) removes it.
    async fn enter(
        &self,
        store: &dyn Store,
        lease: &Lease,
        shadow_checked: bool,
        pacing: Pacing,
    ) -> Result<Entered, StoreError>;

    /// Whether a read showing my cell alone may hand me the lock now (the
    /// combined lock also needs its `shadow` cell to have lived throughout).
    fn can_claim(&self, lease: &Lease) -> bool {
        lease.check_valid().is_ok()
    }

    /// Second in line: writes my cells reserved behind `ahead` (a mark:
    /// owner id and arrival) — by default my `main` cell, marked with
    /// [`reserved_behind`].
    ///
    /// # Errors
    /// A store error; what was written stays registered with the lease and
    /// [`tidy`](MainEntry::tidy) removes it.
    async fn reserve_behind(
        &self,
        _store: &dyn Store,
        lease: &Lease,
        ahead: &str,
    ) -> Result<(), StoreError> {
        lease
            .write(
                schema::MAIN,
                lease.owner().as_str(),
                &reserved_behind(self.algorithm(), ahead),
            )
            .await
    }

    /// Reserved behind another waiter: besides the place in line, what my
    /// claim needs before my reads of `main` count (the combined lock: my
    /// `shadow` cell read alone). `true`, the default: nothing.
    ///
    /// # Errors
    /// A store error.
    async fn ready_behind(&self, _store: &dyn Store, _lease: &Lease) -> Result<bool, StoreError> {
        Ok(true)
    }

    /// After the lock was taken: drops in the background what a holder no
    /// longer needs (by default nothing; the line itself re-marks a
    /// reservation and leaves the queue).
    fn settle(&self, _lease: &Lease) {}

    /// Removes what a failed or withdrawn attempt left (by default, any
    /// `main` cell of this lease).
    ///
    /// # Errors
    /// A store error; the cells stay registered.
    async fn tidy(&self, lease: &Lease) -> Result<(), StoreError> {
        lease.delete_all_in(schema::MAIN).await
    }
}

/// Writes `lease`'s `main` cell marked a reservation, then reads `main`:
/// the queue lock's whole entry, and the end of the combined lock's.
///
/// # Errors
/// The store error of either step.
pub async fn reserve_and_read(store: &dyn Store, lease: &Lease) -> Result<Vec<Cell>, StoreError> {
    lease
        .write(schema::MAIN, lease.owner().as_str(), RESERVED_VALUE)
        .await?;
    read_main(store, lease).await
}

/// Reads `main` for `lease`'s lock: the whole row (at least
/// [`MAIN_CELLS_READ`] cells, what telling where my cell stands needs).
///
/// [`MAIN_CELLS_READ`]: lockshift_decide::waiter::handoff::MAIN_CELLS_READ
///
/// Whole, not `LIMIT` `MAIN_CELLS_READ`: Q1 judges by what the read does
/// *not* show, and a CQL row whose value cell is gone (its row marker
/// outlived it) still takes a place within a limit while it is no cell
/// (the CQL backend's `rows` module) — a limited read could stop short of
/// a holder sorted after such rows and show my cell "alone". `main` holds a
/// handful of live cells and at most one tombstone per slot (§2a), and a
/// limited read that finds fewer live cells than its limit passes all of
/// them anyway, so the whole row costs what the limited read cost.
///
/// # Errors
/// The store error.
pub async fn read_main(store: &dyn Store, lease: &Lease) -> Result<Vec<Cell>, StoreError> {
    store
        .read(
            schema::MAIN,
            lease.lock().as_str(),
            &lockshift_store::RowQuery::all(),
        )
        .await
}
